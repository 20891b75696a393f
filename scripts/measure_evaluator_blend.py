"""Would the evaluator rank sentence pairs better blended with the embedder's cosine?

The shipped evaluator reads a passage through the embedder's frozen vector and only its query
side was trained, so on WikiQA (questions against single Wikipedia sentences) it stays near
the cosine it started from. Both scores are available at grading time without another model
run (the question's embedding is computed for retrieval anyway), so a blend would cost
nothing. For each pairs file (`crag-edge eval pairs`): ROC-AUC of the evaluator's logit, of the
cosine, and of their z-scored sum with the cosine weighted by each of `--weights`.

    crag-edge eval pairs --from wikiqa --out wikiqa.jsonl ../shared/data/wikiqa/WikiQA-dev.tsv
    python scripts/scifact_rationale_pairs.py --data ../shared/data/scifact --out rationale.jsonl
    python scripts/measure_evaluator_blend.py wikiqa.jsonl rationale.jsonl
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from pathlib import Path

import numpy as np
import numpy.typing as npt

from crag_edge.config import Settings
from crag_edge.evaluation.pairs import Pair, read_pairs
from crag_edge.grading.auc import roc_auc
from crag_edge.models.registry import load_cross_encoder, load_embedder
from crag_edge.types import Embedder, PairScorer

Scores = npt.NDArray[np.float64]


def scores(pairs: list[Pair], embedder: Embedder, evaluator: PairScorer) -> tuple[Scores, Scores]:
    """(evaluator logits, cosines) of every pair, read one query's passages at a time."""
    by_query: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_query[pair.query].append(pair)
    logits: list[float] = []
    cosines: list[float] = []
    for query, group in by_query.items():
        passages = [p.passage for p in group]
        for p in evaluator.score(query, passages).scores:
            p = min(max(p, 1e-7), 1 - 1e-7)
            logits.append(math.log(p / (1 - p)))
        vectors = np.asarray(embedder.embed(passages), dtype=np.float64)
        question = np.asarray(embedder.embed([query]), dtype=np.float64)[0]
        cosines.extend((vectors @ question).tolist())
    return np.array(logits), np.array(cosines)


def z(values: Scores) -> Scores:
    return (values - values.mean()) / values.std()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pairs", type=Path, nargs="+", help="pairs JSON Lines files")
    parser.add_argument("--weights", default="0,0.5,1,2,3", help="the cosine's weights")
    args = parser.parse_args()
    settings = Settings.load().models
    embedder = load_embedder(settings)
    evaluator = load_cross_encoder(settings, embedder)
    if evaluator is None:
        raise SystemExit("no evaluator installed: run `crag-edge models pull`")
    weights = [float(w) for w in args.weights.split(",")]
    for path in args.pairs:
        pairs = read_pairs(path)
        labels = [p.label for p in pairs]
        logits, cosines = scores(pairs, embedder, evaluator)
        blends = " ".join(
            f"{w:g}: {roc_auc((z(logits) + w * z(cosines)).tolist(), labels):.4f}" for w in weights
        )
        print(
            f"{path.name}: evaluator {roc_auc(logits.tolist(), labels):.4f}, "
            f"cosine {roc_auc(cosines.tolist(), labels):.4f}; blended, by the cosine's weight: "
            f"{blends}"
        )


if __name__ == "__main__":
    main()
