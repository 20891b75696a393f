"""Reciprocal Rank Fusion (Cormack et al. 2009): score = sum over lists of 1 / (k + rank)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass
class Fused:
    """One item after fusion, remembering its rank and score in every input list (1-based)."""

    item_id: int
    score: float = 0.0
    ranks: dict[str, int] = field(default_factory=dict)
    scores: dict[str, float] = field(default_factory=dict)


def rrf(ranked: Mapping[str, Sequence[tuple[int, float]]], k: int = 60) -> list[Fused]:
    """Fuse named ranked lists of (id, score); ties broken by best single rank, then id.

    Items missing from a list contribute nothing for it. Duplicate ids within one list
    count once, at their best rank.
    """
    if k < 1:
        raise ValueError("RRF k must be >= 1")
    fused: dict[int, Fused] = {}
    for name, items in ranked.items():
        for rank, (item_id, score) in enumerate(items, start=1):
            entry = fused.setdefault(item_id, Fused(item_id))
            if name in entry.ranks:
                continue
            entry.ranks[name] = rank
            entry.scores[name] = score
            entry.score += 1.0 / (k + rank)
    return sorted(fused.values(), key=lambda f: (-f.score, min(f.ranks.values()), f.item_id))
