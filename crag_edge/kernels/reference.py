"""Pure-Python reference implementations of the kernels in ``signals.py``.

Plain loops over lists, written for obviousness rather than speed: the property tests check
the kernels against them, and the benchmarks use them as the pure-Python baseline. They
follow the same conventions (NaN = unavailable, empty input never raises, same summation
order) so results agree to rounding.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from crag_edge.kernels.signals import (
    AGG_MAX,
    AGG_MEAN,
    AGG_MIN,
    AGG_RANK_WEIGHTED,
    COHERENCE_VARIANCE_CAP,
)


def _finite_mean_var(values: Sequence[float]) -> tuple[float, float, int]:
    finite = [x for x in values if not math.isnan(x)]
    if not finite:
        return 0.0, 0.0, 0
    total = 0.0
    for x in finite:
        total += x
    mean = total / len(finite)
    squares = 0.0
    for x in finite:
        squares += (x - mean) * (x - mean)
    return mean, squares / len(finite), len(finite)


def _clip01(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def keyword_coverage(
    query_ids: Sequence[int], offsets: Sequence[int], ids: Sequence[int]
) -> list[float]:
    query = set(query_ids)
    out = []
    for i in range(max(len(offsets) - 1, 0)):
        item = set(ids[offsets[i] : offsets[i + 1]])
        out.append(sum(1 for t in query if t in item) / len(query) if query else 0.0)
    return out


def coherence(similarities: Sequence[float], variance_cap: float = COHERENCE_VARIANCE_CAP) -> float:
    mean, var, count = _finite_mean_var(similarities)
    return _clip01(mean * (1.0 - min(var, variance_cap))) if count else 0.0


def coherence_per_item(
    similarities: Sequence[float], variance_cap: float = COHERENCE_VARIANCE_CAP
) -> list[float]:
    factor = 1.0 - min(_finite_mean_var(similarities)[1], variance_cap)
    return [x if math.isnan(x) else _clip01(x * factor) for x in similarities]


def length_adequacy(token_counts: Sequence[int], min_tokens: int) -> list[float]:
    if min_tokens <= 0:
        return [1.0] * len(token_counts)
    return [min(max(t, 0) / min_tokens, 1.0) for t in token_counts]


def source_diversity(source_ids: Sequence[int]) -> float:
    return len(set(source_ids)) / len(source_ids) if len(source_ids) else 0.0


def source_uniqueness(source_ids: Sequence[int]) -> list[float]:
    counts: dict[int, int] = {}
    for s in source_ids:
        counts[s] = counts.get(s, 0) + 1
    return [1.0 / counts[s] for s in source_ids]


def weighted_sum(signals: Sequence[Sequence[float]], weights: Sequence[float]) -> list[float]:
    out = []
    for row in signals:
        total = 0.0
        norm = 0.0
        for w, s in zip(weights, row, strict=True):
            if w > 0.0 and not math.isnan(s):
                total += w * s
                norm += w
        out.append(total / norm if norm > 0.0 else math.nan)
    return out


def score_variance(scores: Sequence[float]) -> float:
    return _finite_mean_var(scores)[1]


def aggregate(scores: Sequence[float], strategy: int) -> float:
    if strategy not in (AGG_MEAN, AGG_MAX, AGG_MIN, AGG_RANK_WEIGHTED):
        raise ValueError("unknown aggregation strategy")
    ranked = [(i, s) for i, s in enumerate(scores) if not math.isnan(s)]
    if not ranked:
        return 0.0
    if strategy == AGG_MAX:
        return max(s for _, s in ranked)
    if strategy == AGG_MIN:
        return min(s for _, s in ranked)
    total = 0.0
    norm = 0.0
    for i, s in ranked:
        w = 1.0 / (i + 1) if strategy == AGG_RANK_WEIGHTED else 1.0
        total += w * s
        norm += w
    return total / norm
