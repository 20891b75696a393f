"""The file options of the commands: `--db` (a corpus file, or a PostgreSQL database URL),
and the files a command writes (`writable_output`).

A URL stays text (`crag_edge.locations`). Without `--db`,
the `db_url` setting (`CRAG_EDGE_DB_URL`) names the corpus (`corpus_defaults`); with neither,
the command stops with a usage error (exit 2).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from crag_edge.locations import parse_location
from crag_edge.store.corpus import SQLITE_HEADER


def corpus_defaults(command: Any, url: str) -> dict[str, Any]:
    """A click `default_map` giving `--db` of every command under `command` (a group, at any
    depth) the `db_url` setting (`CRAG_EDGE_DB_URL`, `.env`, `--config`): the top-level
    callback sets it once the settings are loaded, before any command reads its options."""
    defaults: dict[str, Any] = {}
    for name, sub in getattr(command, "commands", {}).items():
        if hasattr(sub, "commands"):
            defaults[name] = corpus_defaults(sub, url)
        elif any(param.name == "db" for param in sub.params):
            defaults[name] = {"db": url}
    return defaults


DbOption = Annotated[
    Path,
    typer.Option(
        "--db",
        help="Corpus: a database file, or postgresql://user@host/dbname "
        "(default: CRAG_EDGE_DB_URL).",
        parser=parse_location,
        show_default=False,
    ),
]

FallbackDbOption = Annotated[
    Path | None,
    typer.Option(
        "--fallback-db",
        help="Second corpus for the `local` fallback: a file or postgresql://...",
        parser=parse_location,
    ),
]


def writable_output(path: Path | None) -> Path | None:
    """A file a command may write: in a folder that exists, not a folder itself, and not a
    SQLite database, which is what a corpus named by mistake (`--out corpus.db`) would be: it
    would be overwritten without a trace. A usage error (exit 2) before any work starts."""
    if path is None:
        return None
    if path.is_dir():
        raise typer.BadParameter(f"{path} is a folder; name a file")
    if not path.parent.is_dir():
        raise typer.BadParameter(f"the folder {path.parent} does not exist")
    if path.is_file():
        with path.open("rb") as existing:
            if existing.read(len(SQLITE_HEADER)) == SQLITE_HEADER:
                raise typer.BadParameter(
                    f"{path} is a SQLite database (a corpus?); writing would destroy it"
                )
    return path
