"""Choose the cascade's margins and tier fusion by measurement, spending the LLM once.

Every model tier (the installed cross-encoder, the LLM judge) scores every sampled pair once;
the raw scores are recorded in `--scores DIR` (resumable: the LLM costs seconds per item on
two cores). The real `Grader` then replays those recorded outputs for each configuration,
through the real `evaluate_grading`, so the AUCs and the share of items reaching each tier
are what `crag-edge eval grading` would print for that configuration. Calibrations of the
model tiers are fitted on SciFact pairs (training allowed), never on the evaluation sets.

    python scripts/measure_cascade.py --calibrate rationale-heldout.jsonl \\
        --pairs wikiqa.jsonl climate-fever.jsonl --limit 40 --scores /tmp/scores --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crag_edge.config import Settings
from crag_edge.evaluation.grading import evaluate_grading, sample_queries
from crag_edge.evaluation.pairs import Pair, read_pairs
from crag_edge.grading import Grader, fit_platt
from crag_edge.grading.factory import build_grader
from crag_edge.models.llm import SharedLlm
from crag_edge.models.registry import load_embedder
from crag_edge.types import PairScorer, ScoredBatch

MARGINS = (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3)
FUSIONS = ("last", "mean")
ESCALATE = (0, 1, 2)
JUDGE_SHARES = (0.1, 0.2, 0.25)
TIER_SETS = ("signals,cross_encoder,llm", "signals,llm", "cross_encoder,llm")


def _key(query: str, passage: str) -> str:
    return hashlib.sha1(f"{query}\x00{passage}".encode()).hexdigest()


class Recorded:
    """A tier's raw score per (query, passage), appended to a JSON-lines file as measured."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.scores: dict[str, float] = {}
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                self.scores[row["key"]] = row["score"]

    def record(self, scorer: PairScorer, pairs: Sequence[Pair]) -> float:
        """Score the pairs not yet recorded, query by query; returns seconds per item."""
        groups: dict[str, list[Pair]] = {}
        for pair in pairs:
            if _key(pair.query, pair.passage) not in self.scores:
                groups.setdefault(pair.query, []).append(pair)
        done, seconds = 0, 0.0
        total = sum(len(g) for g in groups.values())
        with self.path.open("a", encoding="utf-8") as out:
            for query, members in groups.items():
                started = time.perf_counter()
                batch = scorer.score(query, [p.passage for p in members])
                seconds += time.perf_counter() - started
                for pair, score, i in zip(members, batch.scores, range(len(members)), strict=True):
                    if i in batch.failed:
                        continue  # a stand-in 0.5 is not the model's judgement: retry next run
                    key = _key(pair.query, pair.passage)
                    self.scores[key] = float(score)
                    out.write(json.dumps({"key": key, "score": float(score)}) + "\n")
                out.flush()
                done += len(members)
                print(f"  {self.path.name}: {done}/{total} ({seconds / done:.2f} s/item)")
        return seconds / done if done else float("nan")


class Replay:
    """A `PairScorer` answering from recorded outputs (the model already ran)."""

    def __init__(self, name: str, recorded: Recorded) -> None:
        self.name = name
        self.recorded = recorded

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        return ScoredBatch([self.recorded.scores[_key(query, p)] for p in passages])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, nargs="+", required=True, help="evaluation sets")
    parser.add_argument("--calibrate", type=Path, required=True, help="SciFact pairs to fit on")
    parser.add_argument("--limit", type=int, default=40, help="queries sampled per set")
    parser.add_argument("--calibrate-limit", type=int, default=20, help="queries to fit on")
    parser.add_argument("--scores", type=Path, required=True, help="folder of recorded scores")
    parser.add_argument("--margins", type=float, nargs="+", default=MARGINS)
    parser.add_argument("--fusions", nargs="+", default=FUSIONS, choices=FUSIONS)
    parser.add_argument("--escalate", type=int, nargs="+", default=ESCALATE)
    parser.add_argument("--judge-shares", type=float, nargs="+", default=JUDGE_SHARES)
    parser.add_argument(
        "--tier-sets",
        nargs="+",
        default=TIER_SETS,
        help="grading_tiers to compare, comma-separated; sets naming a missing model are skipped",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    args.scores.mkdir(parents=True, exist_ok=True)
    settings = Settings.load(fast_path_rules=[])
    embedder = load_embedder(settings.models)
    live = build_grader(
        settings.grading, settings.models, llm=SharedLlm(settings.models), embedder=embedder
    )
    tiers: dict[str, PairScorer] = {
        name: scorer
        for name, scorer in (("cross_encoder", live.cross_encoder), ("llm", live.llm_judge))
        if scorer is not None
    }
    sets = {path.stem: sample_queries(read_pairs(path), args.limit) for path in args.pairs}
    calibration_pairs = sample_queries(read_pairs(args.calibrate), args.calibrate_limit)
    report: dict[str, Any] = {"tiers": sorted(tiers), "limit": args.limit, "seconds_per_item": {}}
    replays: dict[str, Replay] = {}
    calibrations: dict[str, tuple[float, float]] = {}
    for tier, scorer in tiers.items():
        recorded = Recorded(args.scores / f"{tier}-{scorer.name}.jsonl")
        per_item = [recorded.record(scorer, pairs) for pairs in (calibration_pairs, *sets.values())]
        report["seconds_per_item"][tier] = per_item
        replays[tier] = Replay(scorer.name, recorded)
    # A pair a tier could not score (an LLM timeout: retried on the next run) is left out.
    report["unscored_pairs"] = {}
    for name, pairs in [("calibration", calibration_pairs), *sets.items()]:
        scored = [
            p
            for p in pairs
            if all(_key(p.query, p.passage) in r.recorded.scores for r in replays.values())
        ]
        report["unscored_pairs"][name] = len(pairs) - len(scored)
        if name == "calibration":
            calibration_pairs = scored
        else:
            sets[name] = scored
    for tier, replay in replays.items():
        recorded = replay.recorded
        fitted = fit_platt(
            [recorded.scores[_key(p.query, p.passage)] for p in calibration_pairs],
            [p.label for p in calibration_pairs],
        )
        calibrations[tier] = (fitted.a, fitted.b)
    report["calibrations"] = calibrations
    report["results"] = []
    variants = [t.split(",") for t in args.tier_sets]
    variants = [t for t in variants if set(t) - {"signals"} <= set(replays)]
    for name, pairs in sets.items():
        for tiers, fusion, margin, top, share in itertools.product(
            variants, args.fusions, args.margins, args.escalate, args.judge_shares
        ):
            configured = settings.replace(
                grading_tiers=tiers,
                confidence_margin=margin,
                escalate_top=top,
                judge_share=share,
                tier_fusion=fusion,
                calibration_cross_encoder=calibrations.get("cross_encoder"),
                calibration_llm=calibrations.get("llm"),
            ).grading
            grader = Grader(
                configured,
                cross_encoder=replays.get("cross_encoder"),
                llm_judge=replays.get("llm"),
            )
            measured = evaluate_grading(pairs, embedder, grader)
            row = {
                "set": name,
                "tiers": configured.grading_tiers,
                "fusion": fusion,
                "margin": margin,
                "escalate_top": top,
                "judge_share": share,
                "auc": {k: v["roc_auc"] for k, v in measured["scorers"].items()},
                "cascade_auc": measured["cascade"]["roc_auc"],
                "answerable_auc": {
                    k: v["answerable_auc"]
                    for k, v in [*measured["scorers"].items(), ("cascade", measured["cascade"])]
                },
                "tier_share": measured["cascade"]["tier_share"],
                "pairs": measured["pairs"],
            }
            report["results"].append(row)
            print(json.dumps(row))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
