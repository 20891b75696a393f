"""Why a corpus file could not be used; every message names the file.

SQLite reports a full disk, an I/O failure, a damaged page or a write lock held too long by
another process as an `apsw` exception from deep inside a query; `storage_faults` turns those
into the store's own errors at the store's boundary, so callers (the CLI's exit codes, the
service's responses) handle one family.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import apsw

_C = TypeVar("_C", bound=type)


class CorpusError(Exception):
    """Base of every store error, so callers can catch corpus problems in one place."""

    def __init__(self, path: Path | str, reason: str) -> None:
        # A database URL (`postgresql://...`) stays text: as a Path it would lose a slash.
        self.path: Path | str = path if "://" in str(path) else Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


class CorpusNotFoundError(CorpusError, FileNotFoundError):
    """The path does not exist and creation was not asked for."""


class CorpusExistsError(CorpusError, FileExistsError):
    """`Corpus.create` refuses to overwrite an existing, non-empty file."""


class NotACorpusError(CorpusError):
    """A readable SQLite database, but not one crag-edge created (left untouched)."""


class CorruptCorpusError(CorpusError):
    """Not a database at all, truncated, or malformed (left untouched)."""


class SchemaTooNewError(CorpusError):
    """Written by a newer crag-edge; opening it here could misread or damage it."""


class EmbedderMismatchError(CorpusError):
    """The corpus vectors came from another embedding model, so they are not comparable."""


class ReadOnlyCorpusError(CorpusError):
    """A write was attempted on a corpus opened with `readonly=True`."""


class CorpusBusyError(CorpusError):
    """Another connection held the file's write lock longer than the busy timeout; nothing
    was written, and the same command succeeds once that writer has finished."""


class CorpusReplacedError(CorpusError):
    """The file at the corpus's path is no longer the one opened (moved, replaced or deleted
    meanwhile); what this connection would write would land in the new file's WAL."""


class StorageError(CorpusError):
    """The disk refused a write (full, over a size limit, failing); committed data is intact."""


_FAULTS = (
    apsw.FullError,
    apsw.IOError,
    apsw.CorruptError,
    apsw.NotADBError,
    apsw.ReadOnlyError,
    apsw.BusyError,
)


def _fault_behind(exc: apsw.Error) -> BaseException | None:
    """The storage fault that caused `exc`, if any. A fault inside a transaction makes
    SQLite roll back on its own, so the rollback that follows fails too ("no such
    savepoint"): the fault is then found in the exception's context."""
    cause: BaseException | None = exc
    while cause is not None and not _is_fault(cause):
        cause = cause.__context__
    return cause


def _is_fault(exc: BaseException) -> bool:
    """One of `_FAULTS`, or a commit refused by the store's commit hook (`Corpus`: the file
    was replaced since it was opened)."""
    return isinstance(exc, _FAULTS) or (
        isinstance(exc, apsw.ConstraintError)
        and getattr(exc, "extendedresult", None) == apsw.SQLITE_CONSTRAINT_COMMITHOOK
    )


def _storage_error(exc: BaseException, path: Path | str) -> CorpusError:
    """The store error for one of SQLite's storage failures."""
    if isinstance(exc, apsw.FullError):
        return StorageError(path, f"disk full; {_INTACT}")
    if isinstance(exc, apsw.IOError):
        return StorageError(path, f"disk I/O error (a full or failing disk?); {_INTACT}")
    if isinstance(exc, apsw.ReadOnlyError):
        return ReadOnlyCorpusError(path, _NO_WRITE_ACCESS)
    if isinstance(exc, apsw.BusyError):
        return CorpusBusyError(path, _LOCKED)
    if isinstance(exc, apsw.ConstraintError):
        return CorpusReplacedError(path, REPLACED)
    return CorruptCorpusError(path, f"damaged database ({exc}); run `crag-edge check --db {path}`")


@contextmanager
def storage_faults(path: Path | str) -> Iterator[None]:
    """Re-raise SQLite's storage failures inside the block as store errors naming `path`."""
    try:
        yield
    except apsw.Error as exc:
        fault = _fault_behind(exc)
        if fault is None:
            raise
        raise _storage_error(fault, path) from None


def reports_storage_faults(cls: _C) -> _C:
    """Wrap every public method of a store class, its own and those it inherits (the ones
    shared with PostgreSQL: `store.base`), in `storage_faults` for its connection's file: no
    SQLite storage failure leaves the store as a raw `apsw` exception."""
    for name in dir(cls):
        member = inspect.getattr_static(cls, name)
        if not name.startswith("_") and inspect.isfunction(member):
            setattr(cls, name, _guarded(member))
    return cls


def _guarded(method: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except apsw.Error:
            with storage_faults(self._conn.filename):  # the file named only when it failed
                raise

    return wrapper


_INTACT = "every change committed before is intact; free space and run the command again"
_LOCKED = (
    "locked: another process (an ingest, `calibrate`, a service, or an open sqlite3 session) "
    "kept writing to it past the wait allowed; every change committed before is intact; "
    "run the command again when it has finished"
)
REPLACED = (
    "the file was moved, replaced or deleted since it was opened; nothing more is written "
    "through this connection: restart (or open the corpus again) to use the new file"
)
_NO_WRITE_ACCESS = "read-only: no write access to the file or its folder"
