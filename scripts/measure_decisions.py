"""How often each list-level decision is right: CORRECT should mean the list holds an
answer, INCORRECT that it holds none.

Each query's pairs are graded as one hit list by the real default cascade (signals →
evaluator → LLM judge on its share); every item's fused score, tier probabilities and label
are recorded in `--records` (JSON lines, resumable: the judge costs seconds per item). The
decision rules are then replayed on those records:

- `rank_weighted` (the current rule): the rank-weighted mean of the kept items against the
  CORRECT / INCORRECT thresholds, with the variance check;
- `best_item`: CORRECT when the best item reaches the CORRECT threshold, INCORRECT when no
  item reaches `discard_below` (the original CRAG evaluator's rule), over a grid of
  thresholds.

    crag-edge eval pairs ../shared/data/wikiqa/WikiQA-dev.tsv --from wikiqa --out wikiqa.jsonl
    python scripts/measure_decisions.py --pairs wikiqa.jsonl --limit 150 \\
        --records decisions-wikiqa.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from crag_edge.config import Settings
from crag_edge.evaluation.grading import _as_hit, sample_queries
from crag_edge.evaluation.pairs import Pair, read_pairs
from crag_edge.grading import Evidence, Grader
from crag_edge.grading.factory import build_grader
from crag_edge.kernels import Aggregation, aggregate, score_variance
from crag_edge.models.llm import SharedLlm
from crag_edge.models.registry import load_embedder
from crag_edge.observability import AuditLog
from crag_edge.types import Embedder

THRESHOLDS = (0.3, 0.4, 0.5, 0.6, 0.7)


def record_lists(
    pairs: Sequence[Pair], embedder: Embedder, grader: Grader, records: Path
) -> list[dict[str, Any]]:
    """One record per query list (its items' scores and labels), grading only new lists."""
    done = {}
    if records.exists():
        for line in records.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done[row["query"]] = row
    groups: dict[str, list[Pair]] = {}
    for pair in pairs:
        groups.setdefault(pair.query, []).append(pair)
    with records.open("a", encoding="utf-8") as out:
        for n, (query, members) in enumerate(groups.items(), start=1):
            if query not in done:
                done[query] = _grade_list(query, members, embedder, grader)
                out.write(json.dumps(done[query]) + "\n")
                out.flush()
                print(f"{n}/{len(groups)} lists graded", flush=True)
    return [done[q] for q in groups]


def _grade_list(
    query: str, members: list[Pair], embedder: Embedder, grader: Grader
) -> dict[str, Any]:
    passages = [p.passage for p in members]
    vectors = embedder.embed([query, *passages])
    sims = (vectors[1:] @ vectors[0]).astype(np.float64)
    tokens = [len(e.ids) for e in embedder.tokenizer.encode_batch(passages)]
    hits = [_as_hit(p, i, i, sims[i], tokens[i]) for i, p in enumerate(members)]
    grading = grader.grade(query, Evidence(hits, sims, np.array(tokens)), AuditLog())
    return {
        "query": query,
        "decision": str(grading.decision),
        "labels": [p.label for p in members],
        "scores": [item.score for item in grading.items],
        "tiers": [item.tiers for item in grading.items],
    }


def rank_weighted(scores: list[float], correct: float, incorrect: float, discard: float) -> str:
    kept = np.array([s for s in scores if s >= discard], dtype=np.float64)
    if not len(kept):
        return "INCORRECT"
    score = float(aggregate(kept, int(Aggregation.RANK_WEIGHTED)))
    if score >= correct or (score > 0.5 and float(score_variance(kept)) <= 0.1):
        return "CORRECT"
    return "INCORRECT" if score < incorrect else "AMBIGUOUS"


def best_item(scores: list[float], correct: float, discard: float) -> str:
    best = max(scores, default=0.0)
    if best >= correct:
        return "CORRECT"
    return "AMBIGUOUS" if best >= discard else "INCORRECT"


def summarise(lists: list[dict[str, Any]], decide: Any) -> dict[str, Any]:
    """Precision of CORRECT (the list holds an answer), the share of answerable lists
    called CORRECT, and the share of unanswerable lists called INCORRECT."""
    decisions = [(decide(row["scores"]), any(row["labels"])) for row in lists]
    correct = [answerable for d, answerable in decisions if d == "CORRECT"]
    answerable = [d for d, a in decisions if a]
    unanswerable = [d for d, a in decisions if not a]
    return {
        "correct_precision": round(sum(correct) / len(correct), 3) if correct else None,
        "answerable_correct": round(answerable.count("CORRECT") / len(answerable), 3),
        "answerable_incorrect": round(answerable.count("INCORRECT") / len(answerable), 3),
        "unanswerable_incorrect": round(unanswerable.count("INCORRECT") / len(unanswerable), 3),
        "unanswerable_correct": round(unanswerable.count("CORRECT") / len(unanswerable), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, required=True)
    parser.add_argument("--limit", type=int, default=150, help="queries sampled (seeded)")
    parser.add_argument("--records", type=Path, required=True)
    args = parser.parse_args()
    settings = Settings.load()
    pairs = sample_queries(read_pairs(args.pairs), args.limit)
    embedder = load_embedder(settings.models)
    grader = build_grader(
        settings.grading, settings.models, llm=SharedLlm(settings.models), embedder=embedder
    )
    lists = record_lists(pairs, embedder, grader, args.records)
    answerable = sum(any(row["labels"]) for row in lists)
    print(f"{len(lists)} lists, {answerable} answerable")
    s = settings.grading
    rows = {
        "rank_weighted (current)": summarise(
            lists,
            lambda sc: rank_weighted(
                sc, s.correct_threshold, s.incorrect_threshold, s.discard_below
            ),
        )
    }
    for threshold in THRESHOLDS:
        rows[f"best_item >= {threshold}"] = summarise(
            lists, lambda sc, t=threshold: best_item(sc, t, s.discard_below)
        )
    for name, row in rows.items():
        print(f"{name:26} {json.dumps(row)}")


if __name__ == "__main__":
    main()
