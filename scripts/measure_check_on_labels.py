"""The whole support check on the sentences read by hand: which it shows, by label.

Each item of `docs/data/support-labels.jsonl` that carries its passage is checked as an
answer of its own: the sentence before it in its answer (`previous`, when it has one) and the
sentence, written from the one passage, the question asked. The check is the shipped one
(`answer.checked.CheckedAnswer` with its default settings): the quote and row tiers, the judge
reading where the words are, the located rule, the pointer rules, the answering rule with the
embedder's cosines, and the faults of a passed sentence (a row's value from another column,
an option its passage does not hold). The bar is what a reader sees: every stated sentence
shown, and no unstated, out-of-context or not-answering one.

Each item's verdict is appended to `--verdicts` as it comes, so a stopped run resumes.

    python scripts/measure_check_on_labels.py --labels docs/data/support-labels.jsonl \\
        --judge-model models/qwen2.5-coder-1.5b-instruct/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf \\
        --embedder models/all-minilm-l6-v2 --verdicts check-verdicts.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from collections.abc import Generator
from pathlib import Path
from typing import Any

from crag_edge.answer.checked import CheckedAnswer
from crag_edge.answer.generation import AnswerFinish
from crag_edge.answer.support import claim_text
from crag_edge.config import AnswerSettings
from crag_edge.models.chat_model import TextStream
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem, CragResult
from crag_edge.types import Action, Decision

TIMEOUT_S = 600.0  # one item's calls on a busy machine


def labelled_items(labels: Path) -> list[dict[str, Any]]:
    """The items that carry their passage, numbered in file order."""
    rows = [json.loads(line) for line in labels.open(encoding="utf-8")]
    return [dict(row, i=i) for i, row in enumerate(r for r in rows if "passage" in r)]


def written(sentences: list[str]) -> TextStream[AnswerFinish]:
    """The sentences as a model's pieces, word by word, ended on its own."""

    def pieces() -> Generator[str, None, AnswerFinish]:
        for i, sentence in enumerate(sentences):
            yield from (f" {word}" if i or j else word for j, word in enumerate(sentence.split()))
        return "stop"

    return TextStream(pieces())


def shown(item: dict[str, Any], judge: LlamaRuntime, embedder: OnnxEmbedder) -> dict[str, Any]:
    """Whether the check shows the item's sentence, and how it decided."""
    passage = ContextItem(
        1, 1, 0, item["passage_title"], "", 0, len(item["passage"]), item["passage"], "corpus", 0.9
    )
    result = CragResult(
        item["question"], Decision.AMBIGUOUS, Action.REFINE, 0.6, "kept", [passage], []
    )
    sentences = [s for s in (item.get("previous"), item["sentence"]) if s]
    answer = CheckedAnswer(written(sentences), result, judge, AnswerSettings(), embedder=embedder)
    "".join(answer)
    mine = claim_text(item["sentence"])
    verdict = next(
        (s for s in answer.support.sentences if claim_text(s.text) == mine),
        None,
    )
    return {
        "i": item["i"],
        "shown": bool(verdict and verdict.shown),
        "checked_by": verdict.checked_by if verdict else "lost",
        "score": verdict.score if verdict else None,
        "judge_calls": answer.support.judge_calls,
        "seconds": round(answer.support.seconds, 3),
    }


def verdicts(args: argparse.Namespace, items: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Every item's verdict, resumed from and appended to `--verdicts`."""
    done: dict[int, dict[str, Any]] = {}
    if args.verdicts.exists():
        for line in args.verdicts.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done[row["i"]] = row
    judge = LlamaRuntime(
        args.judge_model, model_id="judge", n_ctx=4096, n_threads=2, timeout_s=TIMEOUT_S
    )
    folder = args.embedder
    embedder = OnnxEmbedder(folder / "model.int8.onnx", folder / "tokenizer.json", folder.name)
    with args.verdicts.open("a", encoding="utf-8") as out:
        for item in items:
            if item["i"] in done:
                continue
            done[item["i"]] = shown(item, judge, embedder)
            out.write(json.dumps(done[item["i"]]) + "\n")
            out.flush()
    return done


def summary(items: list[dict[str, Any]], found: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Shown of each label (overall and by corpus), the share of shown sentences that are not
    stated, and how the sentences not stated that were shown were passed."""
    by_label: Counter[str] = Counter()
    shown_by_label: Counter[str] = Counter()
    by_corpus: dict[str, Counter[str]] = defaultdict(Counter)
    passed_by: Counter[str] = Counter()
    for item in items:
        verdict = found[item["i"]]
        label = item["label"]
        by_label[label] += 1
        if verdict["shown"]:
            shown_by_label[label] += 1
            by_corpus[item["set"]][label] += 1
            if label != "stated":
                passed_by[verdict["checked_by"]] += 1
    shown_total = sum(shown_by_label.values())
    wrongly = shown_total - shown_by_label["stated"]
    return {
        "items": len(items),
        "shown_of_label": {k: f"{shown_by_label[k]} of {n}" for k, n in sorted(by_label.items())},
        "stated_shown": round(shown_by_label["stated"] / by_label["stated"], 3),
        "shown_not_stated": round(wrongly / shown_total, 3) if shown_total else None,
        "shown_by_corpus": {k: dict(v) for k, v in sorted(by_corpus.items())},
        "not_stated_passed_by": dict(passed_by),
        "judge_calls_per_item": round(
            sum(found[it["i"]]["judge_calls"] for it in items) / len(items), 2
        ),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--judge-model", type=Path, required=True)
    parser.add_argument("--embedder", type=Path, required=True, help="all-MiniLM-L6-v2 folder")
    parser.add_argument("--verdicts", type=Path, required=True)
    args = parser.parse_args()
    items = labelled_items(args.labels)
    print(json.dumps(summary(items, verdicts(args, items)), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
