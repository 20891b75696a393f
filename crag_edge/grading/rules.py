"""Fast-path rules: approve evidence with no model call when the case is clear.

Each rule looks only at the hit list and the settings. The first rule that matches wins:
every item scores 1.0 and the action is GENERATE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from crag_edge.config import GradingSettings
from crag_edge.types import Hit

Rule = Callable[[Sequence[Hit], GradingSettings], bool]


def read_file(hits: Sequence[Hit], settings: GradingSettings) -> bool:
    """Every item was asked for explicitly (by id or path), not found by a search."""
    return bool(hits) and all(h.origin == "read_file" for h in hits)


def few_context(hits: Sequence[Hit], settings: GradingSettings) -> bool:
    """So few items that grading costs more than reading them (`auto_approve_max_items`)."""
    return 0 < len(hits) <= settings.auto_approve_max_items


def high_vector_score(hits: Sequence[Hit], settings: GradingSettings) -> bool:
    """Every item came from vector search with similarity >= `vector_score_threshold`."""
    return bool(hits) and all(
        h.dense_score is not None and h.dense_score >= settings.vector_score_threshold for h in hits
    )


RULES: dict[str, Rule] = {
    "read_file": read_file,
    "few_context": few_context,
    "high_vector_score": high_vector_score,
}


def first_matching_rule(hits: Sequence[Hit], settings: GradingSettings) -> str | None:
    """The name of the first configured rule that matches, in configured order."""
    for name in settings.fast_path_rules:
        if RULES[name](hits, settings):
            return name
    return None
