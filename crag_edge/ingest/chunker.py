"""Token-aware chunking with the embedder's own tokenizer.

Sizes are counted in the tokens the embedder will see, so a chunk is never silently truncated
at embedding time, and the tokenizer's character offsets give every chunk exact `start`/`end`
positions in the document text (`text[start:end] == chunk.text`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tokenizers import Tokenizer

# How far back the next chunk may start so that the overlap does not begin mid-word.
_MAX_WORD_TOKENS = 8
# Long texts are tokenized in pieces cut at whitespace: one huge `encode` is slower than
# linear and single-threaded, `encode_batch` over pieces is linear and uses every core.
_SEGMENT_CHARS = 16384
_SENTENCE_END = re.compile("[.!?\u3002\uff01\uff1f\u2026][\"'\u201d\u2019)\\]]*$")

# Boundary quality between two tokens: the chunker cuts at the best one near the window end.
_INSIDE_CHAR, _INSIDE_WORD, _WORD, _SENTENCE, _LINE, _PARAGRAPH = -1, 0, 1, 2, 3, 4


@dataclass(frozen=True)
class TextSpan:
    """A chunk: `text == document[start:end]`, `token_count` tokens of the embedder."""

    text: str
    start: int
    end: int
    token_count: int


class Chunker:
    """Splits text into windows of at most `chunk_tokens` tokens sharing about `overlap`.

    A window ends at the best boundary in its second half (paragraph, then line, sentence,
    word), so chunks read as whole passages; the next one starts `overlap` tokens earlier,
    moved back to the start of a word.
    """

    def __init__(self, tokenizer: Tokenizer, chunk_tokens: int, overlap: int) -> None:
        if chunk_tokens < 1 or not 0 <= overlap < chunk_tokens:
            raise ValueError(f"need 0 <= overlap ({overlap}) < chunk_tokens ({chunk_tokens})")
        self.chunk_tokens = chunk_tokens
        self.overlap = overlap
        # A private copy: the embedder may configure truncation/padding on the shared one.
        self._tokenizer = Tokenizer.from_str(tokenizer.to_str())
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def split(self, text: str) -> list[TextSpan]:
        """The chunks of `text`, in order; none for empty or whitespace-only text."""
        offsets = self._token_offsets(text)
        spans: list[TextSpan] = []
        first, count = 0, len(offsets)
        while first < count:
            stop = min(first + self.chunk_tokens, count)
            if stop < count:
                lowest = first + max(self.chunk_tokens // 2, self.overlap + 1)
                stop = _best_cut(text, offsets, min(lowest, stop), stop)
            start, end = offsets[first][0], offsets[stop - 1][1]
            spans.append(TextSpan(text[start:end], start, end, stop - first))
            if stop == count:
                break
            first = self._next_first(text, offsets, first, stop)
        return spans

    def _token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character (start, end) of every token of `text`."""
        segments = _segments(text)
        encodings = self._tokenizer.encode_batch(
            [text[start:end] for start, end in segments], add_special_tokens=False
        )
        return [
            (base + start, base + end)
            for (base, _), encoding in zip(segments, encodings, strict=True)
            for start, end in encoding.offsets
            if end > start
        ]

    def _next_first(self, text: str, offsets: list[tuple[int, int]], first: int, stop: int) -> int:
        target = max(stop - self.overlap, first + 1)
        if target == stop:
            return stop
        for k in range(target, max(first + 1, target - _MAX_WORD_TOKENS) - 1, -1):
            if _boundary(text, offsets, k) >= _WORD:
                return k
        return target


def _segments(text: str) -> list[tuple[int, int]]:
    """(start, end) pieces of about `_SEGMENT_CHARS`, cut after a newline or a space."""
    pieces, start = [], 0
    while start < len(text):
        end = min(start + _SEGMENT_CHARS, len(text))
        if end < len(text):
            cut = text.rfind("\n", start + 1, end)
            cut = cut if cut > start else text.rfind(" ", start + 1, end)
            end = cut if cut > start else end
        pieces.append((start, end))
        start = end
    return pieces


def _best_cut(text: str, offsets: list[tuple[int, int]], lowest: int, highest: int) -> int:
    """The token index in [lowest, highest] to cut before: best boundary, latest on ties."""
    best, best_score = highest, _INSIDE_CHAR - 1
    for k in range(highest, lowest - 1, -1):
        score = _boundary(text, offsets, k)
        if score > best_score:
            best, best_score = k, score
            if score == _PARAGRAPH:
                break
    return best


def _boundary(text: str, offsets: list[tuple[int, int]], k: int) -> int:
    """How good a cut between token k-1 and token k is."""
    previous_end, next_start = offsets[k - 1][1], offsets[k][0]
    if next_start < previous_end:
        return _INSIDE_CHAR
    gap = text[previous_end:next_start]
    newlines = gap.count("\n")
    if newlines >= 2:
        return _PARAGRAPH
    if newlines == 1:
        return _LINE
    if not gap:
        return _INSIDE_WORD
    if _SENTENCE_END.search(text, max(0, previous_end - 4), previous_end):
        return _SENTENCE
    return _WORD
