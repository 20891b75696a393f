"""Copy a corpus into another backend without embedding anything again (docs/scale-out.md).

Moves an existing SQLite corpus into PostgreSQL (or back): every document with its text,
metadata, access groups and file stat, its chunks with their places, and their vectors, one
document per transaction. The target gets the source's embedder and chunking meta, so ingest
into it stays incremental: an unchanged file is still recognised by its content hash. Cached
scores and passage readings are not copied; they are rebuilt as the target is used.

    python scripts/copy_corpus.py corpus.db postgresql://crag@db-host/corpus
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict

from crag_edge.store import ChunkRecord, CorpusBackend, DocumentRecord
from crag_edge.store.factory import open_corpus, open_or_create_corpus
from crag_edge.store.records import META_CHUNK_OVERLAP, META_CHUNK_TOKENS, META_LAST_INGEST
from crag_edge.types import Chunk

BATCH = 1000  # chunks read at once


def copy_document(
    source: CorpusBackend, target: CorpusBackend, name: str, chunks: list[Chunk]
) -> int:
    """One document into `target`, whole; returns its number of chunks."""
    stored = source.document(name)
    assert stored is not None
    chunks.sort(key=lambda chunk: chunk.ordinal)
    doc = DocumentRecord(
        stored.source,
        stored.title,
        source.document_text(stored.id),
        stored.content_hash,
        stored.metadata,
        stored.size,
        stored.mtime,
        stored.groups,
    )
    records = [
        ChunkRecord(c.text, c.start, c.end, c.token_count, c.metadata, c.places) for c in chunks
    ]
    target.replace_document(doc, records, source.get_vectors([c.chunk_id for c in chunks]))
    return len(records)


def copy(source: CorpusBackend, target: CorpusBackend) -> tuple[int, int]:
    """Every document of `source` into `target`; returns (documents, chunks) copied."""
    ids = source.chunk_ids()
    by_source: dict[str, list[Chunk]] = defaultdict(list)
    for start in range(0, len(ids), BATCH):
        for chunk in source.get_chunks(ids[start : start + BATCH]).values():
            by_source[chunk.source].append(chunk)
    names = source.list_sources()
    chunks = sum(copy_document(source, target, name, by_source[name]) for name in names)
    kept = (META_CHUNK_TOKENS, META_CHUNK_OVERLAP, META_LAST_INGEST)
    target.set_meta({key: value for key, value in source.meta().items() if key in kept})
    return len(names), chunks


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source", help="corpus file or postgresql:// URL to read")
    parser.add_argument("target", help="corpus file or postgresql:// URL to write (created)")
    args = parser.parse_args()
    source = open_corpus(args.source, readonly=True)
    with source, open_or_create_corpus(args.target, source.embedder_id, source.dim) as target:
        documents, chunks = copy(source, target)
    print(f"copied {documents} documents, {chunks} chunks into {target.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
