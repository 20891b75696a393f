"""Numba kernels for the grading signals and the binary pre-filter's scan: pure functions over
arrays, no I/O, no objects."""

from __future__ import annotations

from enum import IntEnum

from crag_edge.kernels.hamming import hamming_nearest
from crag_edge.kernels.signals import (
    AGG_MAX,
    AGG_MEAN,
    AGG_MIN,
    AGG_RANK_WEIGHTED,
    COHERENCE_VARIANCE_CAP,
    aggregate,
    coherence,
    coherence_per_item,
    keyword_coverage,
    length_adequacy,
    score_variance,
    source_diversity,
    source_uniqueness,
    weighted_sum,
)

__all__ = [
    "AGG_MAX",
    "AGG_MEAN",
    "AGG_MIN",
    "AGG_RANK_WEIGHTED",
    "COHERENCE_VARIANCE_CAP",
    "Aggregation",
    "aggregate",
    "coherence",
    "coherence_per_item",
    "hamming_nearest",
    "keyword_coverage",
    "length_adequacy",
    "score_variance",
    "source_diversity",
    "source_uniqueness",
    "weighted_sum",
]


class Aggregation(IntEnum):
    """Named codes for ``aggregate``; pass the member itself (it is an int) to the kernel."""

    MEAN = AGG_MEAN
    MAX = AGG_MAX
    MIN = AGG_MIN
    RANK_WEIGHTED = AGG_RANK_WEIGHTED

    @classmethod
    def parse(cls, name: str) -> Aggregation:
        """Settings spelling to code: "mean", "max", "min", "rank_weighted" / "rank-weighted"."""
        try:
            return cls[name.strip().upper().replace("-", "_")]
        except KeyError:
            choices = ", ".join(member.name.lower() for member in cls)
            raise ValueError(f"unknown aggregation {name!r}; choose one of {choices}") from None
