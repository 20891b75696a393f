"""A fixed SciFact subset for ingest speed and retrieval quality (docs/measurements.md): every
abstract a train claim cites, then the first other abstracts in corpus order up to `--size`,
written in corpus order. Deterministic, so two machines measure the same 1,000 abstracts.

    python scripts/scifact_subset.py ../shared/data/scifact subset.jsonl [--size 1000]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from crag_edge.evaluation import read_qrels


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scifact", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args()
    gold = {
        doc for docs in read_qrels(args.scifact / "qrels" / "train.tsv").values() for doc in docs
    }
    lines = (args.scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    is_gold = [json.loads(line)["_id"] in gold for line in lines]
    room = max(args.size - sum(is_gold), 0)
    kept, others = [], 0
    for line, cited in zip(lines, is_gold, strict=True):
        if cited or others < room:
            kept.append(line)
            others += not cited
    args.out.write_text("".join(f"{line}\n" for line in kept), encoding="utf-8")
    print(f"{len(kept)} abstracts ({sum(is_gold)} cited by train claims) -> {args.out}")


if __name__ == "__main__":
    main()
