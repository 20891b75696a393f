"""The CRAG loop: retrieve → grade → correct, as an explicit state machine.

Each question gets a `_Run` (its state), asked standalone: a follow-up that leans on the
conversation's earlier turns is rewritten first (`correction.followup`). `CragLoop.run` then
grades a round and takes exactly one transition, until the run has a stop reason:

graded CORRECT    → stop `correct`: refine the kept evidence, answer from it.
any, last round   → stop `max_iterations`: answer from what is kept.
graded AMBIGUOUS  → `_widen`: keep the good items, search with the first query not run yet
                    (synonym expansion, the keyword rewrite, the rewrite with the other
                    strategy), fuse with the kept items, ask the fallback too (once; with
                    `fallback_on_ambiguous` off, only when fewer than `min_kept_items`
                    remain); stop `no_untried_query` or `no_new_evidence`
                    when there is nothing left to search or nothing new was found.
graded INCORRECT  → `_recover`: discard everything; ask the fallback once (keyword rewrite);
                    else, or after it, the rewrite with the other strategy over the corpus;
                    stop `insufficient_evidence` when that was tried or found nothing new.

A round never repeats a query already run for this question, and a search that brings no
chunk not yet graded ends the loop instead of re-grading the same evidence: the loop then
answers from its best evidence (or reports "insufficient evidence" — never a guess), and
the reason and a `stop` correction say why.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from crag_edge.citations import document_places, locate
from crag_edge.config import CorrectionSettings, RetrievalSettings
from crag_edge.correction.expand import expand, load_synonyms, rewrite
from crag_edge.correction.fallback import FallbackProvider, run_fallbacks
from crag_edge.correction.followup import standalone_question
from crag_edge.correction.refine import ContextBudget, Strip, embedder_tokens, refine
from crag_edge.grading import Evidence, Grader, Grading, ItemGrade
from crag_edge.groups import Groups
from crag_edge.models.chat_model import ChatModel, Message
from crag_edge.observability import AuditLog, Metrics
from crag_edge.progress import Progress, Stopwatch
from crag_edge.result import ContextItem, Correction, CorrectionType, CragResult, Round
from crag_edge.retrieval import Mode, Retriever
from crag_edge.store import CorpusBackend
from crag_edge.types import Action, Chunk, Decision, Embedder, Hit, Vector

StopReason = Literal[
    "correct", "max_iterations", "no_untried_query", "no_new_evidence", "insufficient_evidence"
]
# Stops after which the kept evidence is answered from (the others have none to answer from).
_ANSWERING_STOPS = ("correct", "max_iterations", "no_untried_query", "no_new_evidence")


@dataclass
class _FallbackRecord:
    """What the fallback providers were asked and answered during one question."""

    used: list[str] = field(default_factory=list)
    reason: str | None = None
    query: str | None = None
    failures: list[dict[str, str]] = field(default_factory=list)

    @property
    def tried(self) -> bool:
        return self.query is not None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"used": self.used, "reason": self.reason, "failures": self.failures}
        if self.query is not None:
            data["query"] = self.query
        return data


@dataclass
class _Run:
    """One question's way through the loop: the round about to be graded, everything graded
    so far, and why the run stopped once it has."""

    question: str
    mode: str  # the search asked for; `strategy` is the current round's
    strategy: str
    k: int
    vector: Vector | None
    clock: Stopwatch
    corrections: _Corrections
    groups: Groups = None  # the caller's access groups: every search is limited to them
    audit: AuditLog = field(default_factory=AuditLog)
    query: str = ""
    source: str = "search"  # or "fallback"
    hits: list[Hit] = field(default_factory=list)
    grading: Grading | None = None
    rounds: list[Round] = field(default_factory=list)
    graded: list[tuple[Hit, ItemGrade]] = field(default_factory=list)
    kept: dict[int, tuple[Hit, ItemGrade]] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    queries_run: set[tuple[str, str]] = field(default_factory=set)
    rewritten: tuple[str, str] | None = None
    fallback: _FallbackRecord = field(default_factory=_FallbackRecord)
    cache_hits: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    stop: StopReason | None = None
    stop_detail: str = ""

    @property
    def iteration(self) -> int:
        return len(self.rounds)

    def ran(self, query: str, strategy: str) -> bool:
        return _query_key(query, strategy) in self.queries_run

    def next_round(self, query: str, strategy: str, hits: list[Hit], source: str) -> None:
        self.query, self.hits, self.source = query, hits, source
        self.queries_run.add(_query_key(query, strategy))
        if source == "search":
            self.strategy = strategy

    def brings_new(self, hits: Sequence[Hit]) -> bool:
        return any(h.chunk.chunk_id not in self.seen for h in hits)

    def end(self, reason: StopReason, detail: str) -> None:
        """Stop the loop; anything but CORRECT evidence is a correction worth naming."""
        self.stop, self.stop_detail = reason, detail
        if reason != "correct":
            self.corrections.append(
                Correction("stop", {"why": reason, "detail": detail, "iteration": self.iteration})
            )
        self.audit.emit("loop_stopped", reason=reason, detail=detail, iterations=self.iteration)


def _query_key(query: str, strategy: str) -> tuple[str, str]:
    return " ".join(query.lower().split()), strategy


class CragLoop:
    """One corpus's corrective loop; the engine builds it once and calls `run` per question."""

    def __init__(
        self,
        correction: CorrectionSettings,
        retrieval: RetrievalSettings,
        corpus: CorpusBackend,
        embedder: Embedder,
        retriever: Retriever,
        grader: Grader,
        metrics: Metrics,
        *,
        fallbacks: Sequence[FallbackProvider] = (),
        llm: Callable[[], ChatModel | None] = lambda: None,
    ) -> None:
        self.correction = correction
        self.retrieval = retrieval
        self.corpus = corpus
        self.embedder = embedder
        self.retriever = retriever
        self.grader = grader
        self.metrics = metrics
        self.fallbacks = list(fallbacks)
        self.llm = llm
        self.synonyms = load_synonyms(correction.synonyms_file)
        self.cache = corpus.score_cache() if grader.settings.score_cache else None
        self.passages = corpus.passage_vectors()

    def run(
        self,
        question: str,
        *,
        mode: Mode | None = None,
        top_k: int | None = None,
        progress: Progress | None = None,
        history: Sequence[Message] = (),
        groups: Groups = None,
    ) -> CragResult:
        """Answerable evidence for `question`, or an explicit "insufficient evidence";
        `progress` hears each stage as it starts and ends. `history` (the conversation's
        earlier turns, oldest first) makes a follow-up question standalone before retrieval.
        Every search, the local fallback's included, sees only the documents a caller with
        `groups` may see (`crag_edge.groups`), so nothing later can hold any other."""
        state = self._start(
            question,
            history,
            mode or self.retrieval.retrieval_mode,
            top_k or self.retrieval.top_k,
            progress,
            groups,
        )
        while state.stop is None:
            self._grade_round(state)
            self._transition(state)
        return self._finish(state)

    # -- the state machine -------------------------------------------------------------------

    def _start(
        self,
        question: str,
        history: Sequence[Message],
        mode: str,
        k: int,
        progress: Progress | None,
        groups: Groups,
    ) -> _Run:
        clock = Stopwatch(self.metrics, progress)
        corrections = _Corrections(clock)
        question = self._standalone(question, history, clock, corrections)
        vector = clock("embed", self._embed, question)
        state = _Run(question, mode, mode, k, vector, clock, corrections, groups)
        state.next_round(question, mode, self._search(state, question, mode), "search")
        return state

    def _standalone(
        self,
        question: str,
        history: Sequence[Message],
        clock: Stopwatch,
        corrections: _Corrections,
    ) -> str:
        """The question every later stage works with: a follow-up rewritten from the
        conversation (a `rewrite` correction for `follow-up`), any other as asked."""
        if not history:
            return question
        llm = self.llm if self.correction.rewrite_with_llm else _no_llm
        rewritten = clock("follow-up", standalone_question, question, history, llm)
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

    def _grade_round(self, state: _Run) -> None:
        """Grade the round's hits; remember every grade and which items are kept now.

        The fast-path rules judge the first retrieval only: a later round holds just the
        chunks not graded yet (often few, which `few_context` would approve unread) or the
        fallback's results, and both must be graded."""
        clock = state.clock
        grading = clock(
            "grade",
            self.grader.grade,
            state.question,
            self._evidence(state.hits, state.vector),
            state.audit,
            use_rules=state.iteration == 0,
            cache=self.cache,
            passages=self.passages,
            on_tier=lambda tier, items, ms: clock.emit(
                f"grade:{tier}", "start" if ms is None else "end", f"{items} items", ms
            ),
            carried=[grade for _, grade in state.kept.values()],
        )
        rule = f" (rule {grading.rule})" if grading.rule else ""
        clock.emit("decision", "event", f"{grading.decision} {grading.score:.2f}{rule}")
        state.grading = grading
        state.warnings.extend(grading.warnings)
        state.cache_hits.update(grading.cache_hits)
        by_id = {g.chunk_id: g for g in grading.items}
        for hit in state.hits:
            grade = by_id[hit.chunk.chunk_id]
            state.graded.append((hit, grade))
            state.seen.add(hit.chunk.chunk_id)
            if grade.kept:
                state.kept[hit.chunk.chunk_id] = (hit, grade)
            else:
                state.kept.pop(hit.chunk.chunk_id, None)
        number = state.iteration + 1
        discarded = [g.chunk_id for g in grading.items if not g.kept]
        if discarded:
            state.corrections.append(
                Correction("discard", {"chunk_ids": discarded, "iteration": number})
            )
        strategy = "fallback" if state.source == "fallback" else state.strategy
        kept_now = sum(1 for g in grading.items if g.kept)
        state.rounds.append(
            Round(
                number,
                state.query,
                strategy,
                grading.decision,
                grading.score,
                len(state.hits),
                kept_now,
            )
        )

    def _transition(self, state: _Run) -> None:
        """The one move after a graded round (the table in the module docstring)."""
        assert state.grading is not None
        limit = self.correction.max_iterations
        if state.grading.decision == Decision.CORRECT:
            state.end("correct", "the evidence was graded CORRECT")
        elif state.iteration >= limit:
            state.audit.emit("max_iterations_reached", iterations=state.iteration)
            state.end(
                "max_iterations", f"max_iterations ({limit}) reached: answering from what is kept"
            )
        elif state.grading.decision == Decision.AMBIGUOUS:
            self._widen(state)
        else:
            self._recover(state)

    def _widen(self, state: _Run) -> None:
        """AMBIGUOUS: keep the good items and search with the first query not run yet that
        finds something not graded already (searches are cheap; rounds of grading are not)."""
        searched: list[str] = []
        for kind, query, strategy, how in self._widenings(state):
            if state.ran(query, strategy):
                continue
            detail: dict[str, Any] = {"query": query}
            if kind == "rewrite":
                detail |= {"by": how, "for": "retrieval"}
            if strategy != state.mode:
                detail["strategy"] = strategy
            state.corrections.append(Correction(kind, detail))
            hits = self._widened_hits(state, query, strategy)
            if state.brings_new(hits):
                state.next_round(query, strategy, hits, "search")
                return
            searched.append(repr(query))
        if searched:
            state.end(
                "no_new_evidence",
                f"the search for {' and '.join(searched)} found nothing not graded already: "
                "answering from what is kept",
            )
        else:
            state.end(
                "no_untried_query",
                "every widening of the question was searched already: answering from what is kept",
            )

    def _widened_hits(self, state: _Run, query: str, strategy: str) -> list[Hit]:
        """A new search's hits not graded yet (it searches deeper by as many as were graded),
        plus the fallback's once (see `_ambiguity_asks_fallback`). The kept items are not
        among them: they join the next decision with the grades they have."""
        deeper = self._search(state, query, strategy, depth=state.k + len(state.seen))
        hits = [h for h in deeper if h.chunk.chunk_id not in state.seen][: state.k]
        why = self._ambiguity_asks_fallback(state)
        if why and self.fallbacks and not state.fallback.tried:
            hits = _dedupe([*hits, *self._fallback(state, why)])
        return hits

    def _ambiguity_asks_fallback(self, state: _Run) -> str | None:
        """Why an AMBIGUOUS round asks the fallback, or None. Always by default: on SciFact
        claims whose evidence only the fallback holds, asking it only when fewer than two
        items were kept left topical but wrong hits standing (docs/correction.md)."""
        if self.correction.fallback_on_ambiguous:
            return "retrieval graded AMBIGUOUS"
        if len(state.kept) < self.correction.min_kept_items:
            return "too few items kept after grading"
        return None

    def _widenings(self, state: _Run) -> Iterator[tuple[CorrectionType, str, str, str]]:
        """(correction, query, strategy, how) in the order AMBIGUOUS tries them: synonyms,
        the keyword rewrite, the rewrite with the other strategy. Lazy: the LLM rewrites
        only when the expansion was run already."""
        expanded = expand(state.question, self.synonyms, self.correction.synonyms_per_term)
        if expanded != state.question:
            yield "expand", expanded, state.mode, "synonyms"
        query, how = self._rewrite(state)
        yield "rewrite", query, state.mode, how
        yield "rewrite", query, _other_strategy(state.mode), how

    def _recover(self, state: _Run) -> None:
        """INCORRECT: discard everything; the fallback once, else (or after it) the keyword
        rewrite with the other strategy over the corpus; then "insufficient evidence"."""
        state.kept.clear()
        if self.fallbacks and not state.fallback.tried:
            extra = self._fallback(state, "retrieval graded INCORRECT")
            if state.brings_new(extra):
                state.next_round(state.fallback.query or "", "fallback", extra, "fallback")
                return
        query, how = self._rewrite(state)
        strategy = _other_strategy(state.mode)
        nowhere = " or from the fallback" if state.fallback.tried else ""
        if state.ran(query, strategy):
            state.end("insufficient_evidence", f"nothing trustworthy in the corpus{nowhere}")
            return
        state.corrections.append(
            Correction(
                "rewrite", {"query": query, "by": how, "for": "retrieval", "strategy": strategy}
            )
        )
        fresh = self._search(state, query, strategy)
        if not state.brings_new(fresh):
            state.end(
                "insufficient_evidence",
                f"nothing trustworthy in the corpus{nowhere}; the search for {query!r} found "
                "nothing not graded already",
            )
            return
        state.next_round(query, strategy, fresh, "search")

    def _finish(self, state: _Run) -> CragResult:
        """The result: refine what is kept (unless nothing trustworthy is), say why it ended."""
        grading = state.grading
        assert grading is not None and state.stop is not None
        items = list(state.kept.values())
        insufficient = state.stop == "insufficient_evidence" or (
            grading.decision == Decision.INCORRECT and not items
        )
        context: list[ContextItem] = []
        if not insufficient and items:
            for hit, _ in items:
                state.corrections.append(Correction("keep", {"chunk_id": hit.chunk.chunk_id}))
            if grading.rule is not None:  # the fast path calls no model, refinement included
                context = _whole_chunks(self._within_budget(items, state))
            else:
                context = state.clock("refine", self._refine, state.question, items, state)
        if insufficient:
            state.audit.emit("insufficient_evidence", iterations=state.iteration)
        decision = Decision.INCORRECT if insufficient else grading.decision
        answering = bool(context) and state.stop in _ANSWERING_STOPS
        reason = (
            grading.reason if state.stop == "correct" else f"{grading.reason}; {state.stop_detail}"
        )
        if insufficient:
            reason = "insufficient evidence: " + reason
        self.metrics.decisions.labels(decision=f"final_{decision}").inc()
        return CragResult(
            question=state.question,
            decision=decision,
            action=Action.GENERATE if answering else grading.action,
            score=grading.score,
            reason=reason,
            context=context,
            hits=state.graded,
            corrections=list(state.corrections),
            rounds=state.rounds,
            fallback=state.fallback.to_dict(),
            iterations=state.iteration,
            max_iterations_reached=state.stop == "max_iterations",
            insufficient_evidence=insufficient,
            stop_reason=state.stop,
            rule=grading.rule,
            tiers=grading.tiers,
            timings_ms=state.clock.timings,
            cache_hits=dict(state.cache_hits),
            warnings=state.warnings,
            audit=[e.to_dict() for e in state.audit.events],
        )

    # -- stages ------------------------------------------------------------------------------

    def _embed(self, text: str) -> Vector | None:
        return self.retriever.embed_query(text) if text.strip() else None

    def _search(self, state: _Run, query: str, strategy: str, depth: int = 0) -> list[Hit]:
        """The top `depth` (default k) hits for `query`; the run remembers it searched it."""
        state.queries_run.add(_query_key(query, strategy))
        vector = state.vector if query == state.question else self._embed(query)
        k = depth or state.k
        return state.clock("retrieve", self._retrieve, query, strategy, k, vector, state.groups)

    def _retrieve(
        self, query: str, strategy: str, k: int, vector: Vector | None, groups: Groups
    ) -> list[Hit]:
        return self.retriever.search(
            query,
            top_k=k,
            mode=strategy,  # type: ignore[arg-type]
            query_vector=vector,
            groups=groups,
        )

    def _rewrite(self, state: _Run) -> tuple[str, str]:
        """The question as a keyword query (one LLM call per question at most)."""
        if state.rewritten is None:
            llm = self.llm() if self.correction.rewrite_with_llm else None
            state.rewritten = rewrite(state.question, llm)
        return state.rewritten

    def _evidence(self, hits: Sequence[Hit], vector: Vector | None) -> Evidence:
        """Similarities for grading: the dense score; else the stored vector's cosine (corpus
        hits found by bm25 only); else the text embedded now (fallback hits)."""
        sims = np.array(
            [np.nan if h.dense_score is None else h.dense_score for h in hits], dtype=np.float64
        )
        if vector is not None:
            stored = [
                i for i, h in enumerate(hits) if h.dense_score is None and h.origin == "search"
            ]
            if stored:
                vectors = self.corpus.get_vectors([hits[i].chunk.chunk_id for i in stored])
                sims[stored] = vectors.astype(np.float64) @ vector.astype(np.float64)
            outside = [
                i for i, h in enumerate(hits) if h.dense_score is None and h.origin != "search"
            ]
            if outside:
                vectors = self.embedder.embed([hits[i].chunk.text for i in outside])
                sims[outside] = vectors.astype(np.float64) @ vector.astype(np.float64)
        tokens = np.array([h.chunk.token_count for h in hits], dtype=np.int64)
        return Evidence(hits, sims, tokens)

    def _fallback(self, state: _Run, why: str) -> list[Hit]:
        """Ask every fallback provider once, with the keyword rewrite; record what happened."""
        query, how = self._rewrite(state)
        state.corrections.append(
            Correction("rewrite", {"query": query, "by": how, "for": "fallback"})
        )
        outcome = state.clock(
            "fallback",
            run_fallbacks,
            self.fallbacks,
            query,
            self.correction.fallback_max_results,
            self.correction.fallback_timeout_s,
            rrf_k=self.retrieval.rrf_k,
            groups=state.groups,
        )
        record = state.fallback
        record.used = sorted(set(record.used) | set(outcome.used))
        record.reason, record.query = why, query
        record.failures += [{"provider": p, "error": m} for p, m in outcome.failures]
        state.corrections.append(
            Correction(
                "fallback",
                {
                    "providers": outcome.used,
                    "why": why,
                    "results": len(outcome.hits),
                    "failures": len(outcome.failures),
                },
            )
        )
        for provider, message in outcome.failures:
            state.audit.emit("fallback_failure", provider=provider, error=message)
        state.audit.emit("fallback", providers=outcome.used, results=len(outcome.hits), reason=why)
        return outcome.hits

    def _refine(
        self, question: str, items: list[tuple[Hit, ItemGrade]], state: _Run
    ) -> list[ContextItem]:
        chunks = [hit.chunk for hit, _ in items]
        origin = {hit.chunk.chunk_id: hit.origin for hit, _ in items}
        refined = refine(
            question,
            chunks,
            self.embedder,
            mode=self.correction.strip_mode,
            scorer=self.correction.strip_scorer,
            threshold=self.correction.strip_threshold,
            budget_tokens=self.correction.context_budget_tokens,
            cross_encoder=self.grader.cross_encoder,
            anchor=max(items, key=lambda item: item[1].score)[0].chunk,
        )
        strips = refined.pieces  # never empty: the anchor's best strip stays
        if refined.over_budget:
            _note_cap(state, self.correction.context_budget_tokens, "strips", refined.over_budget)
        state.corrections.append(
            Correction(
                "refine",
                {
                    "strips_kept": len(refined.kept),
                    "strips_total": len(refined.scored),
                    "pieces": len(strips),
                    "mode": self.correction.strip_mode,
                    "scorer": self.correction.strip_scorer,
                },
            )
        )
        return _refined_context(strips, chunks, origin)

    def _within_budget(
        self, items: list[tuple[Hit, ItemGrade]], state: _Run
    ) -> list[tuple[Hit, ItemGrade]]:
        """Whole chunks, best graded first, while they fit `context_budget_tokens` (the best
        one always), in their order; the ones left out are a `cap` correction. Titles count
        as refinement counts them."""
        limit = self.correction.context_budget_tokens
        budget = ContextBudget(embedder_tokens(self.embedder))
        chosen: set[int] = set()
        for hit, _ in sorted(items, key=lambda item: -item[1].score):
            if chosen and budget.spent + budget.cost(hit.chunk) > limit:
                continue
            chosen.add(hit.chunk.chunk_id)
            budget.spend(hit.chunk)
        dropped = [hit.chunk.chunk_id for hit, _ in items if hit.chunk.chunk_id not in chosen]
        if dropped:
            _note_cap(state, limit, "chunks", len(dropped), dropped)
        return [item for item in items if item[0].chunk.chunk_id in chosen]


def _note_cap(
    state: _Run, budget: int, unit: str, left_out: int, chunk_ids: list[int] | None = None
) -> None:
    """Relevant evidence left out of the answer's context for its token budget is never
    silent: a `cap` correction and a warning say how much."""
    detail: dict[str, Any] = {"budget_tokens": budget, f"{unit}_left_out": left_out}
    if chunk_ids is not None:
        detail["chunk_ids"] = chunk_ids
    state.corrections.append(Correction("cap", detail))
    state.warnings.append(
        f"{left_out} relevant {unit} left out of the answer's context: it holds at most "
        f"{budget} tokens (context_budget_tokens)"
    )


class _Corrections(list[Correction]):
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


def _refined_context(
    pieces: Sequence[Strip], chunks: Sequence[Chunk], origin: dict[int, str]
) -> list[ContextItem]:
    """The refined pieces as numbered evidence, each located by the places of its document's
    chunks (a piece may join sentences of neighbouring chunks, or hold one page of a chunk
    that spans two)."""
    items = []
    for n, s in enumerate(pieces, start=1):
        same_document = (c for c in chunks if (c.doc_id, c.source) == (s.doc_id, s.source))
        where = locate(document_places(same_document), s.start, s.end)
        items.append(
            ContextItem(
                n,
                s.chunk_id,
                s.doc_id,
                s.source,
                s.title,
                s.start,
                s.end,
                s.text,
                origin[s.chunk_id],
                round(s.score, 4),
                where.pages,
                where.section,
            )
        )
    return items


def _whole_chunks(items: Sequence[tuple[Hit, ItemGrade]]) -> list[ContextItem]:
    return [
        ContextItem(
            n,
            h.chunk.chunk_id,
            h.chunk.doc_id,
            h.chunk.source,
            h.chunk.title,
            h.chunk.start,
            h.chunk.end,
            h.chunk.text,
            h.origin,
            g.score,
            h.chunk.pages,
            h.chunk.section,
        )
        for n, (h, g) in enumerate(items, start=1)
    ]


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
