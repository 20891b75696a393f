"""The question sets `eval qa` is measured with (`docs/data/*-qa.jsonl`) are large enough for
their truthfulness to mean something: at least 20 questions the corpus answers and 20 it
cannot, at least half of those near the corpus's subjects (a far question is easy to refuse,
a near one tempts an answer), unique ids, and every question carrying what its scoring and
its checks read (`kind`; for an answerable one, the `evidence` that says where the answer
is). Each rule is shown failing on a set cut short or stripped of a field."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from crag_edge.evaluation.beir import EvalDataError, data_lines
from crag_edge.evaluation.qa import read_questions

DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
SETS = sorted(DATA.glob("*-qa.jsonl"))
LEAST = 20
"""The fewest answerable, and the fewest off-corpus, questions of a set."""
KINDS_OFF_CORPUS = {"near", "far"}
Rows = list[dict[str, Any]]
Spoil = Callable[[Rows], Rows]


def shape_problems(path: Path) -> list[str]:
    """What keeps the set at `path` from the shape its measurements need; empty when none."""
    try:
        read_questions(path)  # JSON, required fields, `must` groups, unique ids
    except EvalDataError as exc:
        return [str(exc)]
    rows = [json.loads(line) for _, line in data_lines(path)]
    answerable = [row for row in rows if row["in_corpus"]]
    off_corpus = [row for row in rows if not row["in_corpus"]]
    near = sum(row.get("kind") == "near" for row in off_corpus)
    problems = [f"{row['id']}: no kind" for row in rows if not row.get("kind")]
    problems += [f"{row['id']}: answerable without evidence" for row in answerable
                 if not str(row.get("evidence", "")).strip()]  # fmt: skip
    problems += [f"{row['id']}: off-corpus kind {row.get('kind')!r} is not near or far"
                 for row in off_corpus if row.get("kind") not in KINDS_OFF_CORPUS]  # fmt: skip
    if len(answerable) < LEAST:
        problems.append(f"{len(answerable)} answerable questions, fewer than {LEAST}")
    if len(off_corpus) < LEAST:
        problems.append(f"{len(off_corpus)} off-corpus questions, fewer than {LEAST}")
    if 2 * near < len(off_corpus):
        problems.append(f"{near} of {len(off_corpus)} off-corpus questions near, under half")
    return problems


def test_the_sets_are_the_measured_corpora() -> None:
    names = {path.name for path in SETS}
    assert {
        "git-doc-qa.jsonl",
        "sqlite-doc-qa.jsonl",
        "formats-qa.jsonl",
        "tables-qa.jsonl",
    } <= names


@pytest.mark.parametrize("path", SETS, ids=lambda path: path.name)
def test_every_question_set_has_the_shape_its_measurements_need(path: Path) -> None:
    assert shape_problems(path) == []


def write_set(path: Path, rows: Rows) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def cut(rows: Rows, answerable: bool) -> Rows:
    """`rows` with one question fewer of the given side than the least a set may hold."""
    side = [row for row in rows if row["in_corpus"] is answerable][: LEAST - 1]
    return side + [row for row in rows if row["in_corpus"] is not answerable]


def far_heavy(rows: Rows) -> Rows:
    """`rows` with near questions dropped until fewer than half the off-corpus are near."""
    near = [row for row in rows if row.get("kind") == "near"]
    far = sum(row.get("kind") == "far" for row in rows)
    return [row for row in rows if row not in near[: len(near) - far + 1]]


def renamed_twice(rows: Rows) -> Rows:
    return [rows[0], {**rows[1], "id": rows[0]["id"]}, *rows[2:]]


def without(key: str, answerable: bool) -> Spoil:
    """`rows` with `key` removed from the first question of the given side."""

    def strip(rows: Rows) -> Rows:
        first = next(i for i, row in enumerate(rows) if row["in_corpus"] is answerable)
        return [
            *rows[:first],
            {k: v for k, v in rows[first].items() if k != key},
            *rows[first + 1 :],
        ]

    return strip


@pytest.mark.parametrize(
    ("spoil", "complaint"),
    [
        (lambda rows: cut(rows, True), "19 answerable questions, fewer than 20"),
        (lambda rows: cut(rows, False), "19 off-corpus questions, fewer than 20"),
        (far_heavy, "off-corpus questions near, under half"),
        (renamed_twice, "is used twice"),
        (without("evidence", True), "answerable without evidence"),
        (without("kind", False), "no kind"),
        (without("must", True), "missing must"),
    ],
)
def test_a_spoiled_set_is_named_for_what_it_lacks(
    tmp_path: Path, spoil: Spoil, complaint: str
) -> None:
    rows = [json.loads(line) for _, line in data_lines(DATA / "formats-qa.jsonl")]
    problems = shape_problems(write_set(tmp_path / "spoiled-qa.jsonl", spoil(rows)))
    assert any(complaint in problem for problem in problems), problems
