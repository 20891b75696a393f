"""The loop's state: the question as asked (`Request`), where it stands (`Phase`), what moves
it on (`Event`), the table of moves (`TRANSITIONS`), and the state object `Run`, whose fields
change only in `Run.transition`. The journal (corrections, audit events, warnings) is appended
to as the work happens, in the order it happens.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Literal

from crag_edge.correction.fallback import FallbackOutcome
from crag_edge.grading import Grading, ItemGrade
from crag_edge.groups import CorpusView
from crag_edge.models.chat_model import Message
from crag_edge.observability import AuditLog
from crag_edge.progress import StageListener, Stopwatch
from crag_edge.result import Correction, Round
from crag_edge.retrieval import Mode
from crag_edge.types import Hit, Vector

StopReason = Literal[
    "correct", "max_iterations", "no_untried_query", "no_new_evidence", "insufficient_evidence"
]
# Stops after which the kept evidence is answered from (the others have none to answer from).
ANSWERING_STOPS = ("correct", "max_iterations", "no_untried_query", "no_new_evidence")
QueryKey = tuple[str, str]  # (query, strategy) as compared: case and spacing ignored


class Phase(Enum):
    """Where a run stands: the work it does next."""

    SEARCH = "search"  # the question's own search, in the mode asked for
    GRADE = "grade"  # a round's hits wait to be graded and decided
    WIDEN = "widen"  # graded AMBIGUOUS: search with the first query not run yet
    RECOVER = "recover"  # graded INCORRECT: all discarded; the fallback, then the other strategy
    STOPPED = "stopped"  # a stop reason is set: refine what is kept and answer from it


class Event(Enum):
    """What a phase's work found."""

    SEARCHED = "searched"  # the question's own search ran
    CORRECT = "correct"  # the round was graded CORRECT
    LAST_ROUND = "last_round"  # graded anything else in round `max_iterations`
    AMBIGUOUS = "ambiguous"
    INCORRECT = "incorrect"
    NEW_EVIDENCE = "new_evidence"  # a search or the fallback found chunks not graded yet
    NO_UNTRIED_QUERY = "no_untried_query"  # every widening of the question was run already
    NO_NEW_EVIDENCE = "no_new_evidence"  # the widenings found nothing not graded already
    NOTHING_TRUSTWORTHY = "nothing_trustworthy"  # recovery found nothing new, or had no query


TRANSITIONS: dict[tuple[Phase, Event], tuple[Phase, StopReason | None]] = {
    (Phase.SEARCH, Event.SEARCHED): (Phase.GRADE, None),
    (Phase.GRADE, Event.CORRECT): (Phase.STOPPED, "correct"),
    (Phase.GRADE, Event.LAST_ROUND): (Phase.STOPPED, "max_iterations"),
    (Phase.GRADE, Event.AMBIGUOUS): (Phase.WIDEN, None),
    (Phase.GRADE, Event.INCORRECT): (Phase.RECOVER, None),
    (Phase.WIDEN, Event.NEW_EVIDENCE): (Phase.GRADE, None),
    (Phase.WIDEN, Event.NO_UNTRIED_QUERY): (Phase.STOPPED, "no_untried_query"),
    (Phase.WIDEN, Event.NO_NEW_EVIDENCE): (Phase.STOPPED, "no_new_evidence"),
    (Phase.RECOVER, Event.NEW_EVIDENCE): (Phase.GRADE, None),
    (Phase.RECOVER, Event.NOTHING_TRUSTWORTHY): (Phase.STOPPED, "insufficient_evidence"),
}


@dataclass(frozen=True)
class Request:
    """One question as the engine hands it to the loop, its arguments checked and repaired
    (`Engine.query` documents each): one object, so that a new option is written once on its
    way from the engine to the run. `mode` and `top_k` left None take the settings' values;
    `view` has no default, so a request cannot forget whose question it is."""

    question: str
    view: CorpusView  # what the caller may see: every search is limited to it
    mode: Mode | None = None
    top_k: int | None = None
    progress: StageListener | None = None
    history: Sequence[Message] = ()


def query_key(query: str, strategy: str) -> QueryKey:
    return " ".join(query.lower().split()), strategy


@dataclass(frozen=True)
class NextRound:
    """The hits the next round grades, and where they came from."""

    query: str
    strategy: str  # "fallback" for the fallback's results
    hits: list[Hit]
    source: str = "search"  # or "fallback"


@dataclass(frozen=True)
class FallbackAsked:
    """One ask of the fallback providers: why, with which query, and what they answered."""

    why: str
    query: str
    outcome: FallbackOutcome


@dataclass(frozen=True)
class Move:
    """What a phase's work found (`event`), and what the run learns with it."""

    event: Event
    detail: str = ""  # why the run stops, when the move stops it
    grading: Grading | None = None  # the round just graded
    round: NextRound | None = None  # the hits to grade next
    searched: Sequence[QueryKey] = ()  # every query run meanwhile, new evidence or not
    fallback: FallbackAsked | None = None


@dataclass
class FallbackRecord:
    """What the fallback providers were asked and answered during one question."""

    used: list[str] = field(default_factory=list)
    reason: str | None = None
    query: str | None = None
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def tried(self) -> bool:
        return self.query is not None

    def record(self, asked: FallbackAsked) -> None:
        self.used = sorted(set(self.used) | set(asked.outcome.used))
        self.reason, self.query = asked.why, asked.query
        self.failures += [{"provider": p, "error": m} for p, m in asked.outcome.failures]

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"used": self.used, "reason": self.reason, "failures": self.failures}
        if self.query is not None:
            data["query"] = self.query
        return data


class Corrections(list[Correction]):
    """The run's corrective actions; each is announced to the progress callback as taken
    (`keep` is bookkeeping, not an action, and stays quiet)."""

    def __init__(self, clock: Stopwatch) -> None:
        super().__init__()
        self._clock = clock

    def append(self, correction: Correction) -> None:
        super().append(correction)
        if correction.type != "keep":
            detail = dict(correction.detail)
            ids = detail.pop("chunk_ids", None)
            words = [f"{len(ids)} items"] if ids is not None else []
            if correction.type == "refine":
                words.append(f"{detail.pop('strips_kept')}/{detail.pop('strips_total')} strips")
            words += [f"{key}={value}" for key, value in detail.items()]
            self._clock.emit(correction.type, "event", ", ".join(words))


@dataclass
class Run:
    """One question's way through the loop: its phase, the round about to be graded,
    everything graded so far, and why it stopped once it has. Fields change only in
    `transition`; `keywords` gives the question as a keyword query (rewritten once, when
    first asked for: `functools.cache`)."""

    question: str
    mode: str  # the search asked for; `strategy` is the current round's
    k: int
    vector: Vector | None
    clock: Stopwatch
    corrections: Corrections
    keywords: Callable[[], tuple[str, str]]
    view: CorpusView  # what the caller may see: every search is limited to it
    audit: AuditLog = field(default_factory=AuditLog)
    phase: Phase = Phase.SEARCH
    strategy: str = ""  # set by the first round
    query: str = ""
    source: str = "search"  # or "fallback"
    hits: list[Hit] = field(default_factory=list)
    grading: Grading | None = None
    rounds: list[Round] = field(default_factory=list)
    graded: list[tuple[Hit, ItemGrade]] = field(default_factory=list)
    kept: dict[int, tuple[Hit, ItemGrade]] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    queries_run: set[QueryKey] = field(default_factory=set)
    fallback: FallbackRecord = field(default_factory=FallbackRecord)
    cache_hits: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    stop: StopReason | None = None
    stop_detail: str = ""

    @property
    def iteration(self) -> int:
        return len(self.rounds)

    def ran(self, query: str, strategy: str) -> bool:
        return query_key(query, strategy) in self.queries_run

    def brings_new(self, hits: Sequence[Hit]) -> bool:
        return any(h.chunk.chunk_id not in self.seen for h in hits)

    def transition(self, move: Move) -> None:
        """The one place the run changes: the next phase from `TRANSITIONS`, and what the
        move learned (a graded round, the queries run, the fallback's answer, the next round
        or the stop). INCORRECT discards everything kept."""
        self.phase, stop = TRANSITIONS[self.phase, move.event]
        self.queries_run.update(move.searched)
        if move.fallback is not None:
            self.fallback.record(move.fallback)
        if move.grading is not None:
            self._take(move.grading)
        if move.event is Event.INCORRECT:
            self.kept.clear()
        if move.round is not None:
            self._enter(move.round)
        if stop is not None:
            self._stop(stop, move.detail)

    def _enter(self, round_: NextRound) -> None:
        self.query, self.hits, self.source = round_.query, round_.hits, round_.source
        self.queries_run.add(query_key(round_.query, round_.strategy))
        if round_.source == "search":
            self.strategy = round_.strategy

    def _take(self, grading: Grading) -> None:
        """Remember every grade of the round, which items are kept now, and the round."""
        self.grading = grading
        self.warnings.extend(grading.warnings)
        self.cache_hits.update(grading.cache_hits)
        by_id = {g.chunk_id: g for g in grading.items}
        for hit in self.hits:
            grade = by_id[hit.chunk.chunk_id]
            self.graded.append((hit, grade))
            self.seen.add(hit.chunk.chunk_id)
            if grade.kept:
                self.kept[hit.chunk.chunk_id] = (hit, grade)
            else:
                self.kept.pop(hit.chunk.chunk_id, None)
        number = self.iteration + 1
        discarded = [g.chunk_id for g in grading.items if not g.kept]
        if discarded:
            self.corrections.append(
                Correction("discard", {"chunk_ids": discarded, "iteration": number})
            )
        strategy = "fallback" if self.source == "fallback" else self.strategy
        kept_now = sum(1 for g in grading.items if g.kept)
        self.rounds.append(
            Round(
                number,
                self.query,
                strategy,
                grading.decision,
                grading.score,
                len(self.hits),
                kept_now,
            )
        )

    def _stop(self, reason: StopReason, detail: str) -> None:
        """Anything but CORRECT evidence is a correction worth naming."""
        if reason == "max_iterations":
            self.audit.emit("max_iterations_reached", iterations=self.iteration)
        self.stop, self.stop_detail = reason, detail
        if reason != "correct":
            self.corrections.append(
                Correction("stop", {"why": reason, "detail": detail, "iteration": self.iteration})
            )
        self.audit.emit("loop_stopped", reason=reason, detail=detail, iterations=self.iteration)
