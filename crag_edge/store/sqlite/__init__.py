"""A corpus in one SQLite file with FTS5 and sqlite-vec (`--db corpus.db`, the default)."""

from crag_edge.store.sqlite.corpus import Corpus

__all__ = ["Corpus"]
