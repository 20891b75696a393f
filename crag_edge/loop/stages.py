"""The loop's stage work: search, grade, rewrite, ask the fallback, refine. Each stage reads
the run, times itself (`with clock.stage(name):`), writes what it did to the run's journal
(corrections, audit) and returns what it found; only `Run.transition` changes the run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crag_edge.citations import document_places, locate
from crag_edge.config import CorrectionSettings, RetrievalSettings
from crag_edge.correction.expand import rewrite
from crag_edge.correction.fallback import FallbackProvider, run_fallbacks
from crag_edge.correction.refine import ContextBudget, embedder_tokens, refine
from crag_edge.grading import Evidence, Grader, Grading, ItemGrade
from crag_edge.loop.state import FallbackAsked, Run
from crag_edge.models.chat_model import ChatModel
from crag_edge.result import ContextItem, Correction
from crag_edge.retrieval import Retriever
from crag_edge.store import CorpusBackend, PassageVectorsBackend, ScoreCacheBackend
from crag_edge.types import Chunk, Embedder, Hit, Span, Vector

Kept = list[tuple[Hit, ItemGrade]]


@dataclass
class Stages:
    """The work of each phase, with the corpus's models and the loop's settings."""

    correction: CorrectionSettings
    retrieval: RetrievalSettings
    corpus: CorpusBackend
    embedder: Embedder
    retriever: Retriever
    grader: Grader
    fallbacks: Sequence[FallbackProvider]
    llm: Callable[[], ChatModel | None]
    cache: ScoreCacheBackend | None = field(init=False)
    passages: PassageVectorsBackend = field(init=False)

    def __post_init__(self) -> None:
        self.cache = self.corpus.score_cache() if self.grader.settings.score_cache else None
        self.passages = self.corpus.passage_vectors()

    def embed(self, text: str) -> Vector | None:
        return self.retriever.embed_query(text) if text.strip() else None

    def search(self, run: Run, query: str, strategy: str, depth: int = 0) -> list[Hit]:
        """The top `depth` (default k) hits for `query`, among what the caller may see."""
        vector = run.vector if query == run.question else self.embed(query)
        with run.clock.stage("retrieve"):
            return self.retriever.search(
                query,
                top_k=depth or run.k,
                mode=strategy,  # type: ignore[arg-type]
                query_vector=vector,
                view=run.view,
            )

    def keywords(self, question: str) -> tuple[str, str]:
        """The question as a keyword query, and how it was written (one LLM call)."""
        llm = self.llm() if self.correction.rewrite_with_llm else None
        return rewrite(question, llm)

    def grade(self, run: Run) -> Grading:
        """Grade the round's hits. The fast-path rules judge the first retrieval only: a later
        round holds just the chunks not graded yet (often few, which `few_context` would
        approve unread) or the fallback's results, and both must be graded."""
        clock = run.clock
        with clock.stage("grade"):
            grading = self.grader.grade(
                run.question,
                self.evidence(run.hits, run.vector),
                run.audit,
                use_rules=run.iteration == 0,
                cache=self.cache,
                passages=self.passages,
                on_tier=lambda tier, items, ms: clock.emit(
                    f"grade:{tier}", "start" if ms is None else "end", f"{items} items", ms
                ),
                carried=[grade for _, grade in run.kept.values()],
            )
        rule = f" (rule {grading.rule})" if grading.rule else ""
        clock.emit("decision", "event", f"{grading.decision} {grading.score:.2f}{rule}")
        return grading

    def evidence(self, hits: Sequence[Hit], vector: Vector | None) -> Evidence:
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

    def ask_fallback(self, run: Run, why: str) -> FallbackAsked:
        """Ask every fallback provider once, with the keyword rewrite."""
        query, how = run.keywords()
        run.corrections.append(
            Correction("rewrite", {"query": query, "by": how, "for": "fallback"})
        )
        with run.clock.stage("fallback"):
            outcome = run_fallbacks(
                self.fallbacks,
                query,
                self.correction.fallback_max_results,
                self.correction.fallback_timeout_s,
                rrf_k=self.retrieval.rrf_k,
                view=run.view,
            )
        run.corrections.append(
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
            run.audit.emit("fallback_failure", provider=provider, error=message)
        run.audit.emit("fallback", providers=outcome.used, results=len(outcome.hits), reason=why)
        return FallbackAsked(why, query, outcome)

    def context(self, run: Run, items: Kept, fast_path: bool) -> list[ContextItem]:
        """The answer's evidence: whole chunks within the budget on the fast path (which calls
        no model, refinement included), else the refined strips."""
        for hit, _ in items:
            run.corrections.append(Correction("keep", {"chunk_id": hit.chunk.chunk_id}))
        if fast_path:
            return _whole_chunks(self._within_budget(items, run))
        with run.clock.stage("refine"):
            return self._refine(run, items)

    def reread(self, run: Run, start: int) -> list[ContextItem]:
        """The evidence an answer is written from again when nothing of the first one is
        stated: the search's top hits (`top_k`, every round's in order, each chunk once) read
        whole, ungraded, while they fit `reread_budget_tokens`, numbered from `start`. Whole
        and ungraded because that is what the refined context lacked: the strip that answers,
        or the chunk the grading discarded; the support check still reads every sentence. A
        passage set aside for addressing the model stays out."""
        budget = ContextBudget(embedder_tokens(self.embedder))
        seen: set[int] = set()
        chosen: Kept = []
        for hit, grade in run.graded:
            if len(chosen) == run.k:
                break
            if hit.chunk.chunk_id in seen or grade.set_aside:
                continue
            if budget.spent + budget.cost(hit.chunk) > self.correction.reread_budget_tokens:
                break
            seen.add(hit.chunk.chunk_id)
            chosen.append((hit, grade))
            budget.spend(hit.chunk)
        return _whole_chunks(chosen, start)

    def _refine(self, run: Run, items: Kept) -> list[ContextItem]:
        chunks = [hit.chunk for hit, _ in items]
        origin = {hit.chunk.chunk_id: hit.origin for hit, _ in items}
        settings = self.correction
        refined = refine(
            run.question,
            chunks,
            self.embedder,
            mode=settings.strip_mode,
            scorer=settings.strip_scorer,
            threshold=settings.strip_threshold,
            budget_tokens=settings.context_budget_tokens,
            cross_encoder=self.grader.cross_encoder,
            anchor=max(items, key=lambda item: item[1].score)[0].chunk,
        )
        strips = refined.pieces  # never empty: the anchor's best strip stays
        if refined.over_budget:
            _note_cap(run, settings.context_budget_tokens, "strips", refined.over_budget)
        run.corrections.append(
            Correction(
                "refine",
                {
                    "strips_kept": len(refined.kept),
                    "strips_total": len(refined.scored),
                    "pieces": len(strips),
                    "mode": settings.strip_mode,
                    "scorer": settings.strip_scorer,
                },
            )
        )
        return _refined_context(strips, chunks, origin)

    def _within_budget(self, items: Kept, run: Run) -> Kept:
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
            _note_cap(run, limit, "chunks", len(dropped), dropped)
        return [item for item in items if item[0].chunk.chunk_id in chosen]


def _note_cap(
    run: Run, budget: int, unit: str, left_out: int, chunk_ids: list[int] | None = None
) -> None:
    """Relevant evidence left out of the answer's context for its token budget is never
    silent: a `cap` correction and a warning say how much."""
    detail: dict[str, Any] = {"budget_tokens": budget, f"{unit}_left_out": left_out}
    if chunk_ids is not None:
        detail["chunk_ids"] = chunk_ids
    run.corrections.append(Correction("cap", detail))
    run.warnings.append(
        f"{left_out} relevant {unit} left out of the answer's context: it holds at most "
        f"{budget} tokens (context_budget_tokens)"
    )


def _refined_context(
    pieces: Sequence[Span], chunks: Sequence[Chunk], origin: dict[int, str]
) -> list[ContextItem]:
    """The refined pieces as numbered evidence, each located by the places of its document's
    chunks (a piece may join sentences of neighbouring chunks, or hold one page of a chunk
    that spans two)."""
    items = []
    for n, s in enumerate(pieces, start=1):
        same_document = (c for c in chunks if (c.doc_id, c.source) == (s.doc_id, s.source))
        where = locate(document_places(same_document), s.start, s.end)
        items.append(
            s.located(
                n=n,
                origin=origin[s.chunk_id],
                score=round(s.score, 4),
                pages=where.pages,
                section=where.section,
            )
        )
    return items


def _whole_chunks(items: Kept, start: int = 1) -> list[ContextItem]:
    return [
        ContextItem.from_chunk(h.chunk, n=n, origin=h.origin, score=g.score)
        for n, (h, g) in enumerate(items, start=start)
    ]
