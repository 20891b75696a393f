"""Build a `Grader` from settings: load the model tiers that are installed and enabled."""

from __future__ import annotations

from crag_edge.config import Settings
from crag_edge.grading.cascade import Grader
from crag_edge.models.registry import load_cross_encoder
from crag_edge.observability import Metrics


def build_grader(settings: Settings, metrics: Metrics | None = None) -> Grader:
    """A grader with every enabled tier whose model is installed; missing ones are reported
    as `unavailable` in each result rather than failing."""
    cross_encoder = (
        load_cross_encoder(settings) if "cross_encoder" in settings.grading_tiers else None
    )
    return Grader(settings, cross_encoder=cross_encoder, metrics=metrics)
