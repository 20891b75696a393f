"""Where an answer's time goes, as a reader waits for it: measured here and nowhere else.

An `AnswerClock` starts with the question; `TimedAnswer` wraps the answer stream and times
it with `time.perf_counter` from the moment the evidence is ready (the corrective loop's end,
or plain retrieval's) to the first piece and to the last. The prompt's length
and the part of it evaluated (the rest reused from the KV cache, `models.prefix_states`) come
from the runtime (`PromptUsage`); None where no model was called or an LLM server cannot tell.
"""

from __future__ import annotations

import time
from collections.abc import Generator
from dataclasses import asdict, dataclass
from typing import Any

from crag_edge.answer.checked import CheckedAnswer, SupportReport
from crag_edge.answer.generation import AnswerFinish
from crag_edge.cancellation import Cancellation, maybe_scope
from crag_edge.models.chat_model import FinishReason, TextStream
from crag_edge.progress import StageEvent, StageListener


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
    """Started when the question arrives; `evidence_ready` when its context is, then
    `time` wraps the answer stream written from that context."""

    def __init__(self) -> None:
        self._started = time.perf_counter()
        self._ready: float | None = None

    def evidence_ready(self) -> None:
        self._ready = time.perf_counter()

    def time(
        self,
        stream: TextStream[AnswerFinish] | TextStream[FinishReason],
        progress: StageListener | None = None,
        cancel: Cancellation | None = None,
    ) -> TimedAnswer:
        if self._ready is None:
            self.evidence_ready()
        assert self._ready is not None
        return TimedAnswer(stream, self._started, self._ready, progress, cancel)


class TimedAnswer(TextStream[AnswerFinish]):
    """An answer stream that times itself; read `timings` once it has ended. `progress`
    hears the `answer` stage's end (with its duration) when the stream is exhausted. Each
    piece is written inside `cancel`'s scope (the stream is read on whichever thread its
    reader uses), so a cancelled answer stops at its next token or judged sentence."""

    def __init__(
        self,
        stream: TextStream[AnswerFinish] | TextStream[FinishReason],
        started: float,
        ready: float,
        progress: StageListener | None,
        cancel: Cancellation | None = None,
    ) -> None:
        self._inner = stream
        self._started, self._ready = started, ready
        self._first: float | None = None
        self._end: float | None = None
        self._progress = progress
        self._cancel = cancel
        super().__init__(self._timed(), stream.usage)

    def _timed(self) -> Generator[str, None, AnswerFinish]:
        try:
            while (piece := self._next_piece()) is not None:
                if self._first is None:
                    self._first = time.perf_counter()
                yield piece
        finally:
            self._inner.close()
        self._end = time.perf_counter()
        if self._progress is not None:
            ms = round((self._end - self._ready) * 1000, 3)
            self._progress(StageEvent("answer", "end", ms=ms))
        return self._inner.finish_reason

    def _next_piece(self) -> str | None:
        """The inner stream's next piece, None at its end; the scope is left before the piece
        is handed on, since the reader may read the next one elsewhere."""
        with maybe_scope(self._cancel):
            if self._cancel is not None:
                self._cancel.check()
            return next(self._inner, None)

    @property
    def support(self) -> SupportReport | None:
        """The support check's report of a checked answer (`Engine.answer`'s), None for an
        unchecked one (plain RAG's in the measurements)."""
        return self._inner.support if isinstance(self._inner, CheckedAnswer) else None

    @property
    def timings(self) -> AnswerTimings:
        if self._end is None:
            raise RuntimeError("the answer has not ended: read timings after the last piece")
        return AnswerTimings(
            retrieval_grading_s=self._ready - self._started,
            first_token_s=None if self._first is None else self._first - self._ready,
            answer_s=self._end - self._ready,
            prompt_tokens=self.usage.prompt_tokens,
            evaluated_tokens=self.usage.evaluated_tokens,
        )
