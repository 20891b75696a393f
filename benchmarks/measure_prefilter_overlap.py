"""How much of exact dense search's top-k the binary pre-filter keeps, on real embeddings.

`crag-edge eval retrieval` fetches 300 chunks per query, so on a corpus of a few thousand
chunks the pre-filter rescores nearly every chunk and cannot differ from exact search. This
asks for fewer (top-10: 100 candidates; top-100: 1,000) and compares chunk ids per query.

    .venv/bin/python benchmarks/measure_prefilter_overlap.py --db subset.db \\
        --queries ../shared/data/scifact/queries.jsonl

Prints one JSON object: per k, the mean share of exact dense search's top-k the pre-filter
returns and the share of queries where both sets are identical; then the same for hybrid
top-10 (dense and bm25 lists of 100 each, as `Retriever` searches by default).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from crag_edge.config import Settings
from crag_edge.evaluation import read_queries
from crag_edge.groups import CorpusView
from crag_edge.models.registry import load_embedder
from crag_edge.retrieval import Retriever
from crag_edge.store import Corpus

EVERYTHING = CorpusView.everything()  # the owner's view: every document

DEPTHS = (10, 100)


def summary(name: str, kept: list[float]) -> dict[str, float]:
    return {
        f"{name}_overlap": round(float(np.mean(kept)), 4),
        f"{name}_identical_sets": round(float(np.mean(np.equal(kept, 1.0))), 4),
    }


PATHS = (None, 0)  # exact search, then the pre-filter at any size


def search(
    corpus: Corpus, prefilter_from: int | None, vector: np.ndarray, k: int
) -> list[tuple[int, float]]:
    corpus.prefilter_from = prefilter_from
    return corpus.search_vec(vector, k, view=EVERYTHING)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    args = parser.parse_args()
    embedder = load_embedder(Settings.load().models)
    texts = list(read_queries(args.queries).values())
    vectors = np.concatenate([embedder.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    report: dict[str, object] = {"queries": len(texts)}
    with Corpus.open(args.db, readonly=True) as corpus:
        report["chunks"] = corpus.stats(view=EVERYTHING).chunks
        for k in DEPTHS:
            kept = []
            for vector in vectors:
                exact, prefiltered = ({i for i, _ in search(corpus, p, vector, k)} for p in PATHS)
                kept.append(len(exact & prefiltered) / len(exact))
            report.update(summary(f"dense_top{k}", kept))
        retriever = Retriever(corpus, embedder)
        kept = []
        for text, vector in zip(texts, vectors, strict=True):
            ids = []
            for prefilter_from in PATHS:
                corpus.prefilter_from = prefilter_from
                ids.append(
                    {
                        h.chunk.chunk_id
                        for h in retriever.search(text, 10, "hybrid", vector, view=EVERYTHING)
                    }
                )
            kept.append(len(ids[0] & ids[1]) / len(ids[0]))
        report.update(summary("hybrid_top10", kept))
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
