"""The answers an evaluation has made, kept in a JSON Lines file so a long run can be read
while it goes and resumed after a stop (`eval answers`, `eval qa`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeVar

from crag_edge.evaluation.beir import EvalDataError


class Logged(Protocol):
    """A record a log can keep: a dataclass saying which model answered, which question
    (its id and text) and which system."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    @property
    def model(self) -> str: ...

    @property
    def key(self) -> tuple[str, str]:
        """(question id, system)."""
        ...

    @property
    def asked(self) -> str:
        """The question's text, to notice an id whose question changed."""
        ...


R = TypeVar("R", bound=Logged)
T = TypeVar("T")


class RecordLog(Generic[R]):
    """The records made so far, kept in a JSON Lines file when given one: a run that stops
    part-way resumes where it left off. Records of another model are refused (mixing two
    models would measure neither), and so is a question id whose text changed."""

    def __init__(self, path: Path | None, model: str, kind: type[R]) -> None:
        self._path = path
        self._model = model
        self._kind = kind
        self._records: dict[tuple[str, str], R] = {}
        if path is not None and path.exists():
            self._load(path)

    def _load(self, path: Path) -> None:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                record = self._kind(**json.loads(line))
            except (json.JSONDecodeError, TypeError) as exc:
                raise EvalDataError(f"{path}:{number}: not an answer record ({exc})") from None
            if record.model != self._model:
                raise EvalDataError(
                    f"{path}:{number}: answered by {record.model}, not {self._model}; "
                    "use another --records file"
                )
            self._records[record.key] = record

    @property
    def model(self) -> str:
        """The model every record of this log was answered by."""
        return self._model

    def get(self, question_id: str, text: str, system: str) -> R | None:
        """The record of `question_id` by `system`, if made; a stored record of that id
        whose question reads otherwise is an error (its answer is to another question)."""
        record = self._records.get((question_id, system))
        if record is not None and record.asked != text:
            raise EvalDataError(
                f"{self._path}: question {question_id} reads {record.asked!r} there, "
                f"not {text!r}; use another --records file"
            )
        return record

    def add(self, record: R) -> None:
        self._records[record.key] = record
        if self._path is not None:
            with self._path.open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(asdict(record), ensure_ascii=False) + "\n")


def run_logged(
    items: Sequence[T],
    systems: Sequence[str],
    log: RecordLog[R],
    asked: Callable[[T], tuple[str, str]],
    answer: Callable[[T, str], R],
    on_item: Callable[[], None] | None = None,
) -> list[R]:
    """Every item through every system, item by item (so a partial run still compares the
    systems on the same questions); answers already in `log` are reused. `asked` gives an
    item's (id, text), `answer` makes its record by one system."""
    records = []
    for item in items:
        question_id, text = asked(item)
        for system in systems:
            record = log.get(question_id, text, system)
            if record is None:
                record = answer(item, system)
                log.add(record)
            records.append(record)
        if on_item:
            on_item()
    return records
