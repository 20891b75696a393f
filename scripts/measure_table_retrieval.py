"""Is the table row that answers a question among its top retrieved passages? (docs/formats.md)

    bash scripts/tables_corpus.sh /tmp/tables-corpus /tmp/tables.db
    python scripts/measure_table_retrieval.py /tmp/tables.db docs/data/tables-qa.jsonl [--depth 10]

Each answerable question of the set names its row's document (`doc`) and words of the row
as ingest reads it (`evidence`, a record's `Column: value; ...`). A question counts as found
when a hit among the first `depth` of `Engine.search` (retrieval only: the embedder, no LLM)
is a chunk of that document holding those words, spaces aside. Prints each question's rank
and the share found, overall and per kind (the generator or format the row comes from).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from crag_edge.engine import Engine
from crag_edge.types import Hit


@dataclass(frozen=True)
class RowQuestion:
    """An answerable question, the file its row is in and words of that row."""

    question_id: str
    text: str
    document: str
    row: str
    kind: str


def row_questions(path: Path) -> list[RowQuestion]:
    """The set's answerable questions; the others have no row to find."""
    found: list[RowQuestion] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        fields = json.loads(line)
        if fields["in_corpus"]:
            row = " ".join(fields["evidence"].split())
            kind = fields.get("kind", "")
            found.append(RowQuestion(fields["id"], fields["question"], fields["doc"], row, kind))
    return found


def row_rank(question: RowQuestion, hits: list[Hit]) -> int | None:
    """The 1-based rank of the first hit holding the row, None when no hit does."""
    for rank, hit in enumerate(hits, start=1):
        text = " ".join(hit.chunk.text.split())
        if Path(hit.chunk.source).name == question.document and question.row in text:
            return rank
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("questions", type=Path)
    parser.add_argument("--depth", type=int, default=10, help="hits looked at per question")
    args = parser.parse_args()
    questions = row_questions(args.questions)
    by_kind: dict[str, list[bool]] = defaultdict(list)
    with Engine.open(args.db) as engine:
        for question in questions:
            rank = row_rank(question, engine.search(question.text, top_k=args.depth))
            by_kind[question.kind].append(rank is not None)
            print(f"{question.question_id:32} {question.kind:10} rank {rank or '-'}")
    found = sum(sum(marks) for marks in by_kind.values())
    print(f"row in the top {args.depth}: {found} of {len(questions)} "
          f"({100 * found / len(questions):.0f} %)")  # fmt: skip
    for kind, marks in sorted(by_kind.items()):
        print(f"  {kind}: {sum(marks)} of {len(marks)}")


if __name__ == "__main__":
    main()
