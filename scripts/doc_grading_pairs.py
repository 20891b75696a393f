"""Grading pairs from a documentation corpus: each question's retrieved chunks, labelled.

A question line of an `eval qa` question file may carry `"evidence"`: a regular expression
matching the sentence of the pages that states its answer. Each question's top-k hybrid hits
become `{"query", "passage", "label"}` lines, label 1 when the chunk matches its question's
evidence; the hits of a question the corpus cannot answer (`"in_corpus": false`) are all 0.
`crag-edge eval grading --pairs` then tells which tier ranks this corpus's chunks.

    python scripts/doc_grading_pairs.py --db git-doc.db \
        --questions docs/data/git-doc-questions.jsonl --out git-doc-pairs.jsonl
    crag-edge eval grading --pairs git-doc-pairs.jsonl --scorers cosine,signals,cross_encoder,llm
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from crag_edge.engine import Engine


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--questions", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--top-k", type=int, default=10)
    args = parser.parse_args()
    questions = [json.loads(line) for line in args.questions.read_text().splitlines() if line]
    relevant = 0
    with Engine.open(args.db, readonly=True) as engine, args.out.open("w") as out:
        for item in questions:
            if item["in_corpus"] and "evidence" not in item:
                continue  # answerable, but nothing says which chunk states the answer
            evidence = re.compile(item["evidence"]) if item["in_corpus"] else None
            for hit in engine.search(item["question"], top_k=args.top_k):
                label = int(evidence is not None and evidence.search(hit.chunk.text) is not None)
                relevant += label
                pair = {"query": item["question"], "passage": hit.chunk.text, "label": label}
                out.write(json.dumps(pair, ensure_ascii=False) + "\n")
    print(f"{relevant} relevant pairs written to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
