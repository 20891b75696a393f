"""How much evidence refinement keeps, and how much context it removes, on SciFact.

For every train claim with rationale sentences, the gold abstract becomes one chunk, is split
into sentence strips and scored by each strip scorer; for each threshold we count the share
of rationale sentences kept (a kept strip overlaps the rationale's span: strips join short
sentences, so one strip may hold several of SciFact's sentences) and the share of the
abstract's tokens removed. A strip holding a rationale is a positive for the strip AUC. This
chose `strip_threshold` and the default strip scorer (docs/correction.md).

    python scripts/measure_refinement.py --data ../shared/data/scifact --json out.json
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from crag_edge.config import Settings
from crag_edge.correction.refine import StripScorer, decompose, score_strips
from crag_edge.grading.auc import roc_auc
from crag_edge.models.registry import load_embedder
from crag_edge.sentences import sentence_spans
from crag_edge.types import Chunk, Span

THRESHOLDS = (0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5)
# Relative: keep strips scoring at least this share of the best strip's score.
RELATIVE = (0.5, 0.6, 0.7, 0.8, 0.85, 0.9)
_INDEX = re.compile(r"\d+")


def claims_with_rationales(data: Path) -> list[tuple[str, dict[str, str], set[int]]]:
    docs = {}
    with (data / "corpus.jsonl").open(encoding="utf-8") as fh:
        for line in fh:
            doc = json.loads(line)
            docs[doc["_id"]] = doc
    found: dict[tuple[str, str], set[int]] = {}
    with (data / "claims_train.csv").open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["evidence_doc_id"]:
                indices = {int(i) for i in _INDEX.findall(row["evidence_sentences"])}
                found.setdefault((row["claim"], row["evidence_doc_id"]), set()).update(indices)
    return [(claim, docs[doc_id], indices) for (claim, doc_id), indices in found.items()]


SCORERS: tuple[StripScorer, ...] = ("coverage", "embedding")
# One abstract: each strip's score, its tokens, the rationale sentences it overlaps, and how
# many rationale sentences the abstract has.
Row = tuple[list[float], list[int], list[set[int]], int]


def rationales_per_strip(text: str, strips: Sequence[Span], rationale: set[int]) -> list[set[int]]:
    """Which rationale sentences (SciFact's indices) each strip overlaps."""
    sentences = sentence_spans(text, join_continuations=False)
    return [
        {i for i in rationale if strip.start < sentences[i][1] and sentences[i][0] < strip.end}
        for strip in strips
    ]


def sweep(rows: Sequence[Row], relative: bool) -> dict[str, dict[str, float]]:
    out = {}
    for threshold in RELATIVE if relative else THRESHOLDS:
        kept_rationales = total_rationales = kept_tokens = total_tokens = 0
        for scores, tokens, holds, rationales in rows:
            bar = threshold * max(scores) if relative else threshold
            keep = [s >= bar for s in scores]
            if not any(keep):  # the loop never refines good evidence away entirely
                keep[int(np.argmax(scores))] = True
            kept_rationales += len(set().union(*(h for h, k in zip(holds, keep, strict=True) if k)))
            total_rationales += rationales
            kept_tokens += sum(t for t, k in zip(tokens, keep, strict=True) if k)
            total_tokens += sum(tokens)
        out[str(threshold)] = {
            "rationales_kept": round(kept_rationales / total_rationales, 3),
            "tokens_removed": round(1 - kept_tokens / total_tokens, 3),
        }
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="the scifact data folder")
    parser.add_argument("--limit", type=int, default=None, help="first N claim-abstracts")
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args()
    embedder = load_embedder(Settings.load().models)
    items = claims_with_rationales(args.data)[: args.limit]
    report: dict[str, dict[str, object]] = {}
    for name in SCORERS:
        rows: list[Row] = []
        started = time.perf_counter()
        for claim, doc, rationale in items:
            text = doc["text"]
            chunk = Chunk(
                chunk_id=0, doc_id=0, ordinal=0, text=text, start=0, end=len(text), source=""
            )
            strips = decompose(chunk, "sentences")
            tokens = [
                len(embedder.tokenizer.encode(s.text, add_special_tokens=False).ids) for s in strips
            ]
            rows.append(
                (
                    score_strips(claim, strips, name, embedder),
                    tokens,
                    rationales_per_strip(text, strips, rationale),
                    len(rationale),
                )
            )
        seconds = time.perf_counter() - started
        auc = roc_auc(
            [x for scores, *_ in rows for x in scores],
            [int(bool(held)) for _, _, holds, _ in rows for held in holds],
        )
        report[name] = {
            "ms_per_abstract": round(1000 * seconds / len(items), 1),
            "strip_auc": round(auc, 4),
            "absolute": sweep(rows, relative=False),
            "relative_to_best": sweep(rows, relative=True),
        }
        print(name, f"{report[name]['ms_per_abstract']} ms/abstract, strip AUC {auc:.3f}")
        for kind in ("absolute", "relative_to_best"):
            for threshold, numbers in report[name][kind].items():  # type: ignore[attr-defined]
                print(
                    f"  {kind:>16} {threshold:>5}  kept {numbers['rationales_kept']:.3f}  "
                    f"removed {numbers['tokens_removed']:.3f}"
                )
    if args.json:
        args.json.write_text(json.dumps({"claims": len(items), "scorers": report}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
