"""Ingest's last stage: store the evaluator's reading of every chunk that lacks one.

It runs after the documents are written and works from what the corpus lacks, not from what
this run wrote, so it also fills a corpus ingested before the evaluator was installed or
by another version of it, and an interrupted run resumes where it stopped (each group of
passages is committed on its own). Readings of other evaluator versions are deleted first:
nothing would ever read them again.
"""

from __future__ import annotations

from collections.abc import Callable

from crag_edge.store import CorpusBackend
from crag_edge.types import Chunk, EmbeddingReader, EncodedPassage, PassageIndex, reading_text

ENCODE_GROUP = 64  # passages per commit: a cancelled ingest loses at most this much work

PassageProgress = Callable[[int, int], None]


def encode_missing_passages(
    corpus: CorpusBackend,
    index: PassageIndex,
    progress: PassageProgress | None = None,
    *,
    group: int = ENCODE_GROUP,
) -> int:
    """Encode and store every chunk without a reading by `index`; returns how many.
    `progress(done, total)` hears each committed group."""
    stored = corpus.passage_vectors()
    stored.drop_others(index.scorer_key)
    missing = stored.missing(index.scorer_key)
    for start in range(0, len(missing), group):
        chunks = corpus.get_chunks(missing[start : start + group])
        ids = sorted(chunks)
        encoded = _readings(corpus, index, [chunks[i] for i in ids])
        stored.put(index.scorer_key, dict(zip(ids, encoded, strict=True)), wait=True)
        if progress is not None:
            progress(min(start + group, len(missing)), len(missing))
    return len(missing)


def _readings(
    corpus: CorpusBackend, index: PassageIndex, chunks: list[Chunk]
) -> list[EncodedPassage]:
    """The evaluator's readings of `chunks`: copied from their embeddings when it reads
    passages with this corpus's embedder, else computed."""
    encoder = index.encoder
    texts = [reading_text(encoder, c) for c in chunks]
    if isinstance(encoder, EmbeddingReader) and encoder.passage_reader == corpus.embedder_id:
        return encoder.readings_of(texts, corpus.get_vectors([c.chunk_id for c in chunks]))
    return encoder.encode_passages(texts)
