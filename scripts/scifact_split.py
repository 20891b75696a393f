"""Split SciFact for the fallback experiment (docs/correction.md): corpus A lacks the gold
abstracts of a random half of the train claims; corpus B holds exactly those abstracts.

    python scripts/scifact_split.py ../shared/data/scifact OUT_DIR [--seed 7]

Writes OUT_DIR/{corpus_A.jsonl, corpus_B.jsonl, queries_A.jsonl, queries_B.jsonl,
qrels_A.tsv, qrels_B.tsv}: queries_B are the claims whose evidence only corpus B has.
queries_{A,B}_heldout.jsonl hold the claims among them that the evaluator's training never
sees (`training.data.is_validation` of `human_unit(claim)`, as `scifact_chunk_pairs.py`
splits them): the shipped evaluator is measured on those.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from crag_edge.evaluation import read_qrels, read_queries
from crag_edge.training.data import human_unit, is_validation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scifact", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    qrels = read_qrels(args.scifact / "qrels" / "train.tsv")
    queries = read_queries(args.scifact / "queries.jsonl")
    judged = sorted(q for q in qrels if q in queries)
    moved = set(random.Random(args.seed).sample(judged, len(judged) // 2))
    gold_b = {doc for q in moved for doc in qrels[q]}
    # A claim is answerable from A only if none of its gold abstracts moved to B.
    kept = [q for q in judged if q not in moved and not gold_b.intersection(qrels[q])]
    args.out.mkdir(parents=True, exist_ok=True)
    with (
        (args.scifact / "corpus.jsonl").open(encoding="utf-8") as source,
        (args.out / "corpus_A.jsonl").open("w", encoding="utf-8") as a,
        (args.out / "corpus_B.jsonl").open("w", encoding="utf-8") as b,
    ):
        for line in source:
            (b if json.loads(line)["_id"] in gold_b else a).write(line)
    for name, ids in (("A", kept), ("B", sorted(moved))):
        heldout = [q for q in ids if is_validation(human_unit(queries[q]))]
        for suffix, chosen in (("", ids), ("_heldout", heldout)):
            with (args.out / f"queries_{name}{suffix}.jsonl").open("w", encoding="utf-8") as out:
                for q in chosen:
                    out.write(json.dumps({"_id": q, "text": queries[q]}) + "\n")
        with (args.out / f"qrels_{name}.tsv").open("w", encoding="utf-8") as handle:
            handle.write("query-id\tcorpus-id\tscore\n")
            for q in ids:
                for doc, grade in qrels[q].items():
                    handle.write(f"{q}\t{doc}\t{grade}\n")
    print(
        json.dumps(
            {
                "moved_claims": len(moved),
                "answerable_from_A": len(kept),
                "abstracts_in_B": len(gold_b),
            }
        )
    )


if __name__ == "__main__":
    main()
