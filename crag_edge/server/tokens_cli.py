"""`crag-edge tokens add|list|revoke`: the service's named tokens, a typer sub-app mounted by
`crag_edge.cli`. Thin: it parses, calls `server.tokens.TokenFile` and prints.

The file is `--file`, else the `tokens_file` setting (CRAG_EDGE_TOKENS_FILE), the one the
service reads. A new token's secret goes to stdout alone (so `$(crag-edge tokens add ...)`
captures it) and is never shown again; what else there is to say goes to stderr.
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.table import Table

from crag_edge.config import Settings
from crag_edge.console.errors import fail
from crag_edge.console.output import out, tell
from crag_edge.groups import parse_groups
from crag_edge.server.scopes import Scope
from crag_edge.server.tokens import TokenError, TokenFile, TokenInfo, TokenUsageError
from crag_edge.text_boundary import printable_path

tokens_app = typer.Typer(
    help="Named, scoped tokens for the HTTP service (kept as hashes in the tokens_file).",
    no_args_is_help=True,
)
F = TypeVar("F", bound=Callable[..., Any])

FileOption = Annotated[
    Path | None,
    typer.Option(
        "--file", help="Token file (default: the tokens_file setting, CRAG_EDGE_TOKENS_FILE)."
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


def _token_errors(command: F) -> F:
    """A token error as one line: exit 2 for a name the command line refuses, else 1."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except TokenError as exc:
            fail(exc)
            raise typer.Exit(exc.exit_code) from None

    return wrapper  # type: ignore[return-value]


def _token_file(ctx: typer.Context, given: Path | None) -> TokenFile:
    settings: Settings = ctx.obj
    path = given or settings.server.tokens_file
    if path is None:
        raise TokenUsageError("no token file: pass --file PATH or set CRAG_EDGE_TOKENS_FILE")
    return TokenFile(path)


@tokens_app.command("add")
@_token_errors
def tokens_add(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="1-64 of A-Z a-z 0-9 _ . - (unique).")],
    scope: Annotated[
        Scope,
        typer.Option(
            "--scope", help="query < answer < ingest < admin; each includes the ones below it."
        ),
    ],
    groups: Annotated[
        str | None,
        typer.Option("--groups", help="Document groups it may read, comma-separated (g1,g2)."),
    ] = None,
    file: FileOption = None,
    as_json: JsonOption = False,
) -> None:
    """Add a token and print its secret: the only time it is shown (only its hash is kept)."""
    try:
        readable = parse_groups(groups) if groups is not None else frozenset()
    except ValueError as exc:
        raise TokenUsageError(f"--groups: {exc}") from None
    tokens = _token_file(ctx, file)
    secret = tokens.add(name, scope, readable)
    if as_json:
        entry = {"name": name, "scope": scope, "groups": sorted(readable), "token": secret}
        sys.stdout.write(json.dumps(entry) + "\n")
        return
    sys.stdout.write(secret + "\n")
    tell(
        f"token {name!r} ({scope}) added to {printable_path(tokens.path)}; "
        "copy it now: it is not stored and cannot be shown again"
    )


@tokens_app.command("list")
@_token_errors
def tokens_list(ctx: typer.Context, file: FileOption = None, as_json: JsonOption = False) -> None:
    """Every token: name, scope, groups, when it was created and revoked. Never a secret."""
    infos = _token_file(ctx, file).list()
    if as_json:
        sys.stdout.write(json.dumps([_as_dict(info) for info in infos], indent=2) + "\n")
        return
    table = Table("name", "scope", "groups", "created", "revoked")
    for info in infos:
        row = _as_dict(info)
        table.add_row(
            info.name,
            info.scope,
            ",".join(info.groups) or "-",
            row["created"],
            row["revoked"] or "-",
        )
    out.print(table)


@tokens_app.command("revoke")
@_token_errors
def tokens_revoke(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(help="The token's name.")],
    file: FileOption = None,
) -> None:
    """Revoke a token: a running service refuses it from its next request on."""
    if _token_file(ctx, file).revoke(name):
        tell(f"token {name!r} revoked")
    else:
        tell(f"token {name!r} was already revoked")


def _as_dict(info: TokenInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "scope": info.scope,
        "groups": list(info.groups),
        "created": _when(info.created_at),
        "revoked": _when(info.revoked_at) if info.revoked_at is not None else None,
    }


def _when(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))
