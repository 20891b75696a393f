"""Incremental, idempotent ingest: files or a BEIR corpus into one corpus database.

A document is re-indexed only when its content hash changes; the hash covers the extracted
text, the title, the chunking parameters and the embedder, so changing any of them re-indexes
exactly the documents it affects. Files whose size and mtime match the stored ones are not
even re-read (like make or rsync), provided the stored text still hashes to the stored hash.

Chunks from several documents are embedded together for throughput, then those documents are
written in one transaction: an interruption at any point leaves each document either fully
in its old state or fully in its new one, and a rerun picks up where the last one stopped.

Pruning (`prune=True`) is scoped to what this run was asked to look at: documents stored
under an input folder (or an input file itself) that this run did not find are deleted; for
BEIR inputs, every `beir:` document not in the given corpus file(s). A folder that could not
be read completely, or a BEIR file that could not be opened, is never pruned.

BEIR corpora are read from `.jsonl` files named as inputs, from `corpus.jsonl` files found in
folders, or from every input with `fmt="beir"` (a folder then means its `corpus.jsonl`).
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
from tokenizers import Tokenizer

from crag_edge.config import Settings
from crag_edge.ingest.chunker import Chunker, TextSpan
from crag_edge.ingest.loaders import LoadedDocument, Loader, LoadError, iter_beir, loader_for
from crag_edge.ingest.passages import encode_missing_passages
from crag_edge.store import ChunkRecord, Corpus, DocumentRecord, StoredDocument
from crag_edge.store.corpus import META_CHUNK_OVERLAP, META_CHUNK_TOKENS, META_LAST_INGEST
from crag_edge.types import Embedder, PassageIndex, Vector

Format = Literal["auto", "beir"]
Status = Literal["added", "updated", "unchanged", "error", "encoded"]

# Default chunks per `embed` call; documents are committed in groups of about this many.
EMBED_GROUP = 256
# Bump when chunking or the embedded text changes meaning, so every document is re-indexed.
HASH_VERSION = 1
BEIR_PREFIX = "beir:"
# In a folder, only this JSON Lines file is a BEIR corpus (beside it: queries.jsonl, qrels/).
BEIR_CORPUS = "corpus.jsonl"


@dataclass(frozen=True)
class ProgressEvent:
    """One document finished: `done` of `total` (files, or lines of BEIR corpora); in the
    `passages` stage, `done` of `total` chunks read by the evaluator (`source` names it)."""

    done: int
    total: int
    source: str
    status: Status
    stage: Literal["documents", "passages"] = "documents"


Progress = Callable[[ProgressEvent], None]


@dataclass
class IngestReport:
    """What one ingest run did; `errors`, `skipped` and `warnings` are (source, reason)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    pruned: int = 0
    chunks_written: int = 0
    passages_encoded: int = 0
    seconds: float = 0.0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_written / self.seconds if self.seconds > 0 else 0.0


def ingest(
    corpus: Corpus,
    embedder: Embedder,
    tokenizer: Tokenizer,
    inputs: Sequence[Path | str],
    *,
    settings: Settings,
    fmt: Format = "auto",
    prune: bool = False,
    progress: Progress | None = None,
    group_chunks: int = EMBED_GROUP,
    passage_index: PassageIndex | None = None,
) -> IngestReport:
    """Bring `corpus` up to date with `inputs` (files and folders, or BEIR corpus files).

    `tokenizer` must be the embedder's, so chunk sizes are counted in the tokens it sees.
    Chunks are embedded `group_chunks` at a time, and the documents they complete are
    committed together (each document always in full). With `passage_index`, every chunk
    then gets the evaluator's stored reading (`ingest.passages`).
    Per-document problems are collected in the report; embedder or database failures
    propagate, leaving every document that was written complete.
    """
    if fmt not in ("auto", "beir"):
        raise ValueError(f"unknown input format {fmt!r}; use 'auto' or 'beir'")
    if group_chunks < 1:
        raise ValueError(f"group_chunks must be at least 1, got {group_chunks}")
    corpus.check_embedder(embedder.model_id, embedder.dim)
    started = time.perf_counter()
    plan = _discover([Path(p) for p in inputs], fmt)
    chunker = Chunker(tokenizer, settings.chunk_tokens, settings.chunk_overlap)
    total = len(plan.files) + sum(map(_count_lines, plan.beir))
    run = _Run(corpus, embedder, chunker, progress, total, group_chunks)
    run.report.skipped.extend(plan.skipped)
    run.report.errors.extend(plan.errors)
    for path, loader in plan.files:
        run.add_file(path, loader)
    for path in plan.beir:
        run.add_beir(path)
    run.flush()
    if prune:
        run.prune(plan)
    corpus.set_meta(
        {
            META_CHUNK_TOKENS: str(settings.chunk_tokens),
            META_CHUNK_OVERLAP: str(settings.chunk_overlap),
            META_LAST_INGEST: repr(time.time()),
        }
    )
    if passage_index is not None:

        def on_passages(done: int, count: int) -> None:
            if progress is not None:
                name = passage_index.encoder.name
                progress(ProgressEvent(done, count, name, "encoded", "passages"))

        run.report.passages_encoded = encode_missing_passages(corpus, passage_index, on_passages)
    run.report.seconds = time.perf_counter() - started
    return run.report


def embedding_text(title: str, chunk_text: str) -> str:
    """What the embedder sees for a chunk: its document title gives otherwise bare passages
    their context (as in BEIR's title + text convention)."""
    return f"{title}\n{chunk_text}" if title else chunk_text


@dataclass
class _Plan:
    files: list[tuple[Path, Loader]] = field(default_factory=list)
    beir: list[Path] = field(default_factory=list)
    scope_dirs: list[Path] = field(default_factory=list)
    scope_files: set[str] = field(default_factory=set)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)


def _discover(inputs: list[Path], fmt: Format) -> _Plan:
    """Expand folders (skipping hidden entries), dispatch by suffix, record the prune scope."""
    plan = _Plan()
    found: dict[Path, bool] = {}  # file -> named explicitly (not found by walking a folder)
    for raw in inputs:
        path = raw.expanduser().resolve()
        if not path.exists():
            plan.errors.append((str(path), "no such file or directory"))
            plan.scope_files.add(str(path))
            plan.scope_dirs.append(path)
        elif fmt == "beir":
            plan.beir.append(path / BEIR_CORPUS if path.is_dir() else path)
        elif path.is_dir():
            walk_errors: list[OSError] = []
            for root, dirs, names in os.walk(path, onerror=walk_errors.append):
                dirs[:] = sorted(d for d in dirs if not d.startswith("."))
                found.update((Path(root, n).resolve(), False) for n in sorted(names) if n[0] != ".")
            plan.errors.extend(
                (str(e.filename), f"cannot read folder: {e.strerror}") for e in walk_errors
            )
            if not walk_errors:
                plan.scope_dirs.append(path)
        else:
            found[path] = True
            plan.scope_files.add(str(path))
    for path, explicit in found.items():
        if path.suffix.lower() == ".jsonl" and (explicit or path.name == BEIR_CORPUS):
            plan.beir.append(path)
        elif path.suffix.lower() == ".jsonl":
            reason = f"in a folder only {BEIR_CORPUS} is read; name this file to ingest it"
            plan.skipped.append((str(path), reason))
        elif loader := loader_for(path):
            plan.files.append((path, loader))
        else:
            plan.skipped.append((str(path), f"unsupported file type {path.suffix or '(none)'}"))
    return plan


@dataclass
class _Pending:
    doc: DocumentRecord
    chunks: list[ChunkRecord]
    status: Status


class _Run:
    """State of one ingest run: the documents waiting to be embedded and the report."""

    def __init__(
        self,
        corpus: Corpus,
        embedder: Embedder,
        chunker: Chunker,
        progress: Progress | None,
        total: int,
        group_chunks: int,
    ) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.chunker = chunker
        self.progress = progress
        self.total = total
        self.group_chunks = group_chunks
        self.done = 0
        self.report = IngestReport()
        self.seen: set[str] = set()
        self.beir_complete = True
        self.pending: list[_Pending] = []
        self.pending_chunks = 0
        self.hash_key = json.dumps(
            {
                "version": HASH_VERSION,
                "embedder": embedder.model_id,
                "chunk_tokens": chunker.chunk_tokens,
                "chunk_overlap": chunker.overlap,
            },
            sort_keys=True,
        )

    def add_file(self, path: Path, loader: Loader) -> None:
        source = str(path)
        self.seen.add(source)
        stored = self.corpus.document(source)
        try:
            stat = path.stat()
        except OSError as exc:
            self._fail(source, exc.strerror or str(exc))
            return
        if stored is not None and self._same_file(stored, stat.st_size, stat.st_mtime):
            self._finish(source, "unchanged")
            return
        try:
            loaded = loader(path)
        except LoadError as exc:
            self._fail(source, exc.reason)
        except OSError as exc:
            self._fail(source, exc.strerror or str(exc))
        except Exception as exc:  # a loader bug on one odd file must not abort the batch
            self._fail(source, f"unexpected {type(exc).__name__}: {exc}")
        else:
            self._add(loaded, stored, stat.st_size, stat.st_mtime)

    def add_beir(self, path: Path) -> None:
        try:
            for item in iter_beir(path):
                if isinstance(item, LoadError):
                    self._fail(item.source, item.reason)
                elif item.source in self.seen:
                    self._fail(item.source, f"duplicate _id in {path}; the first one was kept")
                else:
                    self.seen.add(item.source)
                    self._add(item, self.corpus.document(item.source), None, None)
        except OSError as exc:
            self.beir_complete = False
            self._fail(str(path), exc.strerror or str(exc))

    def flush(self) -> None:
        """Embed every pending chunk, then write the pending documents in one transaction."""
        if not self.pending:
            return
        texts = [
            embedding_text(p.doc.title, chunk.text) for p in self.pending for chunk in p.chunks
        ]
        vectors = self._embed(texts)
        offset = 0
        with self.corpus.transaction():
            for pending in self.pending:
                count = len(pending.chunks)
                self.corpus.replace_document(
                    pending.doc, pending.chunks, vectors[offset : offset + count]
                )
                offset += count
        batch, self.pending, self.pending_chunks = self.pending, [], 0
        for pending in batch:
            self.report.chunks_written += len(pending.chunks)
            self._finish(pending.doc.source, pending.status)

    def prune(self, plan: _Plan) -> None:
        prefixes = tuple(f"{d}{os.sep}" for d in plan.scope_dirs)
        for source in self.corpus.list_sources():
            if source in self.seen:
                continue
            in_scope = source in plan.scope_files or source.startswith(prefixes)
            is_beir = source.startswith(BEIR_PREFIX) and bool(plan.beir) and self.beir_complete
            if (in_scope or is_beir) and self.corpus.delete_document(source):
                self.report.pruned += 1

    def _same_file(self, stored: StoredDocument, size: int, mtime: float) -> bool:
        """Unchanged without reading the file: same size and mtime, and indexed the same way."""
        return (stored.size, stored.mtime) == (size, mtime) and stored.content_hash == (
            self._hash(stored.title, self.corpus.document_text(stored.id))
        )

    def _add(
        self,
        doc: LoadedDocument,
        stored: StoredDocument | None,
        size: int | None,
        mtime: float | None,
    ) -> None:
        content_hash = self._hash(doc.title, doc.text)
        if stored is not None and stored.content_hash == content_hash:
            if size is not None and mtime is not None:
                self.corpus.update_file_stat(doc.source, size, mtime)
            self._finish(doc.source, "unchanged")
            return
        spans = self.chunker.split(doc.text)
        if not spans:
            self.report.warnings.append((doc.source, "no text to index (scanned PDF?)"))
        record = DocumentRecord(
            doc.source, doc.title, doc.text, content_hash, doc.metadata, size, mtime
        )
        chunks = [
            ChunkRecord(s.text, s.start, s.end, s.token_count, _chunk_metadata(doc.metadata, s))
            for s in spans
        ]
        self.pending.append(_Pending(record, chunks, "added" if stored is None else "updated"))
        self.pending_chunks += len(chunks)
        if self.pending_chunks >= self.group_chunks:
            self.flush()

    def _embed(self, texts: list[str]) -> Vector:
        parts = [
            self.embedder.embed(texts[i : i + self.group_chunks])
            for i in range(0, len(texts), self.group_chunks)
        ]
        if not parts:
            return np.empty((0, self.embedder.dim), dtype=np.float32)
        return np.concatenate(parts).astype(np.float32, copy=False)

    def _hash(self, title: str, text: str) -> str:
        digest = hashlib.sha256()
        for part in (self.hash_key, title, text):
            digest.update(part.encode())
            digest.update(b"\x00")
        return digest.hexdigest()

    def _fail(self, source: str, reason: str) -> None:
        self.report.errors.append((source, reason))
        self._finish(source, "error")

    def _finish(self, source: str, status: Status) -> None:
        if status == "added":
            self.report.added += 1
        elif status == "updated":
            self.report.updated += 1
        elif status == "unchanged":
            self.report.unchanged += 1
        self.done += 1
        if self.progress is not None:
            self.progress(ProgressEvent(self.done, self.total, source, status))


def _chunk_metadata(doc_metadata: dict[str, Any], span: TextSpan) -> dict[str, Any]:
    """PDF chunks record the 1-based pages they span, for citations."""
    starts = doc_metadata.get("page_starts")
    if not starts:
        return {}
    first = bisect.bisect_right(starts, span.start)
    last = bisect.bisect_right(starts, max(span.start, span.end - 1))
    return {"page": first, "page_end": last}


def _count_lines(path: Path) -> int:
    """Non-empty lines of a BEIR file, for the progress total (0 if it cannot be read)."""
    try:
        with path.open("rb") as fh:
            return sum(1 for line in fh if line.strip())
    except OSError:
        return 0
