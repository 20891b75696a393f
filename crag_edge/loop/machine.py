"""The CRAG loop: retrieve → grade → correct, as a state machine (`loop.state`).

Each question gets a `Run`, asked standalone: a follow-up that leans on the conversation's
earlier turns is rewritten first (`correction.followup`). `CragLoop.run` then does the work
of the run's phase and makes the one move it leads to (`TRANSITIONS`), until it stops:

SEARCH   → the question's own search                                   → GRADE
GRADE    → CORRECT                          → stop `correct`: refine the kept evidence, answer
           anything else in the last round  → stop `max_iterations`: answer from what is kept
           AMBIGUOUS                        → WIDEN
           INCORRECT                        → RECOVER (everything kept is discarded)
WIDEN    → keep the good items; search with the first query not run yet (synonym expansion,
           the keyword rewrite, the rewrite with the other strategy) that finds chunks not
           graded yet, with the fallback's results (asked once; with `fallback_on_ambiguous`
           off, only when fewer than `min_kept_items` are kept)                  → GRADE
           every widening run already       → stop `no_untried_query`: answer from what is kept
           none found anything new          → stop `no_new_evidence`: answer from what is kept
RECOVER  → the fallback once (keyword rewrite), else or after it the rewrite with the other
           strategy over the corpus, when either finds chunks not graded yet   → GRADE
           that rewrite run already, or nothing new → stop `insufficient_evidence`

So AMBIGUOUS in round 2 of 3 with no untried query stops with `no_untried_query` and answers
from the items kept so far; in round 3 (the last) it would have stopped `max_iterations`.
A round never repeats a query already run for this question, and a search that brings no
chunk not yet graded ends the loop instead of re-grading the same evidence: the loop then
answers from its best evidence (or reports "insufficient evidence" — never a guess), and the
reason and a `stop` correction say why.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from crag_edge.correction.expand import expand, load_synonyms
from crag_edge.correction.followup import standalone_question
from crag_edge.loop.stages import Stages
from crag_edge.loop.state import (
    ANSWERING_STOPS,
    Corrections,
    Event,
    FallbackAsked,
    Move,
    NextRound,
    Phase,
    QueryKey,
    Request,
    Run,
    query_key,
)
from crag_edge.models.chat_model import ChatModel, Message
from crag_edge.observability import Metrics
from crag_edge.progress import Stopwatch
from crag_edge.result import ContextItem, Correction, CorrectionType, CragResult
from crag_edge.types import Action, Decision, Hit

Widening = tuple[CorrectionType, str, str, str]  # (correction, query, strategy, how)


class CragLoop:
    """One corpus's corrective loop over its stages; the engine builds it once and calls
    `run` per question."""

    def __init__(self, stages: Stages, metrics: Metrics) -> None:
        self.stages = stages
        self.metrics = metrics
        self.synonyms = load_synonyms(stages.correction.synonyms_file)

    def run(self, request: Request) -> CragResult:
        """Answerable evidence for the request's question, or an explicit "insufficient
        evidence"; its `progress` hears each stage as it starts and ends. Its `history` (the
        conversation's earlier turns, oldest first) makes a follow-up question standalone
        before retrieval. Every search, the local fallback's included, sees only the documents
        its `view` sees (`crag_edge.groups.CorpusView`), so nothing later can hold any
        other."""
        clock = Stopwatch(self.metrics, request.progress)
        corrections = Corrections(clock)
        question = self._standalone(request.question, request.history, clock, corrections)
        with clock.stage("embed"):
            vector = self.stages.embed(question)
        run = Run(
            question,
            request.mode or self.stages.retrieval.retrieval_mode,
            request.top_k or self.stages.retrieval.top_k,
            vector,
            clock,
            corrections,
            keywords=lambda: self.stages.keywords(question),
            view=request.view,
        )
        while run.phase is not Phase.STOPPED:
            run.transition(self._work(run))
        return self._finish(run)

    def _work(self, run: Run) -> Move:
        """The work of the run's phase; what it finds is the move (`TRANSITIONS`)."""
        if run.phase is Phase.SEARCH:
            first = self.stages.search(run, run.question, run.mode)
            return Move(Event.SEARCHED, round=NextRound(run.question, run.mode, first))
        if run.phase is Phase.GRADE:
            return self._grade(run)
        if run.phase is Phase.WIDEN:
            return self._widen(run)
        return self._recover(run)

    def _standalone(
        self,
        question: str,
        history: Sequence[Message],
        clock: Stopwatch,
        corrections: Corrections,
    ) -> str:
        """The question every later stage works with: a follow-up rewritten from the
        conversation (a `rewrite` correction for `follow-up`), any other as asked."""
        if not history:
            return question
        llm = self.stages.llm if self.stages.correction.rewrite_with_llm else _no_llm
        with clock.stage("follow-up"):
            rewritten = standalone_question(question, history, llm)
        if rewritten is None:
            return question
        standalone, how = rewritten
        corrections.append(
            Correction(
                "rewrite",
                {"query": standalone, "by": how, "for": "follow-up", "question": question},
            )
        )
        return standalone

    def _grade(self, run: Run) -> Move:
        """GRADE: grade the round, then CORRECT, the last round, AMBIGUOUS or INCORRECT."""
        grading = self.stages.grade(run)
        limit = self.stages.correction.max_iterations
        if grading.decision == Decision.CORRECT:
            return Move(Event.CORRECT, "the evidence was graded CORRECT", grading)
        if run.iteration + 1 >= limit:
            detail = f"max_iterations ({limit}) reached: answering from what is kept"
            return Move(Event.LAST_ROUND, detail, grading)
        if grading.decision == Decision.AMBIGUOUS:
            return Move(Event.AMBIGUOUS, grading=grading)
        return Move(Event.INCORRECT, grading=grading)

    def _widen(self, run: Run) -> Move:
        """WIDEN: keep the good items and search with the first query not run yet that finds
        something not graded already (searches are cheap; rounds of grading are not). The
        new search goes deeper by as many as were graded; the kept items are not among its
        hits: they join the next decision with the grades they have."""
        searched: list[QueryKey] = []
        queries: list[str] = []  # as asked, for the stop's detail
        asked: FallbackAsked | None = None
        why = self._ambiguity_asks_fallback(run)
        for kind, query, strategy, how in self._widenings(run):
            if run.ran(query, strategy) or query_key(query, strategy) in searched:
                continue
            detail: dict[str, Any] = {"query": query}
            if kind == "rewrite":
                detail |= {"by": how, "for": "retrieval"}
            if strategy != run.mode:
                detail["strategy"] = strategy
            run.corrections.append(Correction(kind, detail))
            deeper = self.stages.search(run, query, strategy, depth=run.k + len(run.seen))
            searched.append(query_key(query, strategy))
            queries.append(repr(query))
            hits = [h for h in deeper if h.chunk.chunk_id not in run.seen][: run.k]
            if why and asked is None:
                asked = self.stages.ask_fallback(run, why)
                hits = _dedupe([*hits, *asked.outcome.hits])
            if run.brings_new(hits):
                found = NextRound(query, strategy, hits)
                return Move(Event.NEW_EVIDENCE, round=found, searched=searched, fallback=asked)
        if not searched:
            return Move(Event.NO_UNTRIED_QUERY, _NO_UNTRIED, fallback=asked)
        why_not = f"the search for {' and '.join(queries)} found nothing not graded already"
        return Move(Event.NO_NEW_EVIDENCE, f"{why_not}: {_KEPT}", searched=searched, fallback=asked)

    def _ambiguity_asks_fallback(self, run: Run) -> str | None:
        """Why an AMBIGUOUS round asks the fallback, or None. Always by default (when there is
        a fallback not asked yet): on SciFact claims whose evidence only the fallback holds,
        asking it only when fewer than two items were kept left topical but wrong hits
        standing (docs/correction.md)."""
        if not self.stages.fallbacks or run.fallback.tried:
            return None
        if self.stages.correction.fallback_on_ambiguous:
            return "retrieval graded AMBIGUOUS"
        if len(run.kept) < self.stages.correction.min_kept_items:
            return "too few items kept after grading"
        return None

    def _widenings(self, run: Run) -> Iterator[Widening]:
        """The widenings in the order AMBIGUOUS tries them: synonyms, the keyword rewrite,
        the rewrite with the other strategy. Lazy: the LLM rewrites only when the expansion
        was run already."""
        expanded = expand(run.question, self.synonyms, self.stages.correction.synonyms_per_term)
        if expanded != run.question:
            yield "expand", expanded, run.mode, "synonyms"
        query, how = run.keywords()
        yield "rewrite", query, run.mode, how
        yield "rewrite", query, _other_strategy(run.mode), how

    def _recover(self, run: Run) -> Move:
        """RECOVER: the fallback once, else (or after it) the keyword rewrite with the other
        strategy over the corpus; then "insufficient evidence"."""
        asked = None
        if self.stages.fallbacks and not run.fallback.tried:
            asked = self.stages.ask_fallback(run, "retrieval graded INCORRECT")
            if run.brings_new(asked.outcome.hits):
                found = NextRound(asked.query, "fallback", asked.outcome.hits, "fallback")
                return Move(Event.NEW_EVIDENCE, round=found, fallback=asked)
        query, how = run.keywords()
        strategy = _other_strategy(run.mode)
        nowhere = " or from the fallback" if asked or run.fallback.tried else ""
        if run.ran(query, strategy):
            detail = f"nothing trustworthy in the corpus{nowhere}"
            return Move(Event.NOTHING_TRUSTWORTHY, detail, fallback=asked)
        run.corrections.append(
            Correction(
                "rewrite", {"query": query, "by": how, "for": "retrieval", "strategy": strategy}
            )
        )
        fresh = self.stages.search(run, query, strategy)
        searched = [query_key(query, strategy)]
        if not run.brings_new(fresh):
            detail = (
                f"nothing trustworthy in the corpus{nowhere}; the search for {query!r} found "
                "nothing not graded already"
            )
            return Move(Event.NOTHING_TRUSTWORTHY, detail, searched=searched, fallback=asked)
        found = NextRound(query, strategy, fresh)
        return Move(Event.NEW_EVIDENCE, round=found, searched=searched, fallback=asked)

    def _finish(self, run: Run) -> CragResult:
        """The result: refine what is kept (unless nothing trustworthy is), say why it ended."""
        grading = run.grading
        assert grading is not None and run.stop is not None
        items = list(run.kept.values())
        insufficient = run.stop == "insufficient_evidence" or (
            grading.decision == Decision.INCORRECT and not items
        )
        context: list[ContextItem] = []
        if not insufficient and items:
            context = self.stages.context(run, items, fast_path=grading.rule is not None)
        trusted = bool(context) and grading.decision == Decision.CORRECT
        reread = self.stages.reread(run, start=len(context) + 1) if trusted else []
        if insufficient:
            run.audit.emit("insufficient_evidence", iterations=run.iteration)
        decision = Decision.INCORRECT if insufficient else grading.decision
        answering = bool(context) and run.stop in ANSWERING_STOPS
        reason = grading.reason if run.stop == "correct" else f"{grading.reason}; {run.stop_detail}"
        if insufficient:
            reason = "insufficient evidence: " + reason
        self.metrics.decisions.labels(decision=f"final_{decision}").inc()
        return CragResult(
            question=run.question,
            decision=decision,
            action=Action.GENERATE if answering else grading.action,
            score=grading.score,
            reason=reason,
            context=context,
            reread=reread,
            hits=run.graded,
            corrections=list(run.corrections),
            rounds=run.rounds,
            fallback=run.fallback.to_dict(),
            iterations=run.iteration,
            max_iterations_reached=run.stop == "max_iterations",
            insufficient_evidence=insufficient,
            stop_reason=run.stop,
            rule=grading.rule,
            tiers=grading.tiers,
            timings_ms=run.clock.timings,
            cache_hits=dict(run.cache_hits),
            warnings=run.warnings,
            audit=[e.to_dict() for e in run.audit.events],
        )


_KEPT = "answering from what is kept"
_NO_UNTRIED = f"every widening of the question was searched already: {_KEPT}"


def _no_llm() -> ChatModel | None:
    return None


def _other_strategy(mode: str) -> str:
    """The search a failed one is retried with: keywords (bm25) after meaning, and back."""
    return "bm25" if mode != "bm25" else "hybrid"


def _dedupe(hits: Sequence[Hit]) -> list[Hit]:
    seen: set[int] = set()
    out = []
    for hit in hits:
        if hit.chunk.chunk_id not in seen:
            seen.add(hit.chunk.chunk_id)
            out.append(hit)
    return out
