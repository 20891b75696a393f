"""How the two backends' SQL differs, so that a statement both run is written once.

The store's shared statements (meta, documents, chunks by id, access groups, ingest jobs) are
written with `?` for a parameter, `NOW` for the database clock in Unix seconds and `ANY_OF`
for "is one of the values of a list parameter"; `Dialect.sql` writes them for one backend, and
`Dialect.as_list` passes that list parameter as its driver takes it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol


class Executes(Protocol):
    """A connection of either driver: `execute(sql, params)`, whose result has `fetchall()`."""

    def execute(self, sql: Any, params: Any = ...) -> Any: ...


Connect = Callable[[], AbstractContextManager[Executes]]


@dataclass(frozen=True)
class Dialect:
    """A backend's parameter mark, clock, list membership and list parameter."""

    mark: str
    now: str
    any_of: str  # written with `?` for the list parameter
    as_list: Callable[[Sequence[Any]], Any]

    def sql(self, text: str) -> str:
        """`text` as this backend writes it (the statements hold no literal `?` or `%`)."""
        written = text.replace("ANY_OF", self.any_of).replace("NOW", self.now)
        return written.replace("?", self.mark)


SQLITE = Dialect(
    "?",
    "((julianday('now') - 2440587.5) * 86400.0)",
    "IN (SELECT value FROM json_each(?))",
    lambda values: json.dumps(list(values)),
)
POSTGRES = Dialect(
    "%s", "extract(epoch FROM clock_timestamp())::double precision", "= ANY(?)", list
)
