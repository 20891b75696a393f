"""Standard ranking metrics over one query's ranked document ids (as in pytrec_eval / BEIR)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def ndcg_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    """nDCG@k with linear gains (relevance grade), log2 discount; 0 when nothing is relevant."""
    dcg = sum(relevant.get(doc, 0) / math.log2(i + 2) for i, doc in enumerate(ranked[:k]))
    ideal_gains = sorted((g for g in relevant.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal_gains))
    return dcg / idcg if idcg > 0 else 0.0


def recall_at(ranked: Sequence[str], relevant: dict[str, int], k: int) -> float:
    """Share of relevant documents found in the top k."""
    wanted = {doc for doc, grade in relevant.items() if grade > 0}
    if not wanted:
        return 0.0
    return len(wanted.intersection(ranked[:k])) / len(wanted)


def percentile(values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100); 0.0 for no values."""
    if not values:
        return 0.0
    ordered = sorted(values)
    index = max(0, math.ceil(q / 100 * len(ordered)) - 1)
    return ordered[index]
