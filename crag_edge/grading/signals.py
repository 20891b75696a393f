"""The signals tier: cheap per-item evidence computed by the Numba kernels in one batch.

Signals (each in [0, 1] per item; NaN = unavailable for that item):
- `similarity`: embedding cosine of query and passage, scaled by the list's coherence
  factor 1 - min(var, 0.3), so an erratic list earns less trust;
- `coverage`: share of the query's content terms (stemmed, stopwords removed) in the passage;
- `length`: adequacy of the passage length, reaching 1 at `min_chunk_tokens`;
- `diversity`: 1 / number of hits from the same source (redundant hits add less).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from crag_edge.grading.keywords import coverage
from crag_edge.kernels import (
    coherence_per_item,
    length_adequacy,
    source_uniqueness,
    weighted_sum,
)

FloatArray = npt.NDArray[np.float64]
SIGNALS = ("similarity", "coverage", "length", "diversity")


@dataclass(frozen=True)
class SignalWeights:
    """Weights of the signals in the tier's score (normalised by the kernel)."""

    similarity: float = 0.4
    coverage: float = 0.3
    length: float = 0.15
    diversity: float = 0.15

    def as_array(self) -> FloatArray:
        return np.array([getattr(self, name) for name in SIGNALS], dtype=np.float64)


def compute_signals(
    query: str,
    passages: Sequence[str],
    similarities: npt.ArrayLike,
    token_counts: npt.ArrayLike,
    sources: Sequence[str],
    min_tokens: int,
) -> dict[str, FloatArray]:
    """Every signal for every passage, as arrays aligned with `passages`."""
    sims = np.clip(np.asarray(similarities, dtype=np.float64), 0.0, 1.0)
    source_index = {s: i for i, s in enumerate(dict.fromkeys(sources))}
    return {
        "similarity": coherence_per_item(sims),
        "coverage": coverage(query, passages),
        "length": length_adequacy(np.asarray(token_counts, dtype=np.int64), min_tokens),
        "diversity": source_uniqueness(np.array([source_index[s] for s in sources], np.int64)),
    }


def combine(signals: dict[str, FloatArray], weights: SignalWeights) -> FloatArray:
    """The weighted signal score per item (signals missing for an item are skipped)."""
    matrix = (
        np.column_stack([signals[name] for name in SIGNALS])
        if signals["coverage"].size
        else (np.zeros((0, len(SIGNALS))))
    )
    return weighted_sum(np.ascontiguousarray(matrix, dtype=np.float64), weights.as_array())
