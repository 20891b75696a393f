"""The support judge asked four ways, on the sentences read by hand: ROC-AUC of stated
against each other label, and what the check's thresholds show.

- `check`: the check's own question ("Does passage [1] state what this statement says?")
  on the item's whole passage, as the check asks it;
- `piece`: the same question on the passage's sentence (a table's row) holding most of the
  sentence's terms, with one either side (`support_judge_reads = "piece"`);
- `line`: the same without the neighbours: that sentence or row alone (`judged_part` with
  `around=0`);
- `qa`: the question and the sentence as its answer ("Does passage [1] state this answer
  to the question?"), on the whole passage.

Each item of `docs/data/support-labels.jsonl` that carries its passage is scored; a
framing's scores are appended to `--scores` as they come, so a stopped run resumes.
`--located-only` keeps the items the located rule locates in their passage (the ones
`support_threshold_located` applies to). The items are taken in a fixed spread order, so a
run stopped early still holds every corpus.

    python scripts/measure_judge_framing.py --labels docs/data/support-labels.jsonl \\
        --judge-model models/qwen2.5-coder-1.5b-instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --framings check,qa --scores framing.jsonl
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from crag_edge.answer.generation import CONTEXT_OPENING, SYSTEM, passages_text
from crag_edge.answer.support import (
    ANSWERS,
    check_messages,
    claim_text,
    judged_part,
    term_support,
)
from crag_edge.config import Settings
from crag_edge.grading.auc import roc_auc
from crag_edge.models.chat_model import Message
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem

QA_USER = CONTEXT_OPENING + (
    "{passages}\n\nQuestion: {question}\nAnswer: {statement}\n\n"
    "Does passage [1] state this answer to the question? Answer Yes or No."
)
TIMEOUT_S = 600.0  # one item's calls on a busy machine
SPREAD = 7919  # a prime: items are taken by (i * SPREAD) mod n, a fixed shuffle of the corpora
Prompt = Callable[[dict[str, Any]], list[Message]]


def passage_item(text: str, n: int = 1, title: str = "") -> ContextItem:
    """`text` as passage [n] of a context, headed by `title` as the check heads it."""
    return ContextItem(n, 1, 0, title, "", 0, len(text), text, "corpus", 1.0)


def check_prompt(item: dict[str, Any]) -> list[Message]:
    passage = passage_item(item["passage"], title=item.get("passage_title", ""))
    return check_messages([passage], claim_text(item["sentence"]), 1)


def piece_prompt(item: dict[str, Any]) -> list[Message]:
    passage = passage_item(item["passage"], title=item.get("passage_title", ""))
    return check_messages([passage], claim_text(item["sentence"]), 1, reads="piece")


def line_prompt(item: dict[str, Any]) -> list[Message]:
    passage = passage_item(item["passage"], title=item.get("passage_title", ""))
    statement = claim_text(item["sentence"])
    return check_messages([judged_part(passage, statement, around=0)], statement, 1)


def qa_prompt(item: dict[str, Any]) -> list[Message]:
    user = QA_USER.format(
        passages=passages_text(
            [passage_item(item["passage"], title=item.get("passage_title", ""))]
        ),
        question=item.get("question", ""),
        statement=claim_text(item["sentence"]),
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


FRAMINGS: dict[str, Prompt] = {
    "check": check_prompt,
    "piece": piece_prompt,
    "line": line_prompt,
    "qa": qa_prompt,
}


def labelled_items(labels: Path, located_only: bool) -> list[dict[str, Any]]:
    """The items that carry their passage, numbered in file order, in the spread order."""
    rows = [json.loads(line) for line in labels.open(encoding="utf-8")]
    items = [dict(row, i=i) for i, row in enumerate(r for r in rows if "passage" in r)]
    if located_only:
        items = [it for it in items if is_located(it)]
    return sorted(items, key=lambda it: (it["i"] * SPREAD) % len(items))


def is_located(item: dict[str, Any]) -> bool:
    passage = [passage_item(item["passage"])]
    return bool(term_support(item["sentence"], passage, None, item.get("question", "")).located)


def yes_share(row: Sequence[float] | None) -> float | None:
    """P(yes) / (P(yes) + P(no)) over the first token, as the check scores it."""
    if row is None or row[0] == row[1] == -math.inf:
        return None
    log_yes, log_no = row
    return 1.0 / (1.0 + math.exp(log_no - log_yes))


def score(args: argparse.Namespace, items: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Every framing's score per item, resumed from and appended to `--scores`."""
    done: dict[int, dict[str, Any]] = {}
    if args.scores.exists():
        for line in args.scores.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done.setdefault(row["i"], {}).update(row)
    runtime = LlamaRuntime(
        args.judge_model, model_id="judge", n_ctx=2048, n_threads=2, timeout_s=TIMEOUT_S
    )
    with args.scores.open("a", encoding="utf-8") as out:
        for item in items:
            todo = [f for f in args.framings if f not in done.get(item["i"], {})]
            if not todo:
                continue
            prompts = [FRAMINGS[f](item) for f in todo]
            rows = runtime.answer_logprobs(prompts, ANSWERS, timeout_s=TIMEOUT_S).rows
            found = {"i": item["i"]} | {f: yes_share(r) for f, r in zip(todo, rows, strict=True)}
            done.setdefault(item["i"], {}).update(found)
            out.write(json.dumps(found) + "\n")
            out.flush()
    return done


Scored = list[tuple[dict[str, Any], float]]


def summary(
    items: list[dict[str, Any]], scores: dict[int, dict[str, Any]], framings: list[str]
) -> dict[str, Any]:
    """Per framing (and the lower of `check` and `qa` when both ran), `framing_report`."""
    keys = list(framings) + (["min(check,qa)"] if {"check", "qa"} <= set(framings) else [])
    report: dict[str, Any] = {}
    for key in keys:
        found = ((it, value(scores.get(it["i"], {}), key)) for it in items)
        report[key] = framing_report([(it, v) for it, v in found if v is not None])
    return report


def framing_report(rows: Scored) -> dict[str, Any]:
    """AUC of stated against the rest and against each other label, and how many of each
    label the check's rule shows at its thresholds (located items from the lower one)."""
    answer = Settings().answer
    stated = [v for it, v in rows if it["label"] == "stated"]
    labels = sorted({it["label"] for it, _ in rows})
    shown = {
        label: sum(
            v >= answer.support_threshold
            or (is_located(it) and v >= answer.support_threshold_located)
            for it, v in rows
            if it["label"] == label
        )
        for label in labels
    }
    return {
        "items": len(rows),
        "auc_rest": auc_of(stated, [v for it, v in rows if it["label"] != "stated"]),
        "auc_by_label": {
            label: auc_of(stated, [v for it, v in rows if it["label"] == label])
            for label in labels
            if label != "stated"
        },
        "auc_stated_unstated_by_corpus": {
            corpus: auc_of(
                [v for it, v in rows if it["corpus"] == corpus and it["label"] == "stated"],
                [v for it, v in rows if it["corpus"] == corpus and it["label"] == "unstated"],
            )
            for corpus in sorted({it["corpus"] for it, _ in rows})
        },
        "shown_at_thresholds": {
            label: f"{shown[label]} of {sum(it['label'] == label for it, _ in rows)}"
            for label in labels
        },
    }


def value(row: dict[str, Any], key: str) -> float | None:
    if key == "min(check,qa)":
        check, qa = row.get("check"), row.get("qa")
        return None if check is None or qa is None else min(float(check), float(qa))
    found = row.get(key)
    return None if found is None else float(found)


def auc_of(positive: list[float], negative: list[float]) -> float | None:
    if not positive or not negative:
        return None
    labels = [1] * len(positive) + [0] * len(negative)
    return round(roc_auc(positive + negative, labels), 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--judge-model", type=Path, required=True)
    parser.add_argument("--scores", type=Path, required=True)
    parser.add_argument("--framings", default="check,piece,qa")
    parser.add_argument("--located-only", action="store_true")
    args = parser.parse_args()
    args.framings = args.framings.split(",")
    unknown = set(args.framings) - set(FRAMINGS)
    if unknown:
        parser.error(f"unknown framings: {', '.join(sorted(unknown))}")
    items = labelled_items(args.labels, args.located_only)
    scores = score(args, items)
    print(json.dumps(summary(items, scores, args.framings), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
