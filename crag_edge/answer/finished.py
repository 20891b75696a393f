"""The answer once it is written: one value every face renders (the CLI, the TUI,
`/v1/answer`, the chat API's `crag` object, MCP's `answer` tool), so none of them puts the
end of an answer together on its own and all of them give one JSON shape.

`AnswerStream` is what `Engine.answer` returns: the shown sentences as they are released,
timed from the moment the evidence is ready (`answer.timing`); once it has ended, its
`answer` is the finished `Answer`. `Answer.to_dict()` is the shape, every key always present
(`follow_up` only for a follow-up question, as in every verdict):

- `question`, `follow_up`, `decision`, `meaning`, `reason`, `insufficient_evidence`: the
  loop's verdict (`answer.views.verdict`); `corrections` (`{"type", ...}` each, in order)
  and `warnings`: what the loop did and set aside on the way;
- `answer`: the text shown; `finish_reason` (`generation.AnswerFinish`);
- `note` and `refusal`: why there is no whole answer and what to do next
  (`answer.refusal`), null for a whole answer;
- `citations`: the passages the answer cites, in order of first citation, each with its
  place (`locator`), its `text`, and `places`: the narrower places (row, slide, page) of it
  that state one of its sentences (`{"locator", "claim"}` each, `answer.narrowing`);
- `sources`: every numbered passage of the context, cited or not (`cited`), without text;
- `support`: the check of every sentence the model wrote (`answer.checked.SupportReport`;
  no sentences when no model was called);
- `timings`: where the time went, in seconds (`answer.timing.AnswerTimings`).
"""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from crag_edge.answer.checked import CheckedAnswer, SupportReport
from crag_edge.answer.generation import AnswerFinish, cited, uncited
from crag_edge.answer.refusal import Refusal, refusal
from crag_edge.answer.timing import AnswerClock, AnswerTimings
from crag_edge.answer.views import sources, verdict
from crag_edge.cancellation import Cancellation, maybe_scope
from crag_edge.config import ModelSettings
from crag_edge.models.chat_model import TextStream
from crag_edge.progress import StageEvent, StageListener
from crag_edge.result import ContextItem, CragResult


@dataclass(frozen=True)
class Narrowed:
    """A narrower place of a cited passage (its row, slide or page) that states `claim`, one
    sentence of the answer: where a reader checks that sentence."""

    locator: str
    claim: str


@dataclass(frozen=True)
class Citation:
    """A passage the answer cites, with the narrower places of it its sentences were found
    in (none when the passage's own place is as narrow as it gets)."""

    item: ContextItem
    places: tuple[Narrowed, ...] = ()


@dataclass(frozen=True)
class Answer:
    """The finished answer: the `result` it was written from, the `text` shown and why it
    ended, its `citations`, the `refusal` when there is no whole answer, the support check's
    report and its `timings`."""

    result: CragResult
    text: str
    finish_reason: AnswerFinish
    citations: tuple[Citation, ...]
    refusal: Refusal | None
    support: SupportReport
    timings: AnswerTimings

    @property
    def note(self) -> str | None:
        """One line on why there is no whole answer and what to do next; None for one."""
        return None if self.refusal is None else self.refusal.note

    @property
    def uncited(self) -> bool:
        """Written from the context, yet citing none of it: its claims cannot be traced."""
        return uncited(self.text, self.result)

    def to_dict(self) -> dict[str, Any]:
        """The one JSON shape of an answer (module docstring)."""
        numbers = {citation.item.n for citation in self.citations}
        quoted = sources([citation.item for citation in self.citations], with_text=True)
        return verdict(self.result) | {
            "corrections": [{"type": c.type, **c.detail} for c in self.result.corrections],
            "warnings": list(self.result.warnings),
            "answer": self.text,
            "finish_reason": self.finish_reason,
            "note": self.note,
            "refusal": None if self.refusal is None else self.refusal.to_dict(),
            "citations": [
                source | {"places": [{"locator": p.locator, "claim": p.claim} for p in c.places]}
                for source, c in zip(quoted, self.citations, strict=True)
            ],
            "sources": [s | {"cited": s["n"] in numbers} for s in sources(self.result.context)],
            "support": self.support.to_dict(),
            "timings": self.timings.to_dict(),
        }


def citations_of(text: str, result: CragResult, support: SupportReport) -> tuple[Citation, ...]:
    """The passages `text` cites, each with the narrower places its sentences were found in."""
    return tuple(
        Citation(item, tuple(Narrowed(*place) for place in support.narrowed(item)))
        for item in cited(text, result.context)
    )


class AnswerStream(TextStream[AnswerFinish]):
    """The checked answer as a reader gets it, timed; read `answer` once it has ended.
    `progress` hears the `answer` stage's end (with its duration) when the stream is
    exhausted. Each piece is written inside `cancel`'s scope (the stream is read on whichever
    thread its reader uses), so a cancelled answer stops at its next token or judged
    sentence."""

    def __init__(
        self,
        checked: CheckedAnswer,
        result: CragResult,
        models: ModelSettings,
        clock: AnswerClock,
        progress: StageListener | None = None,
        cancel: Cancellation | None = None,
    ) -> None:
        self._checked, self._result, self._models = checked, result, models
        self._clock, self._progress, self._cancel = clock, progress, cancel
        self._answer: Answer | None = None
        super().__init__(self._timed(), checked.usage)

    def _timed(self) -> Generator[str, None, AnswerFinish]:
        try:
            while (piece := self._next_piece()) is not None:
                self._clock.piece()
                yield piece
        finally:
            self._checked.close()
        self._clock.ended()
        if self._progress is not None:
            ms = round(self._clock.answer_s * 1000, 3)
            self._progress(StageEvent("answer", "end", ms=ms))
        return self._checked.finish_reason

    def _next_piece(self) -> str | None:
        """The checked stream's next piece, None at its end; the scope is left before the
        piece is handed on, since the reader may read the next one elsewhere."""
        with maybe_scope(self._cancel):
            if self._cancel is not None:
                self._cancel.check()
            return next(self._checked, None)

    @property
    def answer(self) -> Answer:
        """The finished answer (the stream must have ended)."""
        if self._answer is None:
            text, finish, support = self.text, self.finish_reason, self._checked.support
            self._answer = Answer(
                self._result,
                text,
                finish,
                citations_of(text, self._result, support),
                refusal(finish, text, self._result, self._models),
                support,
                self._clock.timings(self.usage),
            )
        return self._answer
