"""What a corpus holds, for a person (or --json for a program): `documents` lists each
document, `stats` sums the corpus up. Neither loads a model."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from rich.table import Table

from crag_edge.attached import shown_name
from crag_edge.console.errors import friendly_errors
from crag_edge.console.options import DbOption, JsonOption, ViewGroupsOption, view_option
from crag_edge.console.output import out, print_json, say
from crag_edge.console.readable import readable_date, readable_size, readable_time
from crag_edge.ingest.pipeline import BEIR_PREFIX
from crag_edge.store import CorpusStats
from crag_edge.store.factory import open_corpus
from crag_edge.store.records import DocumentEntry
from crag_edge.text_boundary import printable_path

LISTING_HEADER = ("type", "chunks", "groups", "size", "ingested", "source")


@friendly_errors
def documents(db: DbOption, groups: ViewGroupsOption = None, as_json: JsonOption = False) -> None:
    """List the documents of a corpus: source, type, chunks, access groups and when each was
    ingested (no model loads)."""
    view = view_option(groups)
    with open_corpus(db, readonly=True) as corpus:
        entries = corpus.list_documents(view=view)
    if as_json:
        print_json([entry_fields(entry) for entry in entries])
        return
    if not entries:
        say("no documents: ingest some with `crag-edge ingest`")
        return
    rows = [
        (
            kind(entry.source),
            f"{entry.chunks:,}",
            ", ".join(sorted(entry.groups)) or "-",
            readable_size(entry.size),
            readable_date(entry.ingested_at),
            shown_source(entry.source),
        )
        for entry in entries
    ]
    for row in aligned([LISTING_HEADER, *rows]):
        say(row)
    say(f"{len(entries):,} documents, {sum(e.chunks for e in entries):,} chunks")


def aligned(rows: list[tuple[str, ...]]) -> list[str]:
    """Rows as lines of columns padded to their widest cell, the last (the source, the
    longest) unpadded: a long path wraps at the end of its own line, never through a table."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)), row[-1]]
        )
        for row in rows
    ]


def entry_fields(entry: DocumentEntry) -> dict[str, Any]:
    """A listed document as JSON: machine values (bytes, unix seconds), groups sorted."""
    return asdict(entry) | {"type": kind(entry.source), "groups": sorted(entry.groups)}


def shown_source(source: str) -> str:
    """A document's source as typed from here: below the current folder, relative to it."""
    try:
        return printable_path(Path(source).relative_to(Path.cwd()))
    except ValueError:  # elsewhere, or not a path (a BEIR record)
        return printable_path(source)


def kind(source: str) -> str:
    """What a document was read as: its file's suffix (`pdf`, `html`), or `beir` for a record
    of a BEIR corpus; `-` when its name has no suffix."""
    if source.startswith(BEIR_PREFIX):
        return "beir"
    return Path(shown_name(source)).suffix.lower().lstrip(".") or "-"


@friendly_errors
def stats(db: DbOption, groups: ViewGroupsOption = None, as_json: JsonOption = False) -> None:
    """Documents, chunks, size, embedder, chunking, cached scores and stored evaluator readings
    of a corpus (no model loads)."""
    view = view_option(groups)
    with open_corpus(db, readonly=True) as corpus:
        info = corpus.stats(view=view)
    if as_json:
        print_json(asdict(info) | {"path": str(info.path)})
        return
    table = Table(show_header=False, box=None)
    for key, value in stats_rows(info):
        table.add_row(key, value)
    out.print(table)


def stats_rows(info: CorpusStats) -> list[tuple[str, str]]:
    """The stats as a person reads them: counts with separators, a size, local dates."""
    chunking = (
        f"{info.chunk_tokens} tokens, overlap {info.chunk_overlap}"
        if info.chunk_tokens
        else "not yet"
    )
    return [
        ("path", str(info.path)),
        ("documents", f"{info.documents:,}"),
        ("chunks", f"{info.chunks:,}"),
        ("size", readable_size(info.db_bytes)),
        ("embedder", f"{info.embedder_id} ({info.dim} dimensions)"),
        ("chunking", chunking),
        ("created", readable_time(info.created_at)),
        ("last ingest", readable_time(info.last_ingest_at)),
        ("cached scores", f"{info.cached_scores:,}"),
        ("evaluator readings", f"{info.stored_passages:,}"),
        ("schema version", str(info.schema_version)),
    ]
