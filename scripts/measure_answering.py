"""The "answers that answer" rule (`answer.answering`) on sentences read by hand: which stated
sentences it would remove, and which answers it would turn into the insufficient-evidence
reply.

Each labelled sentence (`docs/data/support-labels.jsonl`) is read against its question
(`docs/data/*-qa.jsonl`); the sentences of one question, in the order of the labels, stand for
its answer, and the passage a sentence cites stands for the one that states it (none: its own).
The support check is taken to pass exactly the sentences read as stated (the best it could
do), or with `--all` every sentence (what the rule removes on its own). Cosines are the
embedder's (all-MiniLM-L6-v2, `--embedder`, the corpus's own); without one, the terms decide.

    python scripts/measure_answering.py --labels docs/data/support-labels.jsonl \
        --questions docs/data/git-doc-qa.jsonl docs/data/sqlite-doc-qa.jsonl \
        docs/data/formats-qa.jsonl --embedder models/all-minilm-l6-v2 [--similar 0.55] [--all]
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from crag_edge.answer import answering
from crag_edge.answer.support import cited_numbers
from crag_edge.models.embedder import OnnxEmbedder

# The question → how near a claim is to it (`answering.Similarity`).
Cosine = Callable[[str], answering.Similarity]


def answers(labels: Path, questions: list[Path]) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """The labelled sentences of each (set, question id), with the question's row as `q`."""
    asked = {}
    for path in questions:
        name = path.name.removesuffix("-qa.jsonl")
        for line in path.open(encoding="utf-8"):
            row = json.loads(line)
            asked[(name, row["id"])] = row
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for line in labels.open(encoding="utf-8"):
        row = json.loads(line)
        if "passage" in row:  # an item checked against its own passage
            continue
        key = (row["set"], row["question_id"])
        grouped[key].append(row | {"q": asked[key]})
    return grouped


def shown(question: str, rows: list[dict[str, Any]], every: bool, cosine: Cosine) -> list[bool]:
    """Whether the rule shows each sentence the check passed, the answer read whole."""
    passed = [every or row["stated"] for row in rows]
    reads = []
    for i, (row, ok) in enumerate(zip(rows, passed, strict=True)):
        if ok:
            sentence = row["sentence"]
            read = answering.read_against(question, sentence, cosine(question))
            reads.append((read, sentence, (cited_numbers(sentence) or (-1 - i,))[0]))
    decided = iter(answering.Answering(question).finally_decide(reads, shown_before=False))
    return [next(decided) if ok else False for ok in passed]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=Path, required=True)
    parser.add_argument("--questions", type=Path, nargs="+", required=True)
    parser.add_argument("--embedder", type=Path, help="the all-MiniLM-L6-v2 folder")
    parser.add_argument("--similar", type=float, default=answering.SIMILAR)
    parser.add_argument("--all", action="store_true", help="every sentence passes the check")
    args = parser.parse_args()
    answering.SIMILAR = args.similar
    cosine: Cosine = _cosines(args.embedder) if args.embedder else lambda question: None
    counts: dict[str, int] = defaultdict(int)
    for rows in answers(args.labels, args.questions).values():
        question = rows[0]["q"]["question"]
        kept = shown(question, rows, args.all, cosine)
        kind = "answerable" if rows[0]["q"]["in_corpus"] else "off-corpus"
        counts[f"{kind} answers"] += 1
        counts[f"{kind} answers with nothing shown"] += not any(kept)
        stated = any(row["stated"] for row in rows)
        counts[f"{kind} answers with a stated sentence and nothing shown"] += stated and not any(
            kept
        )
        for row, show in zip(rows, kept, strict=True):
            label = "stated" if row["stated"] else "unstated"
            counts[f"{label} sentences"] += 1
            counts[f"{label} sentences shown"] += show
            if not show and (row["stated"] or args.all):
                print(f"removed ({label}): {question} || {row['sentence']}")
    for key, value in sorted(counts.items()):
        print(f"{key}: {value}")


def _cosines(folder: Path) -> Cosine:
    embedder = OnnxEmbedder(folder / "model.int8.onnx", folder / "tokenizer.json", folder.name)

    def cosine(question: str) -> answering.Similarity:
        def similarity(claim: str) -> float:
            first, second = embedder.embed([question, claim])
            return float(first @ second)

        return similarity

    return cosine


if __name__ == "__main__":
    main()
