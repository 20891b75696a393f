"""A corpus in PostgreSQL with pgvector (`--db postgresql://...`); docs/scale-out.md."""

from crag_edge.store.postgres.corpus import PostgresCorpus

__all__ = ["PostgresCorpus"]
