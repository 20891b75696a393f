"""Where an answer's time goes, as a reader waits for it: measured here and nowhere else.

An `AnswerClock` starts with the question and times the answer with `time.perf_counter`
from the moment the evidence is ready (the corrective loop's end, or plain retrieval's) to
the first piece and to the last, as the stream that reads it (`answer.finished.AnswerStream`,
or plain RAG's reader) tells it. The prompt's length
and the part of it evaluated (the rest reused from the KV cache, `models.prefix_states`) come
from the runtime (`PromptUsage`); None where no model was called or an LLM server cannot tell.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

from crag_edge.models.chat_model import PromptUsage


@dataclass(frozen=True)
class AnswerTimings:
    """Seconds: `retrieval_grading_s` from the question to the final context (retrieval,
    grading, corrections, refinement); `first_token_s` from then to the answer's first piece
    (loading the model, evaluating the prompt, the first token; None for an answer that
    never produced one); `answer_s` from then to its last piece."""

    retrieval_grading_s: float
    first_token_s: float | None
    answer_s: float
    prompt_tokens: int | None
    evaluated_tokens: int | None

    @property
    def total_s(self) -> float:
        """Question to complete answer."""
        return self.retrieval_grading_s + self.answer_s

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self) | {"total_s": self.total_s}
        return {k: round(v, 3) if isinstance(v, float) else v for k, v in data.items()}


def timings_line(timings: AnswerTimings) -> str:
    """One line for people: `evidence 1.2 s · first word 2.4 s later · answer 9.8 s ·
    prompt 412 tokens, 330 evaluated`."""
    parts = [f"evidence {timings.retrieval_grading_s:.1f} s"]
    if timings.first_token_s is not None:
        parts.append(f"first word {timings.first_token_s:.1f} s later")
    parts.append(f"answer {timings.answer_s:.1f} s")
    if timings.prompt_tokens is not None:
        evaluated = timings.evaluated_tokens
        tail = "" if evaluated is None else f", {evaluated} evaluated"
        parts.append(f"prompt {timings.prompt_tokens} tokens{tail}")
    return " · ".join(parts)


class AnswerClock:
    """Started when the question arrives; `evidence_ready` when its context is, then told of
    the answer's first piece (`piece`) and its end (`ended`)."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._ready: float | None = None
        self._first: float | None = None
        self._end: float | None = None

    def evidence_ready(self) -> None:
        self._ready = time.perf_counter()

    def piece(self) -> None:
        """A piece of the answer reached its reader (only the first one counts)."""
        if self._first is None:
            self._first = time.perf_counter()

    def ended(self) -> None:
        self._end = time.perf_counter()

    def read(self, pieces: Iterable[str]) -> Iterator[str]:
        """`pieces`, timed: evidence ready when the first is asked for, ended after the last."""
        if self._ready is None:
            self.evidence_ready()
        for piece in pieces:
            self.piece()
            yield piece
        self.ended()

    @property
    def answer_s(self) -> float:
        """From the evidence to the answer's last piece."""
        if self._end is None or self._ready is None:
            raise RuntimeError("the answer has not ended: read timings after the last piece")
        return self._end - self._ready

    def timings(self, usage: PromptUsage) -> AnswerTimings:
        """Where the time went, with the prompt's `usage` (the answer must have ended)."""
        answer_s = self.answer_s
        assert self._ready is not None
        return AnswerTimings(
            retrieval_grading_s=self._ready - self._started,
            first_token_s=None if self._first is None else self._first - self._ready,
            answer_s=answer_s,
            prompt_tokens=usage.prompt_tokens,
            evaluated_tokens=usage.evaluated_tokens,
        )
