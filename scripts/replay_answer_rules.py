"""The rules read after the judge, replayed with no LLM on the answers of recorded runs.

`crag-edge eval qa --records F` keeps every answer with its passages and each sentence's
verdict. The rules that fail a sentence whichever tier passed it read only the sentence, its
passage, the context and the question, so their decisions on a recorded answer are exact
without running the model again: a rule is measured here on every sentence the run passed
or judged before it is taken. Prints each flagged sentence with its answer's outcome, then
the count read.

    python scripts/replay_answer_rules.py git-answers.jsonl sqlite-answers.jsonl
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from crag_edge.answer.entries import passed_over, said_of_neighbour, value_of_unnamed
from crag_edge.answer.restated import other_subject
from crag_edge.answer.support import claim_text
from crag_edge.result import ContextItem

# One rule: (claim, question, the sentence's passage, the context) -> why it fails, or None.
Rule = Callable[[str, str, ContextItem, list[ContextItem]], object]
RULES: dict[str, Rule] = {
    "subject": lambda claim, _q, item, _c: other_subject(claim, item.text),
    "entry": lambda claim, question, item, context: said_of_neighbour(
        claim, question, item, context
    ),
    "unnamed": lambda claim, question, item, _c: value_of_unnamed(claim, question, item),
    "passed-over": lambda claim, question, item, _c: passed_over(claim, question, item.text),
}


def context_of(record: dict[str, Any]) -> dict[int, ContextItem]:
    """The record's passages as context items (`[n, locator, text]`; the locator's page
    stands for the title)."""
    return {
        n: ContextItem(n, n, n, "", locator.split("§")[0], 0, len(text), text, "", 0.0)
        for n, locator, text in record["passages"]
    }


def read_sentences(paths: list[Path]) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """(record, sentence) for every CRAG sentence passed or judged against a passage."""
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            if record.get("system") != "crag" or not record.get("support"):
                continue
            for sentence in record["support"]["sentences"]:
                if sentence["passage"] is not None and (
                    sentence["supported"] or sentence["checked_by"] == "llm"
                ):
                    yield record, sentence


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("records", type=Path, nargs="+")
    args = parser.parse_args()
    read = 0
    for record, sentence in read_sentences(args.records):
        context = context_of(record)
        if (item := context.get(sentence["passage"])) is None:
            continue
        read += 1
        claim = claim_text(sentence["text"])
        for name, rule in RULES.items():
            if why := rule(claim, record["question"], item, list(context.values())):
                print(f"{name}\t{record['outcome']}\t{record['question_id']}\t{why}")
                print(f"\t{sentence['text']}")
    print(f"{read} sentences read")


if __name__ == "__main__":
    main()
