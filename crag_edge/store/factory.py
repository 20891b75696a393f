"""Open a corpus by its location: a `postgresql://` URL is a PostgreSQL corpus
(`store.postgres`, needs the `postgres` extra), anything else a SQLite file (`store.sqlite.corpus`).

Every command, the service and the TUI open corpora here, so `--db corpus.db` and
`--db postgresql://user@host/dbname` (or `CRAG_EDGE_DB_URL`) work alike.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from crag_edge.locations import is_database_url
from crag_edge.store.backend import CorpusBackend
from crag_edge.store.errors import CorpusError
from crag_edge.store.sqlite.corpus import Corpus

if TYPE_CHECKING:
    from crag_edge.store.postgres import PostgresCorpus


def open_corpus(location: Path | str, *, readonly: bool = False) -> CorpusBackend:
    """Open an existing corpus (see `Corpus.open` and `PostgresCorpus.open`)."""
    if is_database_url(location):
        return _postgres().open(str(location), readonly=readonly)
    return Corpus.open(location, readonly=readonly)


def open_or_create_corpus(location: Path | str, embedder_id: str, dim: int) -> CorpusBackend:
    """Open the corpus at `location` if built with this embedder, else create it."""
    if is_database_url(location):
        return _postgres().open_or_create(str(location), embedder_id, dim)
    return Corpus.open_or_create(location, embedder_id, dim)


def _postgres() -> type[PostgresCorpus]:
    """The PostgreSQL backend, imported only when asked for: its driver is an optional extra."""
    try:
        from crag_edge.store.postgres import PostgresCorpus
    except ImportError as exc:
        raise CorpusError(
            "postgresql://",
            f"PostgreSQL support is not installed ({exc.name} missing); "
            "pip install 'crag-edge[postgres]'",
        ) from None
    return PostgresCorpus
