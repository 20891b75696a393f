"""The CRAG loop (seed 001's state machine): retrieve → grade → correct, until GENERATE.

- CORRECT (GENERATE): keep the good items, refine them into strips, done (a fast-path
  rule skips refinement too: it promises no model call).
- AMBIGUOUS (REFINE): keep the good items, expand the query (synonyms; the keyword rewrite
  when none applies), re-retrieve, fuse the new hits with the kept ones, and ask the
  fallback too when fewer than `min_kept_items` remain; grade again.
- INCORRECT (RE_RETRIEVE): discard everything; with a fallback, rewrite the question into a
  keyword query and use the fallback only; without one, try the other strategy once (the
  rewritten query over the corpus); still nothing → "insufficient evidence", never a guess.
- `max_iterations` reached: generate from what is kept, and say so.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from crag_edge.config import Settings
from crag_edge.correction.expand import expand, load_synonyms, rewrite
from crag_edge.correction.fallback import FallbackProvider, run_fallbacks
from crag_edge.correction.refine import refine
from crag_edge.grading import Evidence, Grader, Grading, ItemGrade
from crag_edge.models.llm import LlamaRuntime
from crag_edge.observability import AuditLog, Metrics
from crag_edge.progress import Progress, Stopwatch
from crag_edge.result import ContextItem, Correction, CragResult, Round
from crag_edge.retrieval import Mode, Retriever, rrf
from crag_edge.store import Corpus
from crag_edge.types import Action, Decision, Embedder, Hit, Vector


class CragLoop:
    """One corpus's corrective loop; the engine builds it once and calls `run` per question."""

    def __init__(
        self,
        settings: Settings,
        corpus: Corpus,
        embedder: Embedder,
        retriever: Retriever,
        grader: Grader,
        metrics: Metrics,
        *,
        fallbacks: Sequence[FallbackProvider] = (),
        llm: Callable[[], LlamaRuntime | None] = lambda: None,
    ) -> None:
        self.settings = settings
        self.corpus = corpus
        self.embedder = embedder
        self.retriever = retriever
        self.grader = grader
        self.metrics = metrics
        self.fallbacks = list(fallbacks)
        self.llm = llm
        self.synonyms = load_synonyms(settings.synonyms_file)
        self.cache = corpus.score_cache() if settings.score_cache else None
        self.passages = corpus.passage_vectors()

    def run(
        self,
        question: str,
        *,
        mode: Mode | None = None,
        top_k: int | None = None,
        progress: Progress | None = None,
    ) -> CragResult:
        """Answerable evidence for `question`, or an explicit "insufficient evidence";
        `progress` hears each stage as it starts and ends."""
        s = self.settings
        k = top_k or s.top_k
        strategy: str = mode or s.retrieval_mode
        audit = AuditLog()
        clock = Stopwatch(self.metrics, progress)
        corrections = _Corrections(clock)
        rounds: list[Round] = []
        graded: list[tuple[Hit, ItemGrade]] = []
        fallback: dict[str, Any] = {"used": [], "reason": None, "failures": []}
        warnings: list[str] = []
        kept: dict[int, tuple[Hit, ItemGrade]] = {}
        cache_hits: dict[str, int] = {}
        rewritten: tuple[str, str] | None = None
        tried_alternative = False

        query, vector = question, clock("embed", self._embed, question)
        hits = clock("retrieve", self._retrieve, query, strategy, k, vector)
        from_fallback = False
        grading: Grading | None = None
        iteration = 0
        max_reached = False
        insufficient = False
        while True:
            iteration += 1
            grading = clock(
                "grade",
                self.grader.grade,
                question,
                self._evidence(hits, vector),
                audit,
                use_rules=not from_fallback,
                cache=self.cache,
                passages=self.passages,
                on_tier=lambda tier, items, ms: clock.emit(
                    f"grade:{tier}", "start" if ms is None else "end", f"{items} items", ms
                ),
            )
            clock.emit(
                "decision",
                "event",
                f"{grading.decision} {grading.score:.2f}"
                + (f" (rule {grading.rule})" if grading.rule else ""),
            )
            warnings.extend(grading.warnings)
            for tier, count in grading.cache_hits.items():
                cache_hits[tier] = cache_hits.get(tier, 0) + count
            by_id = {g.chunk_id: g for g in grading.items}
            kept_now = 0
            for hit in hits:
                grade = by_id[hit.chunk.chunk_id]
                graded.append((hit, grade))
                if grade.kept:
                    kept[hit.chunk.chunk_id] = (hit, grade)
                    kept_now += 1
                else:
                    kept.pop(hit.chunk.chunk_id, None)
            discarded = [g.chunk_id for g in grading.items if not g.kept]
            if discarded:
                corrections.append(
                    Correction("discard", {"chunk_ids": discarded, "iteration": iteration})
                )
            rounds.append(
                Round(
                    iteration,
                    query,
                    "fallback" if from_fallback else strategy,
                    grading.decision,
                    grading.score,
                    len(hits),
                    kept_now,
                )
            )
            if grading.decision == Decision.CORRECT:
                break
            if iteration >= s.max_iterations:
                max_reached = True
                audit.emit("max_iterations_reached", iterations=iteration)
                break
            if grading.decision == Decision.AMBIGUOUS:
                expanded = expand(question, self.synonyms, s.synonyms_per_term)
                if expanded != question:
                    corrections.append(Correction("expand", {"query": expanded}))
                    query = expanded
                else:  # no synonym applies: the keyword rewrite is what can widen the search
                    if rewritten is None:
                        rewritten = rewrite(question, self._llm_for_rewrite())
                    query, how = rewritten
                    corrections.append(
                        Correction("rewrite", {"query": query, "by": how, "for": "retrieval"})
                    )
                fresh = clock("retrieve", self._retrieve, query, strategy, k, self._embed(query))
                hits = _fuse([h for h, _ in kept.values()], fresh, k, s.rrf_k)
                from_fallback = False
                if len(kept) < s.min_kept_items and self.fallbacks:
                    extra = self._fallback(
                        question,
                        "too few items kept after grading",
                        corrections,
                        fallback,
                        clock,
                        audit,
                    )
                    hits = _dedupe([*hits, *extra])
                continue
            kept.clear()  # INCORRECT: discard everything
            if self.fallbacks:
                extra = self._fallback(
                    question, "retrieval graded INCORRECT", corrections, fallback, clock, audit
                )
                if not extra:
                    insufficient = True
                    break
                hits, from_fallback = extra, True
                query = fallback["query"]
                continue
            if tried_alternative:
                insufficient = True
                break
            tried_alternative = True
            query, how = rewrite(question, self._llm_for_rewrite())
            corrections.append(
                Correction("rewrite", {"query": query, "by": how, "for": "retrieval"})
            )
            strategy = "bm25" if strategy != "bm25" else "hybrid"
            hits = clock("retrieve", self._retrieve, query, strategy, k, self._embed(query))
            from_fallback = False

        assert grading is not None
        final_items = [(h, g) for h, g in kept.values()]
        if grading.decision == Decision.INCORRECT and not final_items:
            insufficient = True
        context: list[ContextItem] = []
        if not insufficient and final_items:
            for hit, _ in final_items:
                corrections.append(Correction("keep", {"chunk_id": hit.chunk.chunk_id}))
            if grading.rule is not None:  # the fast path calls no model, refinement included
                context = _whole_chunks(final_items)
            else:
                context = clock("refine", self._refine, question, final_items, corrections)
        if insufficient:
            audit.emit("insufficient_evidence", iterations=iteration)
        decision = grading.decision if not insufficient else Decision.INCORRECT
        action = (
            Action.GENERATE
            if (decision == Decision.CORRECT or max_reached) and context
            else grading.action
        )
        reason = grading.reason
        if max_reached:
            reason += f"; max_iterations ({s.max_iterations}) reached: answering from what is kept"
        if insufficient:
            reason = "insufficient evidence: " + reason
        self.metrics.decisions.labels(decision=f"final_{decision}").inc()
        return CragResult(
            question=question,
            decision=decision,
            action=action,
            score=grading.score,
            reason=reason,
            context=context,
            hits=graded,
            corrections=list(corrections),
            rounds=rounds,
            fallback=fallback,
            iterations=iteration,
            max_iterations_reached=max_reached,
            insufficient_evidence=insufficient,
            rule=grading.rule,
            tiers=grading.tiers,
            timings_ms=clock.timings,
            cache_hits=cache_hits,
            warnings=warnings,
            audit=[e.to_dict() for e in audit.events],
        )

    # -- stages ------------------------------------------------------------------------------

    def _embed(self, text: str) -> Vector | None:
        return self.retriever.embed_query(text) if text.strip() else None

    def _retrieve(self, query: str, strategy: str, k: int, vector: Vector | None) -> list[Hit]:
        return self.retriever.search(
            query,
            top_k=k,
            mode=strategy,  # type: ignore[arg-type]
            query_vector=vector,
        )

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

    def _fallback(
        self,
        question: str,
        why: str,
        corrections: _Corrections,
        fallback: dict[str, Any],
        clock: Stopwatch,
        audit: AuditLog,
    ) -> list[Hit]:
        query, how = rewrite(question, self._llm_for_rewrite())
        corrections.append(Correction("rewrite", {"query": query, "by": how, "for": "fallback"}))
        outcome = clock(
            "fallback",
            run_fallbacks,
            self.fallbacks,
            query,
            self.settings.fallback_max_results,
            self.settings.fallback_timeout_s,
            rrf_k=self.settings.rrf_k,
        )
        fallback["used"] = sorted(set(fallback["used"]) | set(outcome.used))
        fallback["reason"] = why
        fallback["query"] = query
        fallback["failures"] = [
            *fallback["failures"],
            *({"provider": p, "error": m} for p, m in outcome.failures),
        ]
        corrections.append(
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
            audit.emit("fallback_failure", provider=provider, error=message)
        audit.emit("fallback", providers=outcome.used, results=len(outcome.hits), reason=why)
        return outcome.hits

    def _refine(
        self, question: str, items: list[tuple[Hit, ItemGrade]], corrections: _Corrections
    ) -> list[ContextItem]:
        chunks = [hit.chunk for hit, _ in items]
        origin = {hit.chunk.chunk_id: hit.origin for hit, _ in items}
        strips, scored = refine(
            question,
            chunks,
            self.embedder,
            mode=self.settings.strip_mode,
            scorer=self.settings.strip_scorer,
            threshold=self.settings.strip_threshold,
            budget_tokens=self.settings.context_budget_tokens,
            cross_encoder=self.grader.cross_encoder,
        )
        if not strips and scored:  # never refine good evidence away entirely
            strips = [max(scored, key=lambda strip: strip.score)]
        corrections.append(
            Correction(
                "refine",
                {
                    "strips_kept": len(strips),
                    "strips_total": len(scored),
                    "mode": self.settings.strip_mode,
                    "scorer": self.settings.strip_scorer,
                },
            )
        )
        return [
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
            )
            for n, s in enumerate(strips, start=1)
        ]

    def _llm_for_rewrite(self) -> LlamaRuntime | None:
        return self.llm() if self.settings.rewrite_with_llm else None


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
        )
        for n, (h, g) in enumerate(items, start=1)
    ]


def _dedupe(hits: Sequence[Hit]) -> list[Hit]:
    seen: set[int] = set()
    out = []
    for hit in hits:
        if hit.chunk.chunk_id not in seen:
            seen.add(hit.chunk.chunk_id)
            out.append(hit)
    return out


def _fuse(kept: Sequence[Hit], fresh: Sequence[Hit], k: int, rrf_k: int) -> list[Hit]:
    """Kept items and new hits fused by RRF and de-duplicated by chunk id: every kept item
    stays (it passed grading), new hits fill the list up to `k`."""
    by_id = {h.chunk.chunk_id: h for h in [*fresh, *kept]}
    kept_ids = {h.chunk.chunk_id for h in kept}
    fused = rrf(
        {
            "kept": [(h.chunk.chunk_id, 0.0) for h in kept],
            "fresh": [(h.chunk.chunk_id, 0.0) for h in fresh],
        },
        rrf_k,
    )
    budget, waiting, chosen = max(k, len(kept_ids)), len(kept_ids), []
    for f in fused:
        if f.item_id in kept_ids:
            chosen.append(f.item_id)
            waiting -= 1
        elif len(chosen) + waiting < budget:
            chosen.append(f.item_id)
    return [replace(by_id[i], rank=rank) for rank, i in enumerate(chosen, start=1)]
