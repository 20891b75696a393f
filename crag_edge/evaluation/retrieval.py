"""Retrieval quality on BEIR-style data: nDCG@10, Recall@10/100, latency per query.

Documents are ranked by their best chunk. A qrels document id matches a corpus document
whose source is `beir:<id>` (BEIR ingest) or, for ingested files, whose file name is `<id>`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import PurePath
from statistics import fmean
from typing import Any

from crag_edge.evaluation.metrics import ndcg_at, percentile, recall_at
from crag_edge.groups import CorpusView
from crag_edge.retrieval import Mode, Retriever
from crag_edge.types import Hit

CHUNKS_PER_DOCUMENT = 3
"""Chunk hits fetched per wanted document, so that collapsing chunks still fills the depth."""


def document_key(source: str) -> str:
    """The id qrels use for a document: the BEIR `_id`, or the file name (a fallback corpus's
    hits read `<db>#<source>`: the part after `#` counts)."""
    source = source.rsplit("#", 1)[-1]
    if source.startswith("beir:"):
        return source.removeprefix("beir:")
    return PurePath(source).name


def ranked_documents(hits: list[Hit], depth: int) -> list[str]:
    """Document ids in order of their best chunk, at most `depth`."""
    seen: dict[str, None] = {}
    for hit in hits:
        seen.setdefault(document_key(hit.chunk.source), None)
        if len(seen) == depth:
            break
    return list(seen)


def evaluate_retrieval(
    retriever: Retriever,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    mode: Mode,
    *,
    depth: int = 100,
    on_query: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run every query that has qrels and average the metrics (BEIR convention)."""
    judged = [qid for qid in queries if qid in qrels]
    ndcg10, recall10, recall100, latencies = [], [], [], []
    for qid in judged:
        started = time.perf_counter()
        hits = retriever.search(
            queries[qid], top_k=depth * CHUNKS_PER_DOCUMENT, mode=mode, view=CorpusView.everything()
        )
        latencies.append((time.perf_counter() - started) * 1000)
        ranked = ranked_documents(hits, depth)
        ndcg10.append(ndcg_at(ranked, qrels[qid], 10))
        recall10.append(recall_at(ranked, qrels[qid], 10))
        recall100.append(recall_at(ranked, qrels[qid], 100))
        if on_query:
            on_query()
    return {
        "mode": mode,
        "queries": len(judged),
        "ndcg@10": round(fmean(ndcg10), 4) if judged else 0.0,
        "recall@10": round(fmean(recall10), 4) if judged else 0.0,
        "recall@100": round(fmean(recall100), 4) if judged else 0.0,
        "latency_ms_p50": round(percentile(latencies, 50), 2),
        "latency_ms_p95": round(percentile(latencies, 95), 2),
    }
