"""The first answer word and the complete answer: CRAG against plain RAG, one LLM, one run.

For the sample questions over the demo corpus (`make demo`'s) and for SciFact claims over a
SciFact corpus, each question is answered by plain RAG (top-10 whole chunks, no grading) and
by CRAG (`evaluation.latency`), alternating, with the default LLM unless `--llm` says
otherwise. Reported per corpus and path: mean and median time to the first word after the
evidence was ready, mean time question to complete answer, prompt tokens and tokens
evaluated, and CRAG's total time over plain RAG's. Corpora are opened read only.

    python scripts/measure_answer_latency.py --demo-db demo.db --db subset.db \
        --claims ../shared/data/scifact/claims_train.csv --limit 20 --json latency.json
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from crag_edge.config import ModelSettings, Settings
from crag_edge.engine import Engine
from crag_edge.evaluation.latency import SAMPLE_QUESTIONS, TimedReply, crag_answer, plain_answer
from crag_edge.models.llm import SharedLlm

PATHS = {"plain": plain_answer, "crag": crag_answer}


def first_claims(path: Path, limit: int) -> list[str]:
    claims: list[str] = []
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            if row["claim"] not in claims:
                claims.append(row["claim"])
            if len(claims) == limit:
                break
    return claims


def run(engine: Engine, questions: Sequence[str]) -> dict[str, list[TimedReply]]:
    replies: dict[str, list[TimedReply]] = {name: [] for name in PATHS}
    for i, question in enumerate(questions, start=1):
        for name, path in PATHS.items():
            reply = path(engine, question)
            replies[name].append(reply)
            t = reply.timings
            print(
                f"  {i:>2} {name:<5} first word {t.first_token_s or 0:6.2f} s  "
                f"total {t.total_s:6.2f} s  prompt {t.prompt_tokens} "
                f"(evaluated {t.evaluated_tokens}) {reply.finish_reason}",
                flush=True,
            )
    return replies


def summary(replies: dict[str, list[TimedReply]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, items in replies.items():
        firsts = [r.timings.first_token_s for r in items if r.timings.first_token_s is not None]
        out[name] = {
            "questions": len(items),
            "first_token_s_mean": round(statistics.fmean(firsts), 3) if firsts else None,
            "first_token_s_median": round(statistics.median(firsts), 3) if firsts else None,
            "retrieval_grading_s_mean": _mean([r.timings.retrieval_grading_s for r in items]),
            "total_s_mean": _mean([r.timings.total_s for r in items]),
            "prompt_tokens_mean": _mean([r.timings.prompt_tokens or 0 for r in items]),
            "evaluated_tokens_mean": _mean([r.timings.evaluated_tokens or 0 for r in items]),
            "context_items_mean": _mean([r.context_items for r in items]),
            "finish_reasons": dict(Counter(r.finish_reason for r in items)),
        }
    out["crag_over_plain_total"] = round(
        out["crag"]["total_s_mean"] / out["plain"]["total_s_mean"], 3
    )
    return out


def _mean(values: Sequence[float]) -> float:
    return round(statistics.fmean(values), 3)


def print_table(results: dict[str, dict[str, Any]]) -> None:
    print(f"\n{'corpus':<8} {'path':<6} {'n':>3} {'first word mean/median s':>25} "
          f"{'total s':>8} {'prompt/evaluated':>17}")  # fmt: skip
    for corpus, numbers in results.items():
        for name in PATHS:
            row = numbers[name]
            print(
                f"{corpus:<8} {name:<6} {row['questions']:>3} "
                f"{row['first_token_s_mean']:>12} / {row['first_token_s_median']:<10} "
                f"{row['total_s_mean']:>8} "
                f"{row['prompt_tokens_mean']:>8.0f}/{row['evaluated_tokens_mean']:<8.0f}"
            )
        print(f"{corpus:<8} CRAG / plain RAG total time: {numbers['crag_over_plain_total']}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--demo-db", type=Path, required=True, help="sample_corpus/ ingested")
    parser.add_argument("--db", type=Path, required=True, help="a SciFact corpus")
    parser.add_argument("--claims", type=Path, required=True, help="SciFact claims_*.csv")
    parser.add_argument("--limit", type=int, default=20, help="SciFact claims asked")
    parser.add_argument("--llm", default=ModelSettings.model_fields["llm"].default)
    parser.add_argument(
        "--stall-timeout-s", type=float, default=600.0, help="llm_stall_timeout_s for the run"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the numbers here")
    args = parser.parse_args()
    # A busy machine may take longer than the stall limit for one prompt chunk: an answer cut
    # off there would measure nothing.
    settings = Settings.load(llm=args.llm, llm_stall_timeout_s=args.stall_timeout_s)
    llm = SharedLlm(settings.models)  # one model for both corpora and both paths
    if llm() is None:  # loaded now: its load would land on the first question's first word
        raise SystemExit(f"{args.llm} is not installed: run `crag-edge models pull {args.llm}`")
    corpora = {
        "demo": (args.demo_db, list(SAMPLE_QUESTIONS)),
        "scifact": (args.db, first_claims(args.claims, args.limit)),
    }
    results: dict[str, dict[str, Any]] = {}
    for corpus, (db, questions) in corpora.items():
        print(f"{corpus}: {len(questions)} questions, {args.llm}", flush=True)
        with Engine.open(db, settings, readonly=True, llm=llm) as engine:
            results[corpus] = summary(run(engine, questions))
    print_table(results)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
