"""The support check's judge asked about every passage of an answer's context, on sentences
read by hand: how much its score depends on the passage, and what the located rule changes.

Each labelled sentence (`docs/data/support-labels.jsonl`: a sentence an `eval qa` run wrote,
read against its context, `stated` true or false) is found in the run's records and scored
against every passage of its context with the prompt answers are checked with
(`answer.support.check_messages`). The summary counts the stated and unstated sentences each
rule would pass, as `answer.checked` decides: the judge asked about the cited passage, then
the located ones, then the one holding most of the sentence's terms (two at most), passed at
`--threshold`, or at `--located` for a passage the sentence is located in (`stated`).

    python scripts/support_by_passage.py --labels docs/data/support-labels.jsonl \
        --records git-doc-crag.jsonl sqlite-doc-crag.jsonl formats-crag.jsonl \
        --model models/qwen2.5-coder-1.5b-instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \
        --scores scores.jsonl
    # again with the same --scores file: the scores are read back, the model is not loaded
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from crag_edge.answer.support import (
    LlmSupport,
    candidates,
    cited_numbers,
    claim_text,
    stated,
    term_support,
)
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem

Scored = dict[str, Any]


def labelled(labels: Path, records: list[Path]) -> list[tuple[dict[str, Any], str, bool]]:
    """(record, sentence, stated) for every labelled sentence found in the records."""
    wanted = {}
    for line in labels.open(encoding="utf-8"):
        row = json.loads(line)
        if "passage" in row:  # an item checked against its own passage
            continue
        wanted[(row["question_id"], row["sentence"])] = row["stated"]
    found = []
    for path in records:
        for line in path.open(encoding="utf-8"):
            record = json.loads(line)
            for sentence in (record.get("support") or {}).get("sentences", []):
                key = (record["question_id"], sentence["text"])
                if key in wanted:
                    found.append((record, sentence["text"], wanted.pop(key)))
    return found


def context_of(record: dict[str, Any]) -> list[ContextItem]:
    return [ContextItem(n, n, 0, where, "", 0, 0, text, "corpus", 1.0)
            for n, where, text in record["passages"]]  # fmt: skip


def score_all(rows: list[tuple[dict[str, Any], str, bool]], model: Path) -> list[Scored]:
    runtime = LlamaRuntime(model, model_id="judge", timeout_s=600, stall_timeout_s=600)
    judge, scored = LlmSupport(runtime), []
    for record, sentence, label in rows:
        context = context_of(record)
        pairs = [(claim_text(sentence), item.n) for item in context]
        scores = judge.scores(context, pairs, deadline=float("inf"))
        per = {str(item.n): s for item, s in zip(context, scores, strict=True)}
        scored.append({"question_id": record["question_id"], "sentence": sentence,
                       "stated": label, "per_passage": per})  # fmt: skip
    return scored


def passes(row: Scored, record: dict[str, Any], threshold: float, located: float) -> bool:
    terms = term_support(row["sentence"], context_of(record), None, record["question"])
    per = {int(n): s for n, s in row["per_passage"].items() if s is not None}
    asked = candidates(terms, cited_numbers(row["sentence"]))
    return any(stated(terms, (n, per[n]), threshold, located) for n in asked if n in per)


def summary(scored: list[Scored], records: dict[str, Any], args: argparse.Namespace) -> dict:
    known = [[s for s in r["per_passage"].values() if s is not None] for r in scored]
    spreads = [max(v) - min(v) for v in known if len(v) > 2]
    rules = {
        "threshold only": (args.threshold, 1.01),
        "located rule": (args.threshold, args.located),
    }
    table = {}
    for name, (threshold, located) in rules.items():
        passed = [(r["stated"], passes(r, records[r["question_id"]], threshold, located))
                  for r in scored]  # fmt: skip
        table[name] = {"stated_passed": sum(s and p for s, p in passed),
                       "unstated_passed": sum(not s and p for s, p in passed)}  # fmt: skip
    return {"sentences": len(scored), "stated": sum(r["stated"] for r in scored),
            "median_spread_across_passages": round(statistics.median(spreads), 3),
            "rules": table}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--records", type=Path, nargs="+", required=True)
    parser.add_argument("--model", type=Path, help="the judge's GGUF (not needed to re-read)")
    parser.add_argument("--scores", type=Path, required=True, help="written once, then read")
    parser.add_argument("--threshold", type=float, default=0.77)
    parser.add_argument("--located", type=float, default=0.65)
    args = parser.parse_args()
    rows = labelled(args.labels, args.records)
    if args.scores.exists():
        scored = [json.loads(line) for line in args.scores.open(encoding="utf-8")]
    elif args.model is None:
        parser.error("--model is needed to score what --scores does not hold yet")
    else:
        scored = score_all(rows, args.model)
        args.scores.write_text("".join(json.dumps(r) + "\n" for r in scored), encoding="utf-8")
    records = {record["question_id"]: record for record, _, _ in rows}
    print(json.dumps(summary(scored, records, args), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
