"""The corrective loop against plain top-k RAG on BEIR-style data.

Per query: the final decision, whether the fallback fired, "evidence recall" (the final
context holds a relevant document) and "noise rate" (share of final-context items that are
not relevant), beside the same two numbers for the plain top-k hits; latency per path.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from statistics import fmean
from typing import Any

from crag_edge.evaluation.metrics import percentile
from crag_edge.evaluation.retrieval import document_key

Query = Callable[[str], Any]  # -> CragResult
Search = Callable[[str], Sequence[Any]]  # -> list[Hit]


def evaluate_crag(
    query: Query,
    search: Search,
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
    *,
    on_query: Callable[[], None] | None = None,
) -> dict[str, Any]:
    judged = [qid for qid in queries if qid in qrels]
    decisions: Counter[str] = Counter()
    latencies: dict[str, list[float]] = {}
    crag_recall, crag_noise, plain_recall, plain_noise = [], [], [], []
    fallbacks, insufficient, iterations = 0, 0, []
    for qid in judged:
        relevant = {doc for doc, grade in qrels[qid].items() if grade > 0}
        started = time.perf_counter()
        result = query(queries[qid])
        elapsed = (time.perf_counter() - started) * 1000
        used_fallback = bool(result.fallback.get("used"))
        fallbacks += used_fallback
        insufficient += bool(result.insufficient_evidence)
        iterations.append(result.iterations)
        decision = str(result.decision)
        decisions[decision] += 1
        path = decision + ("+fallback" if used_fallback else "")
        latencies.setdefault(path, []).append(elapsed)
        keys = [document_key(item.source) for item in result.context]
        crag_recall.append(float(bool(relevant.intersection(keys))))
        if keys:
            crag_noise.append(sum(k not in relevant for k in keys) / len(keys))
        started = time.perf_counter()
        hits = search(queries[qid])
        latencies.setdefault("plain_top_k", []).append((time.perf_counter() - started) * 1000)
        plain_keys = [document_key(hit.chunk.source) for hit in hits]
        plain_recall.append(float(bool(relevant.intersection(plain_keys))))
        if plain_keys:
            plain_noise.append(sum(k not in relevant for k in plain_keys) / len(plain_keys))
        if on_query:
            on_query()
    n = len(judged)
    return {
        "queries": n,
        "decisions": {d: decisions.get(d, 0) for d in ("CORRECT", "AMBIGUOUS", "INCORRECT")},
        "fallback_rate": round(fallbacks / n, 4) if n else 0.0,
        "insufficient_evidence_rate": round(insufficient / n, 4) if n else 0.0,
        "mean_iterations": round(fmean(iterations), 3) if iterations else 0.0,
        "crag": {"evidence_recall": _mean(crag_recall), "noise_rate": _mean(crag_noise)},
        "plain_top_k": {"evidence_recall": _mean(plain_recall), "noise_rate": _mean(plain_noise)},
        "latency_ms": {
            path: {
                "n": len(v),
                "p50": round(percentile(v, 50), 1),
                "p95": round(percentile(v, 95), 1),
            }
            for path, v in sorted(latencies.items())
        },
    }


def _mean(values: list[float]) -> float:
    return round(fmean(values), 4) if values else 0.0
