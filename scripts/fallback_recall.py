"""Does the local fallback retrieve the moved claims' evidence? (docs/correction.md)

    python scripts/fallback_recall.py --main A.db --fallback B.db \
        --queries split/queries_B.jsonl --qrels split/qrels_B.tsv [--limit 30] [--depth 5]

For each judged claim, whether a gold abstract is among the fallback corpus's hits for the
claim as asked and for its keyword rewrite (the rule-based one, no LLM): what the fallback
could hand to grading, apart from whether the loop asks it and what grading keeps.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from crag_edge.correction.expand import rewrite
from crag_edge.correction.fallback.local import LocalCorpusProvider
from crag_edge.engine import Engine
from crag_edge.evaluation import read_qrels, read_queries
from crag_edge.evaluation.retrieval import document_key
from crag_edge.groups import CorpusView

EVERYTHING = CorpusView.everything()  # the owner's view: every document


def found(provider: LocalCorpusProvider, query: str, gold: set[str], depth: int) -> bool:
    return any(
        document_key(hit.chunk.source) in gold
        for hit in provider.search(query, depth, view=EVERYTHING)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--main", type=Path, required=True, help="corpus whose embedder is used")
    parser.add_argument("--fallback", type=Path, required=True)
    parser.add_argument("--queries", type=Path, required=True)
    parser.add_argument("--qrels", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=30)
    parser.add_argument("--depth", type=int, default=5, help="the fallback's max results")
    args = parser.parse_args()
    queries = read_queries(args.queries)
    qrels = read_qrels(args.qrels)
    judged = [q for q in queries if q in qrels][: args.limit]
    engine = Engine.open(args.main)
    provider = LocalCorpusProvider(args.fallback, engine.embedder)
    as_asked = as_keywords = 0
    for query_id in judged:
        claim, gold = queries[query_id], set(qrels[query_id])
        as_asked += found(provider, claim, gold, args.depth)
        as_keywords += found(provider, rewrite(claim, None)[0], gold, args.depth)
    print(
        f"gold in the fallback's top {args.depth}: as asked {as_asked}, "
        f"keyword rewrite {as_keywords}, of {len(judged)} claims"
    )


if __name__ == "__main__":
    main()
