"""Why a corpus file could not be used; every message names the file."""

from __future__ import annotations

from pathlib import Path


class CorpusError(Exception):
    """Base of every store error, so callers can catch corpus problems in one place."""

    def __init__(self, path: Path | str, reason: str) -> None:
        self.path = Path(path)
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
