"""`crag-edge serve`: the HTTP service under uvicorn, and `crag-edge mcp`: the MCP tools over
stdio. Register them on the main Typer app with `app.command()(serve)` and
`app.command("mcp")(mcp)`; `python -m crag_edge.server` runs the service on its own."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from crag_edge.config import Settings, SettingsError
from crag_edge.server.config import ServerConfig, ServerConfigError


def serve(
    ctx: typer.Context,
    db: Annotated[Path, typer.Option("--db", help="Corpus database file to serve.")],
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on. Beyond loopback, CRAG_EDGE_API_TOKEN must be set.",
        ),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port.")] = 8080,
    ingest_root: Annotated[
        list[Path] | None,
        typer.Option(
            "--ingest-root",
            help="Folder whose files POST /v1/ingest may read (repeatable); none: disabled.",
        ),
    ] = None,
    watch_root: Annotated[
        list[Path] | None,
        typer.Option(
            "--watch-root",
            help="Folder kept in sync with the corpus while serving (repeatable): changes are "
            "ingested, deleted files pruned; each sync is an ingest job.",
        ),
    ] = None,
    workers: Annotated[
        int | None, typer.Option("--workers", help="Model calls at once (default 1).")
    ] = None,
    max_waiting: Annotated[
        int | None,
        typer.Option("--max-waiting", help="Calls that may wait; beyond: 503 (default 8)."),
    ] = None,
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning.")] = "info",
) -> None:
    """Serve the corpus over HTTP: query, streamed answers, ingest jobs, health and metrics."""
    try:
        settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings.load()
        config = ServerConfig.from_settings(
            db,
            settings,
            host=host,
            port=port,
            ingest_roots=ingest_root or None,
            watch_roots=watch_root or None,
            workers=workers,
            max_waiting=max_waiting,
        )
        config.validate_bind()
        if not db.is_file():
            raise ServerConfigError(f"no corpus at {db}: run `crag-edge ingest --db {db} ...`")
    except (ServerConfigError, SettingsError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    try:
        import uvicorn

        from crag_edge.server.app import create_app
        from crag_edge.server.logs import configure_json_logging
    except ImportError as exc:
        _needs_server_extra("the HTTP service", exc)
    configure_json_logging(log_level)
    app = create_app(config, settings=settings)
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        log_config=None,
        access_log=False,
        server_header=False,
        timeout_graceful_shutdown=int(config.shutdown_timeout_s),
    )


def mcp(
    ctx: typer.Context,
    db: Annotated[Path, typer.Option("--db", help="Corpus database file to serve.")],
) -> None:
    """Serve the corpus to MCP-speaking assistants over stdio: tools search, ask, answer."""
    settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings.load()
    try:
        from crag_edge.mcp_server import serve_stdio
    except ImportError as exc:
        _needs_server_extra("the MCP server", exc)
    serve_stdio(db, settings)


def _needs_server_extra(what: str, exc: ImportError) -> NoReturn:
    typer.echo(
        f"error: {what} needs the server extra ({exc.name} is missing): "
        "pip install 'crag-edge[server]'",
        err=True,
    )
    raise typer.Exit(2) from None


def main() -> None:
    app = typer.Typer(add_completion=False)
    app.command()(serve)
    app()
