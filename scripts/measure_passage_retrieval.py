"""Is the passage that answers a question among its top retrieved passages? (docs/formats.md)

    bash scripts/tables_corpus.sh /tmp/tables-corpus /tmp/tables.db
    python scripts/measure_passage_retrieval.py /tmp/tables.db docs/data/tables-qa.jsonl
    python scripts/formats_folder.py /tmp/formats
    crag-edge ingest --db /tmp/formats.db /tmp/formats/docs
    python scripts/measure_passage_retrieval.py /tmp/formats.db docs/data/formats-qa.jsonl \
        [--depth 10]

Each answerable question of the set names its passage's document (`doc`, the file name as
ingest records its source: a mail attachment's names its message and the attached file) and
words of that passage as ingest reads it (`evidence`: a sentence, or a table row's record
`Column: value; ...`). A question counts as found when a hit among the first `depth` of
`Engine.search` (retrieval only: the embedder, no LLM) is a chunk of that document holding
those words, spaces aside. Before searching, every question is checked against the corpus
as ingested: some chunk of its document holds the evidence, and the evidence holds one
alternative of every `must` group (the answer the scorer looks for is the passage's own);
a question that fails either is listed. Prints each question's rank and the share found,
overall and per kind (the format or generator the passage comes from), and how many rank
first.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from crag_edge.engine import Engine
from crag_edge.evaluation.beir import data_lines
from crag_edge.evaluation.qa import matches
from crag_edge.types import Chunk, Hit


@dataclass(frozen=True)
class PassageQuestion:
    """An answerable question, the document its passage is in, words of that passage and
    what a right answer must hold."""

    question_id: str
    text: str
    document: str
    passage: str
    kind: str
    must: tuple[tuple[str, ...], ...]

    def held_by(self, chunk: Chunk) -> bool:
        """The chunk is of the question's document and holds its passage, spaces aside."""
        text = " ".join(chunk.text.split())
        return Path(chunk.source).name == self.document and self.passage in text


def passage_questions(path: Path) -> list[PassageQuestion]:
    """The set's answerable questions; the others have no passage to find. An answerable
    question without `doc` and `evidence` is a SystemExit naming its line."""
    found: list[PassageQuestion] = []
    for number, line in data_lines(path):
        fields = json.loads(line)
        if not fields["in_corpus"]:
            continue
        if not all(isinstance(fields.get(k), str) for k in ("doc", "evidence")):
            sys.exit(f'{path}:{number}: an answerable question needs "doc" and "evidence"')
        must = tuple(tuple(group) for group in fields["must"])
        passage = " ".join(fields["evidence"].split())
        kind = fields.get("kind", "")
        found.append(
            PassageQuestion(fields["id"], fields["question"], fields["doc"], passage, kind, must)
        )
    return found


def unfounded(questions: Iterable[PassageQuestion], chunks: Iterable[Chunk]) -> list[str]:
    """Why each question that is not answered by the corpus as ingested fails: no chunk of
    its document holds its evidence, or the evidence does not hold its `must`."""
    stored = list(chunks)
    problems = []
    for question in questions:
        if not any(question.held_by(chunk) for chunk in stored):
            problems.append(f"{question.question_id}: no chunk of {question.document} holds it")
        if not matches(question.passage, question.must):
            problems.append(f"{question.question_id}: the evidence does not hold the answer")
    return problems


def passage_rank(question: PassageQuestion, hits: list[Hit]) -> int | None:
    """The 1-based rank of the first hit holding the passage, None when no hit does."""
    for rank, hit in enumerate(hits, start=1):
        if question.held_by(hit.chunk):
            return rank
    return None


@dataclass
class Tally:
    """Ranks found so far, by kind."""

    depth: int
    ranks: dict[str, list[int | None]] = field(default_factory=lambda: defaultdict(list))

    def add(self, question: PassageQuestion, rank: int | None) -> None:
        self.ranks[question.kind].append(rank)
        print(f"{question.question_id:32} {question.kind:10} rank {rank or '-'}")

    def report(self) -> None:
        every = [rank for ranks in self.ranks.values() for rank in ranks]
        found = sum(rank is not None for rank in every)
        first = sum(rank == 1 for rank in every)
        print(f"passage in the top {self.depth}: {found} of {len(every)} "
              f"({100 * found / len(every):.0f} %); ranked first: {first}")  # fmt: skip
        for kind, ranks in sorted(self.ranks.items()):
            print(f"  {kind}: {sum(rank is not None for rank in ranks)} of {len(ranks)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db", type=Path)
    parser.add_argument("questions", type=Path)
    parser.add_argument("--depth", type=int, default=10, help="hits looked at per question")
    args = parser.parse_args()
    questions = passage_questions(args.questions)
    tally = Tally(args.depth)
    with Engine.open(args.db, readonly=True) as engine:
        corpus = engine.corpus
        for problem in unfounded(questions, corpus.get_chunks(corpus.chunk_ids()).values()):
            print(f"not answered by the corpus: {problem}")
        for question in questions:
            tally.add(
                question, passage_rank(question, engine.search(question.text, top_k=args.depth))
            )
    tally.report()


if __name__ == "__main__":
    main()
