"""Grading: fast-path rules, Numba signals, cross-encoder and LLM tiers, and the decision."""

from crag_edge.grading.calibration import Platt, fit_platt
from crag_edge.grading.cascade import Calibrations, Evidence, Grader
from crag_edge.grading.result import Grading, ItemGrade
from crag_edge.grading.rules import RULES, first_matching_rule
from crag_edge.grading.signals import SIGNALS, SignalWeights

__all__ = [
    "RULES",
    "SIGNALS",
    "Calibrations",
    "Evidence",
    "Grader",
    "Grading",
    "ItemGrade",
    "Platt",
    "SignalWeights",
    "first_matching_rule",
    "fit_platt",
]
