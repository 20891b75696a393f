"""Platt scaling: map a tier's raw score to a probability of relevance before thresholding.

Raw scores live on different scales (cosine ~0.1-0.7, a yes-probability that is ~0.99 for
almost everything): one fixed threshold means nothing until each is calibrated against
labelled pairs. `fit_platt` fits p = sigmoid(a * raw + b) by Newton's method on the
log-loss; calibration is monotonic, so it never changes a tier's ROC-AUC.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Platt:
    """p = 1 / (1 + exp(-(a * raw + b)))."""

    a: float = 1.0
    b: float = 0.0

    def __call__(self, raw: npt.ArrayLike) -> FloatArray:
        z = self.a * np.asarray(raw, dtype=np.float64) + self.b
        return 1.0 / (1.0 + np.exp(-np.clip(z, -60.0, 60.0)))


@dataclass(frozen=True)
class Identity:
    """No calibration: for scores that are already probabilities of relevance."""

    def __call__(self, raw: npt.ArrayLike) -> FloatArray:
        return np.asarray(raw, dtype=np.float64)


Calibration = Platt | Identity


def calibration(params: tuple[float, float] | None) -> Calibration:
    """A Platt scaler for fitted (a, b), identity for None."""
    return Identity() if params is None else Platt(*params)


def fit_platt(raw: npt.ArrayLike, labels: npt.ArrayLike, iterations: int = 100) -> Platt:
    """Maximum-likelihood (a, b) with Platt's target smoothing, which keeps it finite on
    separable data. Labels are 0/1 or soft probabilities in [0, 1] (a teacher's); both
    classes must be present."""
    x = np.asarray(raw, dtype=np.float64)
    y = np.asarray(labels, dtype=np.float64)
    positives, negatives = float(y.sum()), float(len(y) - y.sum())
    if positives == 0 or negatives == 0:
        raise ValueError("calibration needs both relevant and non-relevant examples")
    target = y * (positives + 1) / (positives + 2) + (1 - y) / (negatives + 2)
    a, b = 0.0, float(np.log((negatives + 1) / (positives + 1)) * -1)
    for _ in range(iterations):
        p = Platt(a, b)(x)
        w = np.maximum(p * (1 - p), 1e-12)
        gradient = np.array([np.sum((p - target) * x), np.sum(p - target)])
        hessian = np.array([[np.sum(w * x * x), np.sum(w * x)], [np.sum(w * x), np.sum(w)]])
        hessian += np.eye(2) * 1e-9
        step = np.linalg.solve(hessian, gradient)
        a, b = a - float(step[0]), b - float(step[1])
        if np.max(np.abs(step)) < 1e-10:
            break
    return Platt(a, b)
