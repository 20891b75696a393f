"""Token-aware chunking with the embedder's own tokenizer.

Sizes are counted in the tokens the embedder will see, so a chunk is never silently truncated
at embedding time, and the tokenizer's character offsets give every chunk exact `start`/`end`
positions in the document text (`text[start:end] == chunk.text`).
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from tokenizers import Tokenizer

from crag_edge.sentences import sentence_spans

# Long texts are tokenized in pieces cut at whitespace: one huge `encode` is slower than
# linear and single-threaded, `encode_batch` over pieces is linear and uses every core.
_SEGMENT_CHARS = 16384
# A stretch of text the tokenizer reads as one token or as none is no word when it is longer
# than this: WordPiece reads a word of over 100 characters (a base64 blob, a DNA sequence, a
# line without spaces) as one unknown token, a letter under thousands of combining marks as
# that letter, and drops a run of zero-width characters. Counted as one token or as none, such
# a run made a chunk of megabytes that no answer's context holds; it counts as one token per
# `_RUN_PIECE_CHARS` characters instead (about a token of prose), and a chunk may end between.
_LONGEST_TOKEN_CHARS = 32
_RUN_PIECE_CHARS = 8
# A blank stretch the tokenizer skips, longer than this, ends a chunk: counted as no token, a
# megabyte of spaces between two words made one chunk of a megabyte. No prose or code holds a
# kilobyte of blanks in a row; a padded export or a hostile file does.
_LONGEST_BLANK_CHARS = 1024
_HEADING_LINE = re.compile(r"#{1,6}\s")

# Boundary quality between two tokens: the chunker cuts at the best one near the window end.
# A single line break ranks below a sentence end: hard-wrapped prose breaks lines mid-sentence,
# while lists, tables and code (whose lines are their units) rarely have sentence ends at all.
_INSIDE_CHAR, _INSIDE_WORD, _WORD, _LINE, _SENTENCE, _HEADING, _PARAGRAPH = range(-1, 6)


@dataclass(frozen=True)
class TextSpan:
    """A chunk: `text == document[start:end]`, `token_count` tokens of the embedder (a run it
    reads as one token or none counts as its pieces: `_with_runs_in_pieces`)."""

    text: str
    start: int
    end: int
    token_count: int


class Chunker:
    """Splits text into windows of at most `chunk_tokens` tokens sharing at most `overlap`.

    A window ends at the best boundary in its second half (paragraph, heading, sentence, line,
    word), so chunks read as whole passages. The next one starts at the earliest boundary
    within the last `overlap` tokens that is as good as that end, up to a sentence start: in
    prose every chunk starts and ends with a whole sentence, and neighbours share whole
    sentences (fewer than `overlap` tokens, none when no sentence starts in the overlap).
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
        starts = frozenset(start for start, _ in sentence_spans(text))
        tokens = _Tokens(text, self._token_offsets(text), starts)
        offsets = tokens.offsets
        walls = _blank_walls(offsets)
        spans: list[TextSpan] = []
        first, count = 0, len(offsets)
        while first < count:
            wall = walls[bisect.bisect_right(walls, first)]
            stop = min(first + self.chunk_tokens, wall)
            if stop < wall:
                lowest = first + max(self.chunk_tokens // 2, self.overlap + 1)
                stop = _best_cut(tokens, min(lowest, stop), stop)
            start, end = offsets[first][0], offsets[stop - 1][1]
            spans.append(TextSpan(text[start:end], start, end, stop - first))
            if stop == count:
                break
            first = stop if stop == wall else self._next_first(tokens, first, stop)
        return spans

    def _token_offsets(self, text: str) -> list[tuple[int, int]]:
        """Character (start, end) of every token of `text`."""
        segments = _segments(text)
        encodings = self._tokenizer.encode_batch(
            [text[start:end] for start, end in segments], add_special_tokens=False
        )
        tokens = [
            (base + start, base + end)
            for (base, _), encoding in zip(segments, encodings, strict=True)
            for start, end in encoding.offsets
            if end > start
        ]
        return _with_runs_in_pieces(text, tokens)

    def _next_first(self, tokens: _Tokens, first: int, stop: int) -> int:
        """Where the chunk after [first, stop) starts: a chunk that ends with a sentence shares
        only whole sentences; one cut inside a sentence (too long for a chunk) or inside a
        list shares whole words or lines, which start mid-sentence either way."""
        wanted = min(tokens.boundary(stop), _SENTENCE)
        for k in range(max(stop - self.overlap, first + 1), stop):
            if tokens.boundary(k) >= wanted:
                return k
        return stop


@dataclass(frozen=True)
class _Tokens:
    """A text's tokens and where its sentences start: everything a cut decision reads."""

    text: str
    offsets: list[tuple[int, int]]
    sentence_starts: frozenset[int]

    def boundary(self, k: int) -> int:
        """How good a cut between token k-1 and token k is."""
        previous_end, next_start = self.offsets[k - 1][1], self.offsets[k][0]
        if next_start < previous_end:
            return _INSIDE_CHAR
        gap = self.text[previous_end:next_start]
        newlines = gap.count("\n")
        if newlines >= 2:
            return _PARAGRAPH
        if newlines == 1 and _HEADING_LINE.match(self.text, next_start):
            return _HEADING
        if gap and next_start in self.sentence_starts:
            return _SENTENCE
        if newlines == 1:
            return _LINE
        return _WORD if gap else _INSIDE_WORD


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


def _with_runs_in_pieces(text: str, tokens: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """`tokens`, each run over `_LONGEST_TOKEN_CHARS` characters that the tokenizer read as one
    token, or skipped (the text between two tokens, trimmed of whitespace), as its pieces."""
    readable: list[tuple[int, int]] = []
    previous_end = 0
    for start, end in [*tokens, (len(text), len(text))]:
        skipped = text[previous_end:start]
        lead, trail = len(skipped) - len(skipped.lstrip()), len(skipped) - len(skipped.rstrip())
        readable.extend(_pieces(previous_end + lead, start - trail, skipped=True))
        readable.extend(_pieces(start, end, skipped=False))
        previous_end = max(previous_end, end)
    return readable


def _pieces(start: int, end: int, *, skipped: bool) -> list[tuple[int, int]]:
    """[start, end) as pieces of `_RUN_PIECE_CHARS` when it is a run too long for one token;
    else the token itself, or nothing for skipped text."""
    if end - start > _LONGEST_TOKEN_CHARS:
        return [(at, min(at + _RUN_PIECE_CHARS, end)) for at in range(start, end, _RUN_PIECE_CHARS)]
    return [] if skipped or end <= start else [(start, end)]


def _blank_walls(offsets: list[tuple[int, int]]) -> list[int]:
    """The token indices a chunk may not reach past: those after a blank stretch longer than
    `_LONGEST_BLANK_CHARS`, then the end (`len(offsets)`)."""
    walls = [
        k
        for k in range(1, len(offsets))
        if offsets[k][0] - offsets[k - 1][1] > _LONGEST_BLANK_CHARS
    ]
    return [*walls, len(offsets)]


def _best_cut(tokens: _Tokens, lowest: int, highest: int) -> int:
    """The token index in [lowest, highest] to cut before: best boundary, latest on ties."""
    best, best_score = highest, _INSIDE_CHAR - 1
    for k in range(highest, lowest - 1, -1):
        score = tokens.boundary(k)
        if score > best_score:
            best, best_score = k, score
            if score == _PARAGRAPH:
                break
    return best
