"""`crag-edge serve`: the HTTP service under uvicorn, and `crag-edge mcp`: the MCP tools over
stdio. Register them on the main Typer app with `app.command()(serve)` and
`app.command("mcp")(mcp)`; `python -m crag_edge.server` runs the service on its own."""

from __future__ import annotations

import errno
import logging
import socket
from pathlib import Path
from typing import Annotated, Literal, NoReturn

import typer

from crag_edge.config import Settings, SettingsError, field_range
from crag_edge.console.options import DbOption
from crag_edge.groups import parse_groups, watched_folders
from crag_edge.server.config import SHUTDOWN_TIMEOUT_S, ServerConfig, ServerConfigError
from crag_edge.server.tokens import TokenError, TokenFile
from crag_edge.store import CorpusError
from crag_edge.store.factory import is_database_url, open_corpus
from crag_edge.text_boundary import printable_path

LogLevel = Literal["debug", "info", "warning", "error"]
WORKERS_MIN, WORKERS_MAX = field_range("server_workers")
WAITING_MIN, WAITING_MAX = field_range("server_max_waiting")


def serve(
    ctx: typer.Context,
    db: DbOption,
    host: Annotated[
        str,
        typer.Option(
            "--host",
            help="Address to listen on. Beyond loopback, CRAG_EDGE_TOKENS_FILE or "
            "CRAG_EDGE_API_TOKEN must be set.",
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
        list[str] | None,
        typer.Option(
            "--watch-root",
            metavar="DIR[=GROUPS]",
            help="Folder kept in sync with the corpus while serving (repeatable): changes are "
            "ingested, deleted files pruned; each sync is an ingest job. DIR=a,b: the access "
            "groups of its new files (DIR=: untagged).",
        ),
    ] = None,
    groups: Annotated[
        str | None,
        typer.Option(
            "--groups",
            help="Access groups of every new file in the --watch-root folders named without "
            "=GROUPS (comma-separated; stored documents, and files renamed or moved, even "
            "from another folder, keep theirs).",
        ),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            "--workers", help="Model calls at once (default 1).", min=WORKERS_MIN, max=WORKERS_MAX
        ),
    ] = None,
    max_waiting: Annotated[
        int | None,
        typer.Option(
            "--max-waiting",
            help="Calls that may wait; beyond: 503 (default 8).",
            min=WAITING_MIN,
            max=WAITING_MAX,
        ),
    ] = None,
    log_level: Annotated[
        LogLevel, typer.Option("--log-level", help="Least severe log lines written.")
    ] = "info",
) -> None:
    """Serve the corpus over HTTP: query, streamed answers, ingest jobs, health and metrics."""
    try:
        watch_groups = _watch_groups(groups, watch_root or [])
        settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings.load()
        overrides = {"server_workers": workers, "server_max_waiting": max_waiting}
        settings = settings.replace(**{k: v for k, v in overrides.items() if v is not None})
        config = ServerConfig.from_settings(
            db,
            settings.server,
            host=host,
            port=port,
            ingest_roots=ingest_root or None,
            watch_roots=[folder for folder, _ in watch_groups],
            watch_groups=[(f, tags) for f, tags in watch_groups if tags is not None],
        )
        config.validate_bind()
        _check_tokens_file(config.tokens_file)
        _check_corpus(db)
    except (ServerConfigError, SettingsError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    _serve_http(config, settings, log_level)


def _watch_groups(
    groups: str | None, watch_roots: list[str]
) -> list[tuple[str, frozenset[str] | None]]:
    """Each `--watch-root DIR[=GROUPS]` with the groups of its new files: its own, else
    `--groups` ('': untagged; only beside a watch root), else None (untagged)."""
    if groups is not None and not watch_roots:
        raise ServerConfigError("--groups names the groups of the --watch-root folders; give one")
    try:
        shared = None if groups is None else parse_groups(groups) if groups.strip() else frozenset()
    except ValueError as exc:
        raise ServerConfigError(f"--groups {exc}") from None
    try:
        return watched_folders(watch_roots, shared)
    except ValueError as exc:
        raise ServerConfigError(f"--watch-root {exc}") from None


def _serve_http(config: ServerConfig, settings: Settings, log_level: LogLevel) -> None:
    """Listen first (exit 1 when the address is taken), then load and serve until stopped."""
    try:
        import uvicorn

        from crag_edge.server.app import create_app
        from crag_edge.server.logs import configure_json_logging
        from crag_edge.server.protocol import http_protocol
    except ImportError as exc:
        _needs_server_extra("the HTTP service", exc)
    try:
        listening = _listening_socket(config.host, config.port)
    except OSError as exc:
        typer.echo(f"error: cannot listen on {config.host}:{config.port}: {_why(exc)}", err=True)
        raise typer.Exit(1) from None
    configure_json_logging(log_level)
    bound_port = listening.getsockname()[1]  # the one the system chose for --port 0
    logging.getLogger("crag_edge.server").info(
        "listening", extra={"url": f"http://{config.host}:{bound_port}", "db": str(config.db)}
    )
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config, settings=settings),
            http=http_protocol(config),
            log_config=None,
            access_log=False,
            server_header=False,
            timeout_graceful_shutdown=int(SHUTDOWN_TIMEOUT_S),
        )
    )
    server.run(sockets=[listening])
    if not server.started:
        raise typer.Exit(1)


def _check_corpus(db: Path | str) -> None:
    """Open the corpus once before listening: a missing file or one that is not a corpus
    stops the start-up (exit 2) instead of leaving a service unready forever."""
    if not is_database_url(db) and not Path(db).is_file():
        shown = printable_path(Path(db))
        raise ServerConfigError(f"no corpus at {shown}: run `crag-edge ingest --db {shown} ...`")
    try:
        with open_corpus(db):
            pass
    except CorpusError as exc:
        raise ServerConfigError(str(exc)) from None


def _check_tokens_file(path: Path | None) -> None:
    """A token file that is missing or not one stops the start-up (exit 2): served anyway,
    every request would be refused."""
    if path is not None:
        try:
            TokenFile(path).check()
        except TokenError as exc:
            raise ServerConfigError(f"tokens_file: {exc}") from None


def _listening_socket(host: str, port: int) -> socket.socket:
    """The socket uvicorn serves on, bound before anything loads: a port in use then ends the
    start-up with one line, not with the model threads torn down mid-load (SIGABRT)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listening = socket.socket(family, socket.SOCK_STREAM)
    try:
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host.strip("[]"), port))
    except OSError:
        listening.close()
        raise
    return listening


def _why(exc: OSError) -> str:
    if exc.errno == errno.EADDRINUSE:
        return "the port is in use (is another server running?); choose another --port"
    if exc.errno == errno.EACCES:
        return "permission denied (ports below 1024 need privileges); choose another --port"
    return str(exc.strerror or exc)


def mcp(
    ctx: typer.Context,
    db: DbOption,
) -> None:
    """Serve the corpus to MCP-speaking assistants over stdio: tools search, ask, answer."""
    settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings.load()
    try:
        from crag_edge.server.mcp import serve_stdio
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
