"""Area under the ROC curve: how well a tier's scores rank relevant above irrelevant pairs.

It lives with grading, not with the evaluation tools, because calibrating the grader to a
corpus (`grading.corpus_calibration`) reports it too, and the core imports nothing above it.
"""

from __future__ import annotations

from collections.abc import Sequence


def roc_auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    """Area under the ROC curve (Mann-Whitney U, ties counted half); NaN with one class only."""
    ranked = sorted(zip(scores, labels, strict=True), key=lambda pair: pair[0])
    positives = sum(1 for label in labels if label)
    negatives = len(labels) - positives
    if positives == 0 or negatives == 0:
        return float("nan")
    rank_sum, i = 0.0, 0
    while i < len(ranked):
        j = i
        while j < len(ranked) and ranked[j][0] == ranked[i][0]:
            j += 1
        average_rank = (i + 1 + j) / 2  # ranks i+1 .. j share their mean
        rank_sum += average_rank * sum(1 for k in range(i, j) if ranked[k][1])
        i = j
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives)
