"""Numba kernels for the cheap grading signals, batched over a whole hit list.

Every kernel is a pure function of arrays (no objects, no I/O) compiled once to disk
(``cache=True``). Conventions shared by all kernels:

- Items are in retrieval order: position 0 is the top hit (rank matters for aggregation).
- NaN means "this signal is unavailable for this item" (e.g. a lexical-only hit has no dense
  similarity). Kernels skip NaN inputs and return NaN per item only where nothing is known.
- Empty input never raises: list-level kernels return 0.0, per-item kernels an empty array.

``reference.py`` holds the same algorithms as plain Python loops; tests assert equality.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit

# Aggregation strategies for ``aggregate`` (Python-level names: ``kernels.Aggregation``).
AGG_MEAN = 0
AGG_MAX = 1  # CRAG paper: the best item decides
AGG_MIN = 2  # the weakest kept item decides
AGG_RANK_WEIGHTED = 3  # weight 1 / (rank + 1), checked with ``score_variance``

COHERENCE_VARIANCE_CAP = 0.3  # coherence = mean * (1 - min(var, 0.3))

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


@njit(cache=True)
def _finite_mean_var(values: FloatArray) -> tuple[float, float, int]:
    """Two-pass population mean and variance over the non-NaN values, and their count."""
    count = 0
    total = 0.0
    for x in values:
        if not np.isnan(x):
            total += x
            count += 1
    if count == 0:
        return 0.0, 0.0, 0
    mean = total / count
    squares = 0.0
    for x in values:
        if not np.isnan(x):
            squares += (x - mean) * (x - mean)
    return mean, squares / count, count


@njit(cache=True)
def keyword_coverage(query_ids: IntArray, offsets: IntArray, ids: IntArray) -> FloatArray:
    """Per item, the share of the unique query terms it contains.

    ``offsets``/``ids`` is the CSR layout of ``grading.keywords.batch_terms`` (ids sorted per
    item), so each lookup is a binary search. A query without terms covers nothing: all zeros.
    """
    n = max(len(offsets) - 1, 0)
    out = np.zeros(n, dtype=np.float64)
    query = np.unique(query_ids)
    if len(query) == 0:
        return out
    for i in range(n):
        item = ids[offsets[i] : offsets[i + 1]]
        if len(item) == 0:
            continue
        found = 0
        for term in query:
            j = np.searchsorted(item, term)
            if j < len(item) and item[j] == term:
                found += 1
        out[i] = found / len(query)
    return out


@njit(cache=True)
def coherence(similarities: FloatArray, variance_cap: float = COHERENCE_VARIANCE_CAP) -> float:
    """List coherence: mean * (1 - min(var, cap)) of the similarities, in [0, 1].

    High when all hits are similar to the query, lowered when they disagree. NaN similarities
    are skipped; none left → 0.0.
    """
    mean, var, count = _finite_mean_var(similarities)
    if count == 0:
        return 0.0
    return min(max(mean * (1.0 - min(var, variance_cap)), 0.0), 1.0)


@njit(cache=True)
def coherence_per_item(
    similarities: FloatArray, variance_cap: float = COHERENCE_VARIANCE_CAP
) -> FloatArray:
    """Per item: its similarity scaled by the list's variance factor (1 - min(var, cap)).

    This splits ``coherence`` into per-item contributions whose mean is the list coherence
    (for similarities in [0, 1]), so a per-item weighted sum stays consistent with ``coherence``
    while still ranking items by their own similarity. NaN similarity → NaN (unavailable).
    """
    _, var, _ = _finite_mean_var(similarities)
    factor = 1.0 - min(var, variance_cap)
    out = np.empty(len(similarities), dtype=np.float64)
    for i in range(len(similarities)):
        x = similarities[i]
        out[i] = x if np.isnan(x) else min(max(x * factor, 0.0), 1.0)
    return out


@njit(cache=True)
def length_adequacy(token_counts: IntArray, min_tokens: int) -> FloatArray:
    """Per item min(1, tokens / min_tokens): short fragments rarely hold an answer.

    ``min_tokens <= 0`` means no minimum (all 1.0); negative counts count as 0.
    """
    out = np.ones(len(token_counts), dtype=np.float64)
    if min_tokens <= 0:
        return out
    for i in range(len(token_counts)):
        out[i] = min(max(token_counts[i], 0) / min_tokens, 1.0)
    return out


@njit(cache=True)
def _source_counts(source_ids: IntArray) -> tuple[IntArray, int]:
    """Per item, how many items share its source; and the number of distinct sources.

    An open-addressing hash table (Fibonacci hashing, linear probing, load <= 0.5) keeps this
    O(n): sorting, as ``np.unique`` does, made the kernel slower than NumPy at 10k items.
    """
    n = len(source_ids)
    bits = 1
    while (1 << bits) < 2 * n:
        bits += 1
    mask = (1 << bits) - 1
    keys = np.empty(mask + 1, dtype=np.int64)
    counts = np.zeros(mask + 1, dtype=np.int64)  # 0 marks an empty slot
    slots = np.empty(n, dtype=np.int64)
    distinct = 0
    for i in range(n):
        key = source_ids[i]
        h = key * np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15, wraps on overflow
        slot = (h ^ (h >> 32)) & mask
        while counts[slot] != 0 and keys[slot] != key:
            slot = (slot + 1) & mask
        if counts[slot] == 0:
            keys[slot] = key
            distinct += 1
        counts[slot] += 1
        slots[i] = slot
    return counts[slots], distinct


@njit(cache=True)
def source_diversity(source_ids: IntArray) -> float:
    """Distinct sources / items: 1.0 when every hit comes from a different source."""
    if len(source_ids) == 0:
        return 0.0
    return _source_counts(source_ids)[1] / len(source_ids)


@njit(cache=True)
def source_uniqueness(source_ids: IntArray) -> FloatArray:
    """Per item 1 / (number of items from the same source).

    Penalises near-duplicate evidence item by item; its mean equals ``source_diversity``.
    """
    return 1.0 / _source_counts(source_ids)[0]


@njit(cache=True)
def weighted_sum(signals: FloatArray, weights: FloatArray) -> FloatArray:
    """Per item sum_j w_j * s_j / sum_j w_j over the signals available for that item.

    ``signals`` is (items, signals); a NaN cell drops that signal for that item and the other
    weights are renormalised, so a missing signal neither counts as 0 nor as 1. Weights that
    are not > 0 (including NaN) disable their signal. An item with no available signal → NaN.
    """
    n, m = signals.shape
    out = np.empty(n, dtype=np.float64)
    for i in range(n):
        total = 0.0
        norm = 0.0
        for j in range(m):
            w = weights[j]
            s = signals[i, j]
            if w > 0.0 and not np.isnan(s):
                total += w * s
                norm += w
        out[i] = total / norm if norm > 0.0 else np.nan
    return out


@njit(cache=True)
def score_variance(scores: FloatArray) -> float:
    """Population variance of the non-NaN scores (0.0 when there are none).

    The variance check: a list whose rank-weighted score falls between the INCORRECT and
    CORRECT thresholds is AMBIGUOUS when this exceeds 0.1, else CORRECT if its score > 0.5.
    """
    return _finite_mean_var(scores)[1]


@njit(cache=True)
def aggregate(scores: FloatArray, strategy: int) -> float:
    """One list score from per-item scores (in retrieval order), NaN items skipped.

    ``AGG_RANK_WEIGHTED`` weights the item at position i by 1 / (i + 1); positions
    are the input positions, so a skipped item still occupies its rank. No scores → 0.0.
    Unknown strategy codes raise ``ValueError``.
    """
    if strategy < AGG_MEAN or strategy > AGG_RANK_WEIGHTED:
        raise ValueError("unknown aggregation strategy")
    total = 0.0
    norm = 0.0
    best = -np.inf
    worst = np.inf
    for i in range(len(scores)):
        s = scores[i]
        if np.isnan(s):
            continue
        w = 1.0 / (i + 1) if strategy == AGG_RANK_WEIGHTED else 1.0
        total += w * s
        norm += w
        best = max(best, s)
        worst = min(worst, s)
    if norm == 0.0:
        return 0.0
    if strategy == AGG_MAX:
        return best
    if strategy == AGG_MIN:
        return worst
    return total / norm
