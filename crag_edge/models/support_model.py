"""The support model: whether a passage states a sentence, read with the sentence before it.

A small cross-encoder trained for this one question
(`crag_edge/shipped_models/support_model/`, the model card says how): its input is "question
[SEP] previous sentence [SEP] sentence" against a passage, so a sentence that points back
("This feature is known as …") is read with what it points to, a quote placed after a
sentence about something else can fail although its words are the passage's own, and a
sentence the passage states about something the question did not ask can fail too. A
passage longer than the model reads well is read in overlapping windows of whole sentences
(as it was trained) and its score is its best window's: a fact stated anywhere in it
counts, wherever it stands.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from crag_edge.models.cross_encoder import OnnxCrossEncoder
from crag_edge.sentences import sentence_spans

SEPARATOR = " [SEP] "  # the tokenizer reads it as its own [SEP] token
WINDOW_WORDS = 64  # a window's words at most (a single longer sentence is one window)
MAX_LENGTH = 128  # tokens of one (input, window) pair, as trained


def support_input(sentence: str, previous: str = "", question: str = "") -> str:
    """What the model reads of a sentence: the question and the sentence before it first.
    With a question, its three parts always stand in their places (an empty previous
    sentence leaves its place empty), so the model knows which part is which."""
    sentence, previous, question = sentence.strip(), previous.strip(), question.strip()
    if question:
        return f"{question}{SEPARATOR}{previous}{SEPARATOR}{sentence}"
    return f"{previous}{SEPARATOR}{sentence}" if previous else sentence


def passage_windows(passage: str, words: int = WINDOW_WORDS) -> list[str]:
    """Runs of whole sentences of at most `words` words, each starting one sentence after
    the previous window's last, so a sentence and the one before it share a window."""
    sentences = [passage[a:b] for a, b in sentence_spans(passage)] or [passage]
    windows: list[str] = []
    start = 0
    while start < len(sentences):
        end, count = start, 0
        while end < len(sentences) and (end == start or count + _words(sentences[end]) <= words):
            count += _words(sentences[end])
            end += 1
        windows.append(" ".join(sentences[start:end]))
        if end == len(sentences):
            break
        start = end - 1 if end - 1 > start else end
    return windows


def _words(text: str) -> int:
    return len(text.split())


class SupportModel:
    """P(stated) of a sentence on each of some passages: the best window of each."""

    def __init__(self, onnx_path: Path, tokenizer_path: Path, model_id: str, threads: int = 0):
        self._scorer = OnnxCrossEncoder(
            onnx_path, tokenizer_path, model_id, threads=threads, max_length=MAX_LENGTH
        )

    @property
    def name(self) -> str:
        return self._scorer.name

    def scores(
        self, sentence: str, passages: Sequence[str], previous: str = "", question: str = ""
    ) -> list[float]:
        windows = [passage_windows(p) for p in passages]
        flat = [w for group in windows for w in group]
        scored = self._scorer.score(support_input(sentence, previous, question), flat).scores
        best, at = [], 0
        for group in windows:
            best.append(max(scored[at : at + len(group)]))
            at += len(group)
        return best
