"""The engine: one corpus, its models and settings, and the order of the pipeline's stages.

Today the stages are ingest, retrieval and grading; correction and generation join here,
and only here, as they are built.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from crag_edge.config import Settings
from crag_edge.grading import Evidence, Grader, Grading
from crag_edge.grading.factory import build_grader
from crag_edge.ingest import Format, IngestReport, ProgressEvent, ingest
from crag_edge.models.registry import load_embedder
from crag_edge.observability import AuditEvent, AuditLog, AuditSink, Metrics
from crag_edge.retrieval import Mode, Retriever
from crag_edge.store import Corpus
from crag_edge.types import Embedder, Hit, Vector


@dataclass
class QueryResult:
    """Retrieved hits, their grades and the decision, with the audit trail and timings."""

    question: str
    hits: list[Hit]
    grading: Grading
    audit: list[AuditEvent] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


class Engine:
    """A corpus opened for ingest and search. Use `Engine.open`; close it (or use `with`)."""

    def __init__(
        self,
        corpus: Corpus,
        embedder: Embedder,
        settings: Settings,
        *,
        grader: Grader | None = None,
        metrics: Metrics | None = None,
    ) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.settings = settings
        self.metrics = metrics or Metrics()
        self.retriever = Retriever(
            corpus, embedder, candidates=settings.candidates, rrf_k=settings.rrf_k
        )
        self.grader = grader or build_grader(settings, self.metrics)
        self.audit_sink = AuditSink(settings.audit_log) if settings.audit_log else None

    @classmethod
    def open(
        cls,
        db: Path | str,
        settings: Settings | None = None,
        *,
        create: bool = False,
        readonly: bool = False,
        embedder: Embedder | None = None,
    ) -> Engine:
        """Open (or with `create`, create) a corpus and load the embedder it was built with.

        The corpus is opened first, so a wrong path, a foreign or corrupt file fails before
        any model loads; a corpus built by another embedder is refused.
        """
        settings = settings or Settings.load()
        db = Path(db)
        if create and not db.exists():
            embedder = embedder or load_embedder(settings)
            corpus = Corpus.create(db, embedder.model_id, embedder.dim)
        else:
            corpus = Corpus.open(db, readonly=readonly)
            try:
                embedder = embedder or load_embedder(settings)
                corpus.check_embedder(embedder.model_id, embedder.dim)
            except BaseException:
                corpus.close()
                raise
        return cls(corpus, embedder, settings)

    def ingest(
        self,
        inputs: Sequence[Path | str],
        *,
        fmt: Format = "auto",
        prune: bool = False,
        progress: Callable[[ProgressEvent], None] | None = None,
    ) -> IngestReport:
        """Add or update files (incremental by content hash); see `crag_edge.ingest`."""
        return ingest(
            self.corpus,
            self.embedder,
            self.embedder.tokenizer,
            inputs,
            settings=self.settings,
            fmt=fmt,
            prune=prune,
            progress=progress,
        )

    def search(
        self,
        question: str,
        *,
        mode: Mode | None = None,
        top_k: int | None = None,
    ) -> list[Hit]:
        """Retrieve the best chunks for `question`."""
        return self.retriever.search(
            question, top_k=top_k or self.settings.top_k, mode=mode or self.settings.retrieval_mode
        )

    def query(
        self, question: str, *, mode: Mode | None = None, top_k: int | None = None
    ) -> QueryResult:
        """Retrieve and grade: the hits, each with its grade, and the CRAG decision."""
        audit = AuditLog()
        timings: dict[str, float] = {}
        started = time.perf_counter()
        vector = self.retriever.embed_query(question) if question.strip() else None
        hits = self.retriever.search(
            question,
            top_k=top_k or self.settings.top_k,
            mode=mode or self.settings.retrieval_mode,
            query_vector=vector,
        )
        timings["retrieve"] = _elapsed_ms(started)
        self.metrics.stage_seconds.labels(stage="retrieve").observe(timings["retrieve"] / 1000)
        started = time.perf_counter()
        grading = self.grader.grade(question, self.evidence(hits, vector), audit)
        timings["grade"] = _elapsed_ms(started)
        self.metrics.stage_seconds.labels(stage="grade").observe(timings["grade"] / 1000)
        if self.audit_sink:
            self.audit_sink.write(audit.events, question=question, corpus=str(self.corpus.path))
        return QueryResult(question, hits, grading, audit.events, timings)

    def evidence(self, hits: Sequence[Hit], query_vector: Vector | None) -> Evidence:
        """Similarities for grading: the dense score, or the stored vector's cosine when only
        bm25 found the hit (NaN when nothing is known)."""
        similarities = np.array(
            [np.nan if h.dense_score is None else h.dense_score for h in hits], dtype=np.float64
        )
        missing = [i for i, h in enumerate(hits) if h.dense_score is None]
        if missing and query_vector is not None:
            vectors = self.corpus.get_vectors([hits[i].chunk.chunk_id for i in missing])
            similarities[missing] = vectors.astype(np.float64) @ query_vector.astype(np.float64)
        tokens = np.array([h.chunk.token_count for h in hits], dtype=np.int64)
        return Evidence(hits, similarities, tokens)

    def close(self) -> None:
        self.corpus.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def result_to_dict(result: QueryResult) -> dict[str, Any]:
    """The JSON shape of a query result (stable: independent checks read it)."""
    grades = {g.chunk_id: g for g in result.grading.items}
    hits = []
    for hit in result.hits:
        c = hit.chunk
        grade = grades.get(c.chunk_id)
        hits.append(
            {
                "rank": hit.rank,
                "score": hit.score,
                "dense_score": hit.dense_score,
                "dense_rank": hit.dense_rank,
                "bm25_score": hit.bm25_score,
                "bm25_rank": hit.bm25_rank,
                "origin": hit.origin,
                "chunk_id": c.chunk_id,
                "doc_id": c.doc_id,
                "source": c.source,
                "title": c.title,
                "start": c.start,
                "end": c.end,
                "text": c.text,
                "grade": None
                if grade is None
                else {
                    "score": grade.score,
                    "kept": grade.kept,
                    "decided_by": grade.decided_by,
                    "tiers": grade.tiers,
                    "signals": grade.signals,
                    "reason": grade.reason,
                },
            }
        )
    grading = result.grading
    return {
        "question": result.question,
        "decision": str(grading.decision),
        "action": str(grading.action),
        "score": grading.score,
        "reason": grading.reason,
        "rule": grading.rule,
        "decided_by": grading.decided_by,
        "aggregation": grading.aggregation,
        "thresholds": grading.thresholds,
        "tiers": grading.tiers,
        "tier_items": grading.tier_items,
        "warnings": grading.warnings,
        "hits": hits,
        "timings_ms": result.timings_ms | {f"grade.{k}": v for k, v in grading.timings_ms.items()},
        "audit": [e.to_dict() for e in result.audit],
    }
