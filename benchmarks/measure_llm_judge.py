"""Measure the LLM judge's modes: ROC-AUC against human labels and items per second.

Samples a bounded, label-balanced set of (query, passage) pairs per dataset, grouped by
query as a retriever would hand them over (each group is one `score` call), and runs every
mode on the same groups. Evaluation data only: nothing here is trained or tuned on it.

    .venv/bin/python benchmarks/measure_llm_judge.py --threads 1 \\
        --wikiqa-pairs 60 --scifact-pairs 24

Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from crag_edge.config import Settings
from crag_edge.evaluation.pairs import Pair, pairs_from
from crag_edge.grading.auc import roc_auc
from crag_edge.grading.llm_judge import MODES, LlmJudge
from crag_edge.models.llm import load_llm

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def sample_groups(
    pairs: list[Pair], limit: int, per_label: int, group_size: int, seed: int
) -> list[list[Pair]]:
    """Queries that have both relevant and irrelevant passages; from each, up to `per_label`
    of each label in equal numbers, then (if `group_size`) more irrelevant passages of the
    same query up to `group_size`, like a retriever's top-k; until `limit` pairs."""
    by_query: dict[str, list[Pair]] = defaultdict(list)
    for pair in pairs:
        by_query[pair.query].append(pair)
    rng = random.Random(seed)
    queries = sorted(by_query)
    rng.shuffle(queries)
    groups: list[list[Pair]] = []
    total = 0
    for query in queries:
        pos = [p for p in by_query[query] if p.label]
        neg = [p for p in by_query[query] if not p.label]
        k = min(per_label, len(pos), len(neg), (limit - total) // 2)
        if k == 0:
            continue
        extra = max(0, min(group_size - 2 * k, len(neg) - k, limit - total - 2 * k))
        group = rng.sample(pos, k) + rng.sample(neg, k + extra)
        rng.shuffle(group)
        groups.append(group)
        total += len(group)
        if total >= limit - 1:
            break
    return groups


def run_modes(judges: dict[str, LlmJudge], groups: list[list[Pair]]) -> dict[str, Any]:
    """Every mode on each group in turn, so that load from other jobs hits all modes alike."""
    scores: dict[str, list[float]] = defaultdict(list)
    warnings: dict[str, list[str]] = defaultdict(list)
    seconds: dict[str, float] = defaultdict(float)
    labels = [p.label for group in groups for p in group]
    for group in groups:
        for mode, judge in judges.items():
            started = time.perf_counter()
            batch = judge.score(group[0].query, [p.passage for p in group])
            seconds[mode] += time.perf_counter() - started
            scores[mode].extend(batch.scores)
            warnings[mode].extend(batch.warnings)
    return {mode: summary(scores[mode], labels, seconds[mode], warnings[mode]) for mode in judges}


def summary(
    scores: list[float], labels: list[int], seconds: float, warnings: list[str]
) -> dict[str, Any]:
    pairs = list(zip(scores, labels, strict=True))
    pos = [s for s, y in pairs if y]
    neg = [s for s, y in pairs if not y]
    return {
        "auc": round(roc_auc(scores, labels), 4),
        "items_per_s": round(len(scores) / seconds, 3),
        "seconds": round(seconds, 1),
        "mean_relevant": round(sum(pos) / len(pos), 3),
        "mean_irrelevant": round(sum(neg) / len(neg), 3),
        "accuracy_at_0.5": round(sum((s >= 0.5) == bool(y) for s, y in pairs) / len(pairs), 3),
        "distinct_scores": len(set(scores)),
        "warnings": len(warnings),
        "first_warnings": warnings[:3],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="manifest id (default: the llm setting)")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--data", type=Path, default=DATA, help="folder with wikiqa/, scifact/")
    parser.add_argument("--wikiqa-pairs", type=int, default=60)
    parser.add_argument("--scifact-pairs", type=int, default=24)
    parser.add_argument("--per-label", type=int, default=3, help="max pairs per label per query")
    parser.add_argument(
        "--group-size", type=int, default=0, help="pad groups with irrelevant passages to this"
    )
    parser.add_argument("--threads", type=int, default=0, help="llama.cpp threads, 0 = all")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--max-passage-tokens", type=int, default=256)
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per score call")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()

    settings = Settings.load(llm_threads=args.threads, llm_context=args.context, llm_timeout_s=3600)
    started = time.perf_counter()
    runtime = load_llm(settings.models, args.model)
    report: dict[str, Any] = {
        "model": runtime.model_id,
        "threads": args.threads,
        "context": args.context,
        "max_passage_tokens": args.max_passage_tokens,
        "group_size": args.group_size,
        "load_seconds": round(time.perf_counter() - started, 1),
        "datasets": {},
    }
    sources = [
        ("wikiqa", args.data / "wikiqa" / "WikiQA-dev.tsv", args.wikiqa_pairs),
        ("scifact", args.data / "scifact", args.scifact_pairs),
    ]
    for name, path, limit in sources:
        if limit <= 0:
            continue
        pairs = pairs_from(name, path)
        groups = sample_groups(pairs, limit, args.per_label, args.group_size, args.seed)
        n = sum(len(g) for g in groups)
        entry: dict[str, Any] = {
            "pairs": n,
            "relevant": sum(p.label for g in groups for p in g),
            "groups": len(groups),
        }
        judges = {
            mode: LlmJudge(
                runtime, mode, max_passage_tokens=args.max_passage_tokens, timeout_s=args.timeout
            )
            for mode in args.modes
        }
        entry.update(run_modes(judges, groups))
        print(f"{name}: {entry}", file=sys.stderr, flush=True)
        report["datasets"][name] = entry
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
