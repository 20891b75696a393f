"""The corpus store: one SQLite file per corpus with FTS5 and sqlite-vec indexes
(`store.sqlite`), or a PostgreSQL database with pgvector (`store.postgres`), chosen by
`store.factory`; the modules here hold what both share."""

from crag_edge.store.backend import CorpusBackend, PassageVectorsBackend, ScoreCacheBackend
from crag_edge.store.errors import (
    CorpusBusyError,
    CorpusError,
    CorpusExistsError,
    CorpusNotFoundError,
    CorpusReplacedError,
    CorruptCorpusError,
    EmbedderMismatchError,
    NotACorpusError,
    ReadOnlyCorpusError,
    SchemaTooNewError,
    StorageError,
)
from crag_edge.store.records import ChunkRecord, CorpusStats, DocumentRecord, StoredDocument
from crag_edge.store.sqlite.connection import connect
from crag_edge.store.sqlite.corpus import Corpus
from crag_edge.store.sqlite.passage_vectors import PassageVectors
from crag_edge.store.sqlite.schema import APPLICATION_ID, SCHEMA_VERSION
from crag_edge.store.sqlite.score_cache import ScoreCache

__all__ = [
    "APPLICATION_ID",
    "SCHEMA_VERSION",
    "ChunkRecord",
    "Corpus",
    "CorpusBackend",
    "CorpusBusyError",
    "CorpusError",
    "CorpusExistsError",
    "CorpusNotFoundError",
    "CorpusReplacedError",
    "CorpusStats",
    "CorruptCorpusError",
    "DocumentRecord",
    "EmbedderMismatchError",
    "NotACorpusError",
    "PassageVectors",
    "PassageVectorsBackend",
    "ReadOnlyCorpusError",
    "SchemaTooNewError",
    "ScoreCache",
    "ScoreCacheBackend",
    "StorageError",
    "StoredDocument",
    "connect",
]
