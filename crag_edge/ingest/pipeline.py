"""Incremental, idempotent ingest: files or a BEIR corpus into one corpus database.

A document is re-indexed only when its content hash changes; the hash covers the extracted
text, the title, the chunking parameters and the embedder, so changing any of them re-indexes
exactly the documents it affects. Its access groups (`crag_edge.groups`) are not part of it:
an unchanged document ingested with other groups is only retagged, never embedded again. An
ingest without groups keeps each stored document's groups; an ingest by a caller with groups
(a non-admin token) leaves every stored document it cannot see exactly as it is, and reports
it as refused.
Files whose size and mtime match the stored ones are not even re-read (like make or rsync),
provided the stored text still hashes to the stored hash; so a corpus keeps the text its
documents were read into until they change, even after the loaders learn to read a format
better. `reread=True` reads every file again: a document whose new reading differs is
indexed anew (its access groups kept), one that reads the same is left as it is. A mail
file's attachments are documents of their own (`crag_edge.attached`) that go with it:
unchanged, retagged and pruned with it. A new one gets the mail file's groups; a new mail
file those of the gone tagged documents any of its parts has the text of (`ingest.moves`),
so an attachment keeps its groups through a rename, a move or a prune of its mail file even
when the body was edited, and the text of a gone attachment is refused to a caller who may
not see it, as a file's is.
Each part (the body, each attachment) is indexed or fails on its own.

Chunks from several documents are embedded together for throughput, then those documents are
written in one transaction: an interruption at any point leaves each document either fully
in its old state or fully in its new one, and a rerun picks up where the last one stopped.

Pruning (`prune=True`) is scoped to what this run was asked to look at: documents stored
under an input folder (or an input file itself) that this run did not find are deleted; so
are those reached earlier through a path in that scope other than their own (a file named
through a link, a folder named through a link) when that path no longer leads to them; for
BEIR inputs, every `beir:` document not in the given corpus file(s). An input that is missing
(a typo, an unmounted share), a folder that could not be read completely, or a BEIR file that
could not be read never causes a deletion.

BEIR corpora are read from `.jsonl` files named as inputs, from `corpus.jsonl` files found in
folders, or from every input with `fmt="beir"` (a folder then means its `corpus.jsonl`).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from tokenizers import Tokenizer

from crag_edge.attached import file_of, is_container, posing_as_attached
from crag_edge.citations import places_within
from crag_edge.config import IngestSettings
from crag_edge.grading import injection
from crag_edge.groups import CorpusView, FolderGroups, Groups, Tagging
from crag_edge.ingest.chunker import Chunker
from crag_edge.ingest.embed_ahead import EmbedAhead
from crag_edge.ingest.exclude import is_excluded
from crag_edge.ingest.files import NotAFileError, canonical, open_source, within
from crag_edge.ingest.formats import is_supported, load_file, unsupported
from crag_edge.ingest.formats.pdf import DEFAULT_OCR, OcrLimits
from crag_edge.ingest.loaders import (
    LoadedDocument,
    LoadError,
    count_beir_lines,
    iter_beir,
    too_large,
)
from crag_edge.ingest.moves import Departed
from crag_edge.ingest.outline import outline_places
from crag_edge.ingest.passages import encode_missing_passages
from crag_edge.renamed import renamed_names
from crag_edge.store import (
    ChunkRecord,
    CorpusBackend,
    DocumentRecord,
    StorageError,
    StoredDocument,
)
from crag_edge.store.records import META_CHUNK_OVERLAP, META_CHUNK_TOKENS, META_LAST_INGEST
from crag_edge.text_boundary import printable_path
from crag_edge.types import NAVIGATION, Embedder, PassageIndex, Vector, embedding_text

Format = Literal["auto", "beir"]
Status = Literal["added", "updated", "unchanged", "retagged", "error", "encoded", "embedding"]

# Default chunks per `embed` call; documents are committed in groups of about this many.
EMBED_GROUP = 256
# Bump when chunking or the embedded text changes meaning, so every document is re-indexed.
HASH_VERSION = 1
BEIR_PREFIX = "beir:"
# In a folder, only this JSON Lines file is a BEIR corpus (beside it: queries.jsonl, qrels/).
BEIR_CORPUS = "corpus.jsonl"
# Why a stored document another caller's groups hide was not touched; names no group, so the
# report tells the caller nothing about who may read it.
REFUSED = "refused: stored with access groups this caller does not have; left unchanged"


@dataclass(frozen=True)
class ProgressEvent:
    """One document finished: `done` of `total` (files, or lines of BEIR corpora). In the
    `chunks` stage, `done` of `total` chunks of one large document (`source`) embedded, so a
    large file shows progress within it; in the `passages` stage, `done` of `total` chunks
    read by the evaluator (`source` names it). `chunks`: chunks this run has embedded so far,
    so a face can show chunks/s (documents vary too much in size to measure speed by), and
    `expected`: how many it will embed in all, estimated from the bytes of the files read so
    far (exact once every file is read: `_Reading`).
    `chunks`-stage events come from the embedding thread (`ingest.embed_ahead`)."""

    done: int
    total: int
    source: str
    status: Status
    stage: Literal["documents", "chunks", "passages"] = "documents"
    chunks: int = 0
    expected: int = 0


IngestListener = Callable[[ProgressEvent], None]
"""Called with each document, chunk group and passage count of an ingest as it is done."""

__getattr__ = renamed_names(__name__, {"Progress": "IngestListener"}, globals())


@dataclass
class IngestReport:
    """What one ingest run did; `errors`, `skipped` and `warnings` are (source, reason).
    `retagged` documents were unchanged but given other access groups; `excluded` files were
    left out by an exclude glob (`ingest.exclude`)."""

    added: int = 0
    updated: int = 0
    unchanged: int = 0
    retagged: int = 0
    pruned: int = 0
    excluded: int = 0
    chunks_written: int = 0
    passages_encoded: int = 0
    seconds: float = 0.0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)

    @property
    def chunks_per_second(self) -> float:
        return self.chunks_written / self.seconds if self.seconds > 0 else 0.0

    def skipped_by_reason(self) -> dict[str, int]:
        """How many files were skipped for each reason (one per unsupported type)."""
        return dict(Counter(reason for _, reason in self.skipped))

    def nothing_indexed(self) -> str | None:
        """Why nothing is in the corpus for these inputs, when every file was skipped or
        failed (and none was found unchanged); None when something was indexed or there was
        nothing to read."""
        if self.added or self.updated or self.unchanged or self.retagged:
            return None
        if not (self.skipped or self.errors):
            return None
        why = [f"{len(self.skipped)} skipped as unsupported"] if self.skipped else []
        why += [f"{len(self.errors)} could not be read"] if self.errors else []
        return f"nothing was indexed: {' and '.join(why)} (each named above)"


def ingest(
    corpus: CorpusBackend,
    embedder: Embedder,
    tokenizer: Tokenizer,
    inputs: Sequence[Path | str],
    *,
    settings: IngestSettings,
    fmt: Format = "auto",
    prune: bool = False,
    progress: IngestListener | None = None,
    group_chunks: int = EMBED_GROUP,
    passage_index: PassageIndex | None = None,
    roots: Sequence[Path] | None = None,
    groups: frozenset[str] | None = None,
    caller: Groups = None,
    default_groups: FolderGroups | None = None,
    overlap: bool = True,
    exclude: Sequence[str] = (),
    reread: bool = False,
) -> IngestReport:
    """Bring `corpus` up to date with `inputs` (files and folders, or BEIR corpus files).

    `tokenizer` must be the embedder's, so chunk sizes are counted in the tokens it sees.
    Chunks are embedded `group_chunks` at a time, and the documents they complete are
    committed together (each document always in full). With `passage_index`, every chunk
    then gets the evaluator's stored reading (`ingest.passages`). With `roots` (resolved
    folders), every file is opened through them without following links (`ingest.files`).
    With `groups`, every document of the run gets exactly those access groups (empty:
    untagged, visible to everyone); without, a stored document keeps its groups and a new one
    gets those of a gone tagged document with its text (a rename or move: `ingest.moves`),
    else those of the innermost folder of `default_groups` (resolved folders: the watched
    ones) holding the file it was read from, else `caller`'s. `caller` is the ingesting
    caller's groups (None: the owner); a stored document it cannot see is refused, never
    replaced, retagged or pruned (`groups.Tagging`; ValueError if `groups` holds one `caller`
    lacks). Each group is embedded on a worker thread while the next one is read and chunked
    (`ingest.embed_ahead`); `overlap=False` embeds on the calling thread instead. A file
    an `exclude` glob matches is left out (`ingest.exclude`), and pruned if it was stored. With
    `reread`, files are read even when their size and mtime say they are unchanged.
    Per-document problems, documents over `settings.max_document_bytes` included, are
    collected in the report. The corpus is checked before the first write (writing into a
    damaged file spreads the damage); embedder or database failures propagate, leaving every
    document that was written complete, and after a full disk the WAL is merged if it can be.
    """
    if fmt not in ("auto", "beir"):
        raise ValueError(f"unknown input format {fmt!r}; use 'auto' or 'beir'")
    if group_chunks < 1:
        raise ValueError(f"group_chunks must be at least 1, got {group_chunks}")
    tagging = Tagging(caller, groups, default_groups or {})
    _check_before_writing(corpus, embedder)
    started = time.perf_counter()
    plan = _discover([Path(p) for p in inputs], fmt, roots, exclude)
    chunker = Chunker(tokenizer, settings.chunk_tokens, settings.chunk_overlap)
    ocr = OcrLimits(settings.ocr_max_pages, settings.ocr_max_page_inches)
    limits = _Limits(settings.max_document_bytes, roots, ocr)
    total = len(plan.files) + sum(_count_lines(path, limits) for path in plan.beir)
    run = _IngestRun(
        corpus, embedder, chunker, progress, total, group_chunks, limits, tagging, overlap
    )
    run.reading.total_bytes = sum(_size(path) for path in [*plan.files, *plan.beir])
    run.reread = reread
    try:
        _index(run, plan, prune)
    except StorageError:
        corpus.checkpoint()
        raise
    finally:
        run.ahead.close()
    corpus.set_meta(
        {
            META_CHUNK_TOKENS: str(settings.chunk_tokens),
            META_CHUNK_OVERLAP: str(settings.chunk_overlap),
            META_LAST_INGEST: repr(time.time()),
        }
    )
    if passage_index is not None:
        run.report.passages_encoded = _encode_passages(corpus, passage_index, progress, caller)
    run.report.seconds = time.perf_counter() - started
    return run.report


def _encode_passages(
    corpus: CorpusBackend, index: PassageIndex, progress: IngestListener | None, caller: Groups
) -> int:
    """The evaluator's readings of every chunk lacking one (`ingest.passages`). The pass
    covers the whole corpus, so for a caller with groups only the readings of chunks it may
    see are counted, and it hears no progress of it: a count of the others' would tell it
    how much hidden text there is."""
    if caller is not None:
        view = CorpusView.of(caller)
        before = corpus.stats(view=view).stored_passages
        encode_missing_passages(corpus, index)
        return max(0, corpus.stats(view=view).stored_passages - before)

    def on_passages(done: int, count: int) -> None:
        if progress is not None:
            progress(ProgressEvent(done, count, index.encoder.name, "encoded", "passages"))

    return encode_missing_passages(corpus, index, on_passages)


def _check_before_writing(corpus: CorpusBackend, embedder: Embedder) -> None:
    """Refuse before any work: a corpus that cannot be written, another embedder's vectors,
    damaged pages."""
    corpus.require_writable()
    corpus.check_embedder(embedder.model_id, embedder.dim)
    corpus.check()


def _index(run: _IngestRun, plan: _Plan, prune: bool) -> None:
    run.report.excluded = plan.excluded
    run.report.skipped.extend(plan.skipped)
    run.report.errors.extend(plan.errors)
    for path in plan.files:
        run.add_file(path, plan.reached.get(path))
    for path in plan.beir:
        run.add_beir(path)
    run.finish()
    if prune:
        run.prune(plan)


@dataclass
class _Plan:
    """What to read, and the prune scope: only inputs that were found and listed completely
    (a missing input, e.g. an unmounted share, must never look like deleted files)."""

    files: list[Path] = field(default_factory=list)
    beir: list[Path] = field(default_factory=list)
    # file -> the path it was reached by; its own when it was reached by that too
    reached: dict[Path, str] = field(default_factory=dict)
    scope_dirs: list[Path] = field(default_factory=list)
    scope_files: set[str] = field(default_factory=set)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)
    complete: bool = True  # every input found and read: only then may BEIR documents be pruned
    excluded: int = 0  # files an exclude glob left out


@dataclass(frozen=True)
class _Limits:
    """How files are read: the per-document cost cap and the roots files are confined to."""

    max_bytes: int
    roots: Sequence[Path] | None = None
    ocr: OcrLimits = DEFAULT_OCR


def _discover(
    inputs: list[Path], fmt: Format, roots: Sequence[Path] | None, exclude: Sequence[str]
) -> _Plan:
    """Expand folders (skipping hidden entries), leave out what `exclude` matches, dispatch by
    suffix, record the prune scope: each input by its real path and by the path it was named
    by."""
    plan = _Plan()
    found: dict[Path, bool] = {}  # file -> named explicitly (not found by walking a folder)
    for raw in inputs:
        try:
            path = canonical(raw, roots)
        except LoadError as exc:
            plan.errors.append((exc.source, exc.reason))
            plan.complete = False
            continue
        named = path if roots is not None else _as_named(raw)
        if not path.exists():
            plan.errors.append((str(path), "no such file or directory"))
            plan.complete = False
        elif fmt == "beir":
            plan.beir.append(path / BEIR_CORPUS if path.is_dir() else path)
        elif path.is_dir():
            _walk(path, named, plan, found, roots)
        else:
            found[path] = True
            _note_reached(plan, path, named)
            plan.scope_files.update((str(path), str(named)))
    for path, explicit in found.items():
        if is_excluded(path, exclude):
            plan.excluded += 1
        elif (posing := posing_as_attached(str(path))) is not None:
            plan.errors.append((str(path), posing))
        elif path.suffix.lower() == ".jsonl" and (explicit or path.name == BEIR_CORPUS):
            plan.beir.append(path)
        elif path.suffix.lower() == ".jsonl":
            reason = f"in a folder only {BEIR_CORPUS} is read; name this file to ingest it"
            plan.skipped.append((str(path), reason))
        elif is_supported(path):
            plan.files.append(path)
        else:
            plan.skipped.append((str(path), unsupported(path)))
    return plan


def _as_named(raw: Path) -> Path:
    """`raw` made absolute as typed, links unresolved; '..' is kept, since collapsing it
    could name another folder than the one the link led to."""
    return Path.cwd() / raw.expanduser()


def _walk(
    folder: Path,
    named: Path,
    plan: _Plan,
    found: dict[Path, bool],
    roots: Sequence[Path] | None,
) -> None:
    """Add the files under `folder` (named `named` by the caller); an entry that cannot be
    named (a link loop, a file name that is not UTF-8) is an error of its own, a folder that
    cannot be listed is not pruned."""
    walk_errors: list[OSError] = []
    for root, dirs, names in os.walk(folder, onerror=walk_errors.append):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(n for n in names if n[0] != "."):
            entry = Path(root, name)
            try:
                path = within(entry, folder, roots)
            except LoadError as exc:
                plan.errors.append((exc.source, exc.reason))
                continue
            found[path] = False
            _note_reached(plan, path, named / entry.relative_to(folder))
    plan.errors.extend(
        (printable_path(e.filename), f"cannot read folder: {e.strerror}") for e in walk_errors
    )
    if walk_errors:
        plan.complete = False
    else:
        plan.scope_dirs.extend({folder, named})


def _note_reached(plan: _Plan, path: Path, reached: Path) -> None:
    """Remember the path `path` was reached by (a link's, or one under a folder named through
    a link): a later prune of that path's scope removes the document once the path no longer
    leads to it. Reached by its own path too, that one wins: its own folder holds it."""
    if reached == path:
        plan.reached[path] = str(path)
    else:
        plan.reached.setdefault(path, str(reached))


@dataclass
class _Reading:
    """How far reading has got, in bytes of the files to read, and the chunks it has made:
    the chunks the run will embed are those plus as many per byte for the bytes left. Bytes
    rather than files, since one large file can hold more text than all the others."""

    total_bytes: int = 0
    read_bytes: int = 0
    chunked: int = 0

    def expected(self) -> int:
        left = self.total_bytes - self.read_bytes
        if left <= 0 or self.read_bytes <= 0:
            return self.chunked
        return self.chunked + round(left * self.chunked / self.read_bytes)

    def add(self, size: int) -> None:
        self.read_bytes = min(self.read_bytes + size, self.total_bytes)


def _size(path: Path) -> int:
    """A file's size for the progress estimate (0 if it cannot be read: it fails later)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


@dataclass
class _ChunkedDocument:
    """A document read and chunked, waiting for its chunks' vectors before it is written."""

    doc: DocumentRecord
    chunks: list[ChunkRecord]
    status: Status


@dataclass(eq=False)
class _IngestRun:
    """One ingest call's state: the documents waiting to be embedded and the report."""

    corpus: CorpusBackend
    embedder: Embedder
    chunker: Chunker
    progress: IngestListener | None
    total: int
    group_chunks: int
    limits: _Limits
    tagging: Tagging
    overlap: InitVar[bool]  # embed a group while the next is read (`EmbedAhead`)
    done: int = field(default=0, init=False)
    embedded: int = field(default=0, init=False)  # written by the embedding thread only
    reading: _Reading = field(default_factory=_Reading, init=False)
    report: IngestReport = field(default_factory=IngestReport, init=False)
    # Read even the files whose size and mtime say they are unchanged.
    reread: bool = field(default=False, init=False)
    seen: set[str] = field(default_factory=set, init=False)
    # The stored attachments by the file they came in, listed once a run (`_stored_attached`).
    attached_by_file: dict[str, list[str]] | None = field(default=None, init=False)
    beir_complete: bool = field(default=True, init=False)
    pending: list[_ChunkedDocument] = field(default_factory=list, init=False)
    pending_chunks: int = field(default=0, init=False)

    def __post_init__(self, overlap: bool) -> None:
        self.departed = Departed(self.corpus)
        self.ahead = EmbedAhead(self._embed_group, overlap=overlap)
        self.hash_key = json.dumps(
            {
                "version": HASH_VERSION,
                "embedder": self.embedder.model_id,
                "chunk_tokens": self.chunker.chunk_tokens,
                "chunk_overlap": self.chunker.overlap,
            },
            sort_keys=True,
        )

    def add_file(self, path: Path, reached: str | None = None) -> None:
        """Index the file at `path` (its real path), `reached` by that path or another."""
        self.reading.add(_size(path))
        source = str(path)
        self.seen.add(source)
        stored = self.corpus.document(source)
        if stored is not None and not self.tagging.may_change(stored.groups):
            self._fail(source, REFUSED)
            return
        try:
            loaded = self._load(path, stored)
        except LoadError as exc:
            if isinstance(exc, NotAFileError):  # not the file that was indexed: prune it
                self.seen.discard(source)
            self._fail(source, exc.reason)
            return
        if loaded is not None:
            doc, other = loaded[0], None if reached == source else reached
            shared = self._file_tags(doc, stored, path) if doc.attached else None
            self._add(*loaded, origin=path, reached=other, shared=shared)
            if shared is not None:
                self._add_attached(doc.attached, shared, path)
        elif stored is not None:  # `_load` reads nothing only for a stored, unchanged file
            self._keep(stored)
            if is_container(path):
                self._keep_attached(source)

    def _file_tags(
        self, doc: LoadedDocument, stored: StoredDocument | None, origin: Path
    ) -> frozenset[str]:
        """The groups of the new parts of a file that carries others (a mail file and its
        attachments) without groups of their own: the stored file's; for a new file, those
        of every gone tagged document whose text one of its parts has (this caller may take
        in), so an edited, renamed mail is still known by its attachments."""
        if stored is not None:
            return self.tagging.tags_for(stored.groups)
        parts = (doc, *(item for item in doc.attached if isinstance(item, LoadedDocument)))
        moved = [
            groups
            for part in parts
            for groups in self.departed.groups_of(part.text)
            if self.tagging.may_change(groups)
        ]
        union = frozenset().union(*moved) if moved else None
        return self.tagging.tags_for(None, moved=union, origin=origin)

    def _add_attached(
        self, items: tuple[LoadedDocument | LoadError, ...], shared: frozenset[str], origin: Path
    ) -> None:
        """The documents the file `origin` carries (its attachments), or their errors: each
        is indexed as a file is, a new one given the `shared` groups of the file it came in
        unless its text is a gone tagged document's."""
        self.total += len(items)
        for item in items:
            self.seen.add(item.source)
            stored = None if isinstance(item, LoadError) else self.corpus.document(item.source)
            if isinstance(item, LoadError):
                self._fail(item.source, item.reason)
            elif stored is not None and not self.tagging.may_change(stored.groups):
                self._fail(item.source, REFUSED)
            else:
                self._add(item, stored, None, None, origin=origin, shared=shared)

    def _keep_attached(self, file: str) -> None:
        """The stored attachments of an unchanged mail file: unchanged, each with its groups
        (retagged only by an ingest given groups, and only those this caller may change)."""
        sources = self._stored_attached().get(file, [])
        self.total += len(sources)
        for source in sources:
            self.seen.add(source)
            if (stored := self.corpus.document(source)) is None:
                continue
            if self.tagging.may_change(stored.groups):
                self._keep(stored)
            else:
                self._fail(source, REFUSED)

    def _stored_attached(self) -> dict[str, list[str]]:
        """The stored attachments, by the file they came in; listed once a run, at its first
        unchanged mail file (an unchanged file is not read, so it cannot name them)."""
        if self.attached_by_file is None:
            self.attached_by_file = defaultdict(list)
            for source in self.corpus.list_sources():
                if (file := file_of(source)) != source:
                    self.attached_by_file[file].append(source)
        return self.attached_by_file

    def _load(
        self, path: Path, stored: StoredDocument | None
    ) -> tuple[LoadedDocument, StoredDocument | None, int, float] | None:
        """The file's document, or None when its size and mtime say it is unchanged."""
        try:
            with open_source(path, self.limits.roots) as file:
                unchanged = stored is not None and self._same_file(stored, file.size, file.mtime)
                if unchanged and not self.reread:
                    return None
                raw = file.read_capped(self.limits.max_bytes)
        except OSError as exc:  # the read itself failed (a disk or network error)
            raise LoadError(str(path), exc.strerror or str(exc)) from None
        try:
            loaded = load_file(path, raw, self.limits.max_bytes, self.limits.ocr)
            return loaded, stored, file.size, file.mtime
        except LoadError:
            raise
        except Exception as exc:  # a loader bug on one odd file must not abort the batch
            raise LoadError(str(path), f"unexpected {type(exc).__name__}: {exc}") from None

    def add_beir(self, path: Path) -> None:
        """Index each record of a BEIR corpus file; reading is counted record by record (by
        the size of its text), so a large file's estimate grows as it is read."""
        end = self.reading.read_bytes + _size(path)
        try:
            with open_source(path, self.limits.roots) as file:
                for item in iter_beir(path, file.file, self.limits.max_bytes):
                    if isinstance(item, LoadedDocument):
                        self.reading.add(len(item.text))
                    self._add_beir_item(item, path)
        except (LoadError, OSError) as exc:
            self.beir_complete = False
            reason = exc.reason if isinstance(exc, LoadError) else exc.strerror or str(exc)
            self._fail(str(path), reason)
        self.reading.read_bytes = min(end, self.reading.total_bytes)

    def _add_beir_item(self, item: LoadedDocument | LoadError, path: Path) -> None:
        if isinstance(item, LoadError):
            self._fail(item.source, item.reason)
        elif item.source in self.seen:
            self._fail(item.source, f"duplicate _id in {path}; the first one was kept")
        else:
            self.seen.add(item.source)
            stored = self.corpus.document(item.source)
            if stored is not None and not self.tagging.may_change(stored.groups):
                self._fail(item.source, REFUSED)
            else:
                self._add(item, stored, None, None, origin=path)

    def flush(self) -> None:
        """Start embedding the pending documents; write the group embedded before them."""
        if not self.pending:
            return
        batch, self.pending, self.pending_chunks = self.pending, [], 0
        if embedded := self.ahead.submit(batch):
            self._write(*embedded)

    def finish(self) -> None:
        """Embed and write everything still pending or in flight."""
        self.flush()
        if embedded := self.ahead.drain():
            self._write(*embedded)

    def _embed_group(self, batch: list[_ChunkedDocument]) -> Vector:
        texts = [embedding_text(p.doc.title, chunk.text) for p in batch for chunk in p.chunks]
        places = [(p.doc.source, i + 1, len(p.chunks)) for p in batch for i in range(len(p.chunks))]
        return self._embed(texts, places)

    def _write(self, batch: list[_ChunkedDocument], vectors: Vector) -> None:
        """Write one embedded group's documents in one transaction, each in full (run again
        whole if the database aborts it to break a deadlock: `run_transaction`)."""

        def replace_all() -> None:
            offset = 0
            for pending in batch:
                count = len(pending.chunks)
                self.corpus.replace_document(
                    pending.doc, pending.chunks, vectors[offset : offset + count]
                )
                offset += count

        self.corpus.run_transaction(replace_all)
        for pending in batch:
            self.report.chunks_written += len(pending.chunks)
            self._finish(pending.doc.source, pending.status)

    def prune(self, plan: _Plan) -> None:
        """Delete the documents of the run's scope it did not find; their groups are stored
        for their text first (`ingest.moves`), so no interruption can lose them. An
        attachment is in scope when the file it came in is, and is kept as it was while that
        file is there but could not be read."""
        prefixes = tuple(f"{d}{os.sep}" for d in plan.scope_dirs)
        complete = plan.complete and self.beir_complete
        reached_by = self.corpus.reached_by()
        unread = {source for source, _ in self.report.errors} & self.seen
        doomed = []
        for source in self.corpus.list_sources():
            file = file_of(source)
            if source in self.seen or file in unread:
                continue
            in_scope = file in plan.scope_files or file.startswith(prefixes)
            if (reached := reached_by.get(file)) is not None:
                in_scope = in_scope or _lost(file, reached, plan.scope_files, prefixes)
            is_beir = source.startswith(BEIR_PREFIX) and bool(plan.beir) and complete
            if (in_scope or is_beir) and (stored := self._prunable(source)) is not None:
                self.departed.remember(stored)
                doomed.append(source)
        self.departed.save()
        self.report.pruned += sum(self.corpus.delete_document(source) for source in doomed)

    def _prunable(self, source: str) -> StoredDocument | None:
        """The stored document, if this run may prune it: the owner prunes anything, another
        caller only documents it can see."""
        stored = self.corpus.document(source)
        if stored is None or not self.tagging.may_change(stored.groups):
            return None
        return stored

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
        *,
        origin: Path,
        reached: str | None = None,
        shared: frozenset[str] | None = None,
    ) -> None:
        """Queue `doc`, read from the file `origin` (reached by the path `reached` when not
        its own), for embedding, unless it is unchanged or this caller may not take it in.
        `shared`: the groups of the file's new parts (`_file_tags`), for a file carrying
        others."""
        text_bytes = len(doc.text.encode("utf-8"))
        if text_bytes > self.limits.max_bytes:
            self._fail(doc.source, "its text has " + too_large(text_bytes, self.limits.max_bytes))
            return
        self.report.warnings.extend((doc.source, warning) for warning in doc.warnings)
        content_hash = self._hash(doc.title, doc.text)
        if stored is not None and stored.content_hash == content_hash:
            if size is not None and mtime is not None:
                self.corpus.update_file_stat(doc.source, size, mtime)
            self._keep(stored)
            return
        tags = self._tags(doc, stored, origin, shared)
        if tags is None:
            self._fail(doc.source, REFUSED)
            return
        spans = self.chunker.split(doc.text)
        if not spans and not doc.warnings:  # the loader's warning already says why
            self.report.warnings.append((doc.source, _no_text(doc, size)))
        record = DocumentRecord(
            doc.source, doc.title, doc.text, content_hash, doc.metadata, size, mtime, tags, reached
        )
        places = outline_places(doc.outline)
        marks = {NAVIGATION: True} if doc.metadata.get(NAVIGATION) is True else {}
        chunks = [
            ChunkRecord(
                s.text,
                s.start,
                s.end,
                s.token_count,
                metadata={**marks, **injection.flag(s.text)},
                places=places_within(places, s.start, s.end),
            )
            for s in spans
        ]
        if flagged := sum(injection.FLAG in chunk.metadata for chunk in chunks):
            self.report.warnings.append((doc.source, injection.flagged_note(flagged)))
        self.pending.append(
            _ChunkedDocument(record, chunks, "added" if stored is None else "updated")
        )
        self.pending_chunks += len(chunks)
        self.reading.chunked += len(chunks)
        if self.pending_chunks >= self.group_chunks:
            self.flush()

    def _tags(
        self,
        doc: LoadedDocument,
        stored: StoredDocument | None,
        origin: Path,
        shared: frozenset[str] | None,
    ) -> frozenset[str] | None:
        """The groups `doc` (read from `origin`) is written with; None when it is the moved
        text of a document this caller may not see (taking it in would hand it that one,
        whether it comes as a file or as an attachment). A new part of a file carrying
        others without moved text of its own gets the file's `shared` groups."""
        if stored is not None:
            return self.tagging.tags_for(stored.groups)
        moved = self.departed.groups_of(doc.text)
        if not all(self.tagging.may_change(tags) for tags in moved):
            return None
        if not moved and shared is not None:
            return shared
        union = frozenset().union(*moved) if moved else None
        return self.tagging.tags_for(None, moved=union, origin=origin)

    def _keep(self, stored: StoredDocument) -> None:
        """An unchanged document: only retagged when this run gives it other groups."""
        tags = self.tagging.tags_for(stored.groups)
        if stored.groups == tags:
            self._finish(stored.source, "unchanged")
        else:
            self.corpus.set_groups(stored.source, tags)
            self._finish(stored.source, "retagged")

    def _embed(self, texts: list[str], places: list[tuple[str, int, int]]) -> Vector:
        """Embed in groups. Within a document of more chunks than a group (a large file),
        each group is reported: `places[i]` is (source, chunk number, chunks) of `texts[i]`."""
        parts = []
        for start in range(0, len(texts), self.group_chunks):
            self.ahead.keep_going()
            parts.append(self.embedder.embed(texts[start : start + self.group_chunks]))
            self.embedded += len(parts[-1])
            source, done, total = places[min(start + self.group_chunks, len(texts)) - 1]
            if self.progress is not None and total > self.group_chunks:
                event = ProgressEvent(
                    done,
                    total,
                    source,
                    "embedding",
                    "chunks",
                    self.embedded,
                    self.reading.expected(),
                )
                self.progress(event)
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
        elif status == "retagged":
            self.report.retagged += 1
        self.done += 1
        if self.progress is not None:
            event = ProgressEvent(
                self.done,
                self.total,
                source,
                status,
                "documents",
                self.embedded,
                self.reading.expected(),
            )
            self.progress(event)


def _lost(source: str, reached: str, scope_files: set[str], prefixes: tuple[str, ...]) -> bool:
    """Whether a document reached through `reached` (a path not its own) was reached from
    within the prune scope, and that path leads to it no more: the link is gone or points
    elsewhere, so no root this run looked at holds it. While the path still leads to it, it
    stays (a file named through a link, which a folder's walk refuses, was the owner's call)."""
    in_scope = reached in scope_files or reached.startswith(prefixes)
    return in_scope and os.path.realpath(reached) != source


def _no_text(doc: LoadedDocument, size: int | None) -> str:
    """Why a document gave no chunks, in the words a user can act on."""
    if size == 0:
        return "empty file"
    return "no text to index"


def _count_lines(path: Path, limits: _Limits) -> int:
    """Items of a BEIR file, for the progress total (0 if it cannot be read)."""
    try:
        with open_source(path, limits.roots) as file:
            return count_beir_lines(file.file, limits.max_bytes)
    except (LoadError, OSError):
        return 0
