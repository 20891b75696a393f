"""The LLM judge reading whole passages against reading their best strips (`judge_focus_tokens`):
ROC-AUC and seconds per item on pair files (`crag-edge eval pairs`), same model, one run.

    python scripts/measure_judge_focus.py --pairs git-doc-pairs.jsonl \\
        heldout-hits.jsonl:30 --focus 0 96 --json focus.json

A file may end in `:N` to keep its first N queries. The raw scores are not calibrated: the AUC
does not depend on a monotone calibration.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from crag_edge.config import Settings
from crag_edge.evaluation.pairs import Pair, read_pairs
from crag_edge.grading.auc import roc_auc
from crag_edge.grading.llm_judge import LlmJudge
from crag_edge.models.llm import load_llm


def pairs_of(spec: str) -> tuple[str, list[Pair]]:
    """The pairs of `FILE[:N]`, grouped by query in file order, the first N queries kept."""
    path, _, limit = spec.partition(":")
    groups: dict[str, list[Pair]] = {}
    for pair in read_pairs(Path(path)):
        groups.setdefault(pair.query, []).append(pair)
    kept = list(groups.values())[: int(limit)] if limit else list(groups.values())
    return Path(path).stem, [pair for group in kept for pair in group]


def measure(judge: LlmJudge, pairs: list[Pair]) -> dict[str, float]:
    """AUC of the judge's raw scores on `pairs`, scored query by query, and its time per item."""
    scores: list[float] = []
    started = time.perf_counter()
    for query in dict.fromkeys(p.query for p in pairs):
        scores += judge.score(query, [p.passage for p in pairs if p.query == query]).scores
    seconds = (time.perf_counter() - started) / max(len(pairs), 1)
    auc = roc_auc(scores, [p.label >= 0.5 for p in pairs])
    return {"auc": round(float(auc), 4), "seconds_per_item": round(seconds, 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", nargs="+", required=True, help="pair files, FILE[:N]")
    parser.add_argument(
        "--focus", type=int, nargs="+", default=[0, 96], help="token budgets; 0 reads whole"
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    runtime = load_llm(Settings.load().models)
    readers = {f"focus{n}" if n else "whole": LlmJudge(runtime, focus_tokens=n) for n in args.focus}
    report: dict[str, dict[str, dict[str, float]]] = {}
    for spec in args.pairs:
        name, pairs = pairs_of(spec)
        report[name] = {reader: measure(judge, pairs) for reader, judge in readers.items()}
        print(name, len(pairs), json.dumps(report[name]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
