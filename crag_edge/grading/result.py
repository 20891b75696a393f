"""What grading returns: per-item scores per tier and signal, the decision and its reasons."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from crag_edge.types import Action, Decision

# `decided_by` of a passage that addresses the model (`grading.injection`): never evidence.
SET_ASIDE = "set_aside"


@dataclass
class ItemGrade:
    """One hit's grade: every tier it reached, the tier that settled it, and why it was kept."""

    chunk_id: int
    rank: int
    score: float = 0.0
    decided_by: str = ""
    tiers: dict[str, float] = field(default_factory=dict)
    signals: dict[str, float | None] = field(default_factory=dict)
    kept: bool = True
    reason: str = ""

    @property
    def set_aside(self) -> bool:
        """Whether the passage addresses the model and was read by no tier: never evidence,
        not even when evidence is read again whole."""
        return self.decided_by == SET_ASIDE


@dataclass
class Grading:
    """The retrieval evaluator's verdict on one hit list."""

    decision: Decision
    action: Action
    score: float
    items: list[ItemGrade]
    reason: str
    rule: str | None = None
    decided_by: str = ""
    aggregation: str = ""
    thresholds: dict[str, float] = field(default_factory=dict)
    tiers: dict[str, str] = field(default_factory=dict)
    tier_items: dict[str, int] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    cache_hits: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
