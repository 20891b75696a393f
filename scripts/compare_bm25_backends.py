"""bm25 on two copies of one corpus (a SQLite file and its PostgreSQL copy, docs/scale-out.md):
how many questions get the same top 10, the largest score difference of a chunk both return,
and each backend's time per search. Chunks are matched by (source, ordinal), since a copy
numbers them anew.

    python scripts/compare_bm25_backends.py subset.db postgresql://... \
        --queries ../shared/data/scifact/queries.jsonl [--count 200] [--groups lab]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from crag_edge.evaluation import read_queries
from crag_edge.groups import CorpusView
from crag_edge.retrieval.lexical import search_bm25
from crag_edge.store import CorpusBackend
from crag_edge.store.factory import open_corpus

Ranked = list[tuple[tuple[str, int], float]]


def ranked(corpus: CorpusBackend, text: str, view: CorpusView) -> tuple[Ranked, float]:
    """The top 100 chunks as ((source, ordinal), score), and the seconds the search took."""
    started = time.perf_counter()
    hits = search_bm25(corpus, text, 100, view)
    took = time.perf_counter() - started
    chunks = corpus.get_chunks([chunk_id for chunk_id, _ in hits])
    return [((chunks[i].source, chunks[i].ordinal), score) for i, score in hits], took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--groups", nargs="*", help="search as a caller with these groups")
    args = parser.parse_args()
    view = CorpusView.everything() if args.groups is None else CorpusView.of(args.groups)
    texts = list(read_queries(args.queries).values())[: args.count]
    same, largest, seconds = 0, 0.0, [0.0, 0.0]
    with (
        open_corpus(args.first, readonly=True) as one,
        open_corpus(args.second, readonly=True) as two,
    ):
        for text in texts:
            (a, took_a), (b, took_b) = ranked(one, text, view), ranked(two, text, view)
            seconds[0] += took_a
            seconds[1] += took_b
            same += [key for key, _ in a[:10]] == [key for key, _ in b[:10]]
            scores = dict(b)
            largest = max([largest, *(abs(s - scores[k]) for k, s in a if k in scores)])
    per_search = [f"{1000 * s / len(texts):.1f} ms" for s in seconds]
    print(
        f"{len(texts)} questions: same top 10 for {same}, largest score difference "
        f"{largest:.1e}, per search {per_search[0]} (first) and {per_search[1]} (second)"
    )


if __name__ == "__main__":
    main()
