"""The support check's LLM tier on SciFact's human rationales: AUC and the threshold.

For each train claim with evidence, the context is its abstract in three passages: the
rationale sentences (as annotated) and the rest split in two. The check is asked about the
rationale passage (supported when SciFact labels it SUPPORT, not when CONTRADICT) and about
one of the others (never supported: it does not bear on the claim). The prompt is the one
answers are checked with (`answer.support.check_messages`), so its prefix is the answer
prompt's, as in use.

    python scripts/measure_support.py --data ../shared/data/scifact --claims 60 --json out.json

SciFact: CC BY 4.0 (claims) / ODC-By 1.0 (abstracts), Wadden et al. 2020.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import re
import time
from pathlib import Path

from crag_edge.answer.support import LlmSupport
from crag_edge.config import Settings
from crag_edge.grading.auc import roc_auc
from crag_edge.models.llm import load_llm
from crag_edge.result import ContextItem
from crag_edge.sentences import sentence_spans

_INDEX = re.compile(r"\d+")


def claims(data: Path, count: int, seed: int) -> list[dict[str, object]]:
    docs = {}
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            docs[doc["_id"]] = doc
    rows = []
    with (data / "claims_train.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["evidence_doc_id"] and row["evidence_label"] in ("SUPPORT", "CONTRADICT"):
                doc = docs[row["evidence_doc_id"]]
                indices = {int(i) for i in _INDEX.findall(row["evidence_sentences"])}
                rows.append({"claim": row["claim"], "label": row["evidence_label"],
                             "text": doc["text"], "indices": indices})  # fmt: skip
    random.Random(seed).shuffle(rows)
    return rows[:count]


def passages(text: str, indices: set[int]) -> list[ContextItem] | None:
    sentences = [text[a:b] for a, b in sentence_spans(text, join_continuations=False)]
    rationale = [s for i, s in enumerate(sentences) if i in indices]
    rest = [s for i, s in enumerate(sentences) if i not in indices]
    if not rationale or len(rest) < 2:
        return None
    half = len(rest) // 2
    texts = [" ".join(rest[:half]), " ".join(rationale), " ".join(rest[half:])]
    return [ContextItem(n, n, 0, "abstract", "", 0, 0, t, "corpus", 1.0)
            for n, t in enumerate(texts, start=1)]  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True)
    parser.add_argument("--claims", type=int, default=60)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    llm = load_llm(Settings.load().models)
    assert llm is not None, "no LLM installed: crag-edge models pull"
    tier = LlmSupport(llm)
    scores: list[float] = []
    labels: list[int] = []
    started = time.monotonic()
    for row in claims(args.data, args.claims, args.seed):
        context = passages(str(row["text"]), row["indices"])  # type: ignore[arg-type]
        if context is None:
            continue
        asks = [(str(row["claim"]), 2), (str(row["claim"]), 1)]
        got = tier.scores(context, asks, time.monotonic() + 600)
        for score, label in zip(got, [int(row["label"] == "SUPPORT"), 0], strict=True):
            if score is not None:
                scores.append(score)
                labels.append(label)
    report = {"pairs": len(scores), "positives": sum(labels),
              "auc": roc_auc(scores, labels), "seconds": time.monotonic() - started,
              "thresholds": {}}  # fmt: skip
    for t in (0.3, 0.5, 0.7, 0.8, 0.9, 0.95):
        passed = [label for s, label in zip(scores, labels, strict=True) if s >= t]
        precision = sum(passed) / len(passed) if passed else float("nan")
        recall = sum(passed) / max(1, sum(labels))
        report["thresholds"][t] = {"precision": precision, "recall": recall}  # type: ignore[index]
    print(json.dumps(report, indent=1))
    if args.json:
        args.json.write_text(json.dumps({"report": report, "scores": scores, "labels": labels}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
