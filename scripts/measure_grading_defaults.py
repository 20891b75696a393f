"""Measure the grading defaults: signal weights, the signals calibration, the aggregation.

Reproduces the numbers in docs/grading.md. Pairs files come from `crag-edge eval pairs`;
SciFact (training allowed) fits, WikiQA and Climate-FEVER (evaluation only) check transfer.

    python scripts/measure_grading_defaults.py --pairs-dir /tmp/pairs
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from crag_edge.config import Settings
from crag_edge.evaluation.pairs import Pair, read_pairs
from crag_edge.grading.auc import roc_auc
from crag_edge.grading.calibration import fit_platt
from crag_edge.grading.signals import SIGNALS, compute_signals
from crag_edge.kernels import Aggregation, aggregate
from crag_edge.models.registry import load_embedder

DATASETS = ("scifact", "wikiqa", "climate-fever")
WEIGHT_GRID = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def signal_matrix(pairs: list[Pair], settings: Settings) -> tuple[np.ndarray, np.ndarray]:
    """Per pair: the four signals (grouped by query, as hit lists) and the cosine."""
    embedder = load_embedder(settings.models)
    groups: dict[str, list[int]] = {}
    for i, pair in enumerate(pairs):
        groups.setdefault(pair.query, []).append(i)
    tokens = [len(e.ids) for e in embedder.tokenizer.encode_batch([p.passage for p in pairs])]
    matrix, cosine = np.zeros((len(pairs), len(SIGNALS))), np.zeros(len(pairs))
    for query, members in groups.items():
        vectors = embedder.embed([query, *(pairs[i].passage for i in members)])
        sims = (vectors[1:] @ vectors[0]).astype(np.float64)
        signals = compute_signals(
            query,
            [pairs[i].passage for i in members],
            sims,
            [tokens[i] for i in members],
            [f"p{i}" for i in members],
            settings.grading.min_chunk_tokens,
        )
        matrix[members] = np.column_stack([signals[name] for name in SIGNALS])
        cosine[members] = sims
    return matrix, cosine


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs-dir", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings.load()
    data = {}
    for name in DATASETS:
        pairs = read_pairs(args.pairs_dir / f"{name}.jsonl")
        matrix, cosine = signal_matrix(pairs, settings)
        data[name] = (pairs, matrix, cosine, np.array([p.label for p in pairs]))

    def auc(name: str, weights: tuple[float, ...]) -> float:
        _, matrix, _, labels = data[name]
        w = np.array(weights)
        return roc_auc(list(matrix @ w / w.sum()), list(labels))

    report: dict[str, object] = {
        "cosine_auc": {n: roc_auc(list(data[n][2]), list(data[n][3])) for n in DATASETS}
    }
    grid = [
        w
        for w in itertools.product(WEIGHT_GRID, WEIGHT_GRID, (0, 0.05, 0.1, 0.15), (0, 0.05, 0.15))
        if w[0] + w[1] > 0
    ]
    best = max(grid, key=lambda w: auc("scifact", w))
    chosen = (0.4, 0.3, 0.15, 0.15)
    report["weights"] = {
        str(w): {n: round(auc(n, w), 4) for n in DATASETS} for w in (best, chosen, (1, 0, 0, 0))
    }
    _, matrix, _, labels = data["scifact"]
    raw = matrix @ np.array(chosen) / sum(chosen)
    platt = fit_platt(raw, labels)
    report["calibration_signals"] = [platt.a, platt.b]
    report["aggregation_answerable_auc"] = {}
    for name in DATASETS:
        pairs, matrix, cosine, _ = data[name]
        probability = platt(matrix @ np.array(chosen) / sum(chosen))
        groups: dict[str, list[int]] = {}
        for i, pair in enumerate(pairs):
            groups.setdefault(pair.query, []).append(i)
        answerable, scores = [], {a.name.lower(): [] for a in Aggregation}
        for members in groups.values():
            members = sorted(members, key=lambda i: -cosine[i])  # retrieval order
            answerable.append(int(any(pairs[i].label for i in members)))
            kept = probability[members][probability[members] >= settings.grading.discard_below]
            for strategy in Aggregation:
                value = float(aggregate(kept, int(strategy))) if len(kept) else 0.0
                scores[strategy.name.lower()].append(value)
        report["aggregation_answerable_auc"][name] = {  # type: ignore[index]
            a: round(roc_auc(v, answerable), 4) for a, v in scores.items()
        }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
