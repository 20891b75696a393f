"""`crag-edge tui`: the command the main CLI registers (textual is imported only when run)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from crag_edge.config import Settings
from crag_edge.locations import parse_location

DEFAULT_DB = Path("demo.db")


def tui(
    ctx: typer.Context,
    db: Annotated[
        Path,
        typer.Option(
            "--db",
            help="Corpus: a database file (created by the ingest screen if absent), or "
            "postgresql://user@host/dbname (default: CRAG_EDGE_DB_URL, else demo.db).",
            parser=parse_location,
        ),
    ] = DEFAULT_DB,
) -> None:
    """Terminal UI: ask questions and watch retrieve, grade, decide, correct and answer."""
    try:
        from crag_edge.tui.app import CragApp
    except ImportError as exc:  # the `tui` extra is not installed
        typer.echo(
            f"error: the terminal UI needs textual ({exc}): pip install 'crag-edge[tui]'", err=True
        )
        raise typer.Exit(1) from None
    settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings.load()
    # The settings screen saves to the --config file given to `crag-edge` (or CRAG_EDGE_CONFIG).
    parent = ctx.parent.params if ctx.parent is not None else {}
    config = parent.get("config") or os.environ.get("CRAG_EDGE_CONFIG")
    CragApp(db=db, settings=settings, config=Path(config) if config else None).run()
