"""The options every crag-edge command line shares: `--db` (a corpus file, or a PostgreSQL
database URL), `--json`, `--mode`, `--top-k`, `--groups`, the question, and the files a
command writes (`writable_output`); and the commands that ask one question
(`question_command`), declared once.

A URL stays text (`crag_edge.locations`). Without `--db`, the `db_url` setting
(`CRAG_EDGE_DB_URL`) names the corpus (`corpus_defaults`); with neither, the command stops
with a usage error (exit 2).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from crag_edge.config import Settings, field_range
from crag_edge.console.errors import friendly_errors
from crag_edge.engine import Engine
from crag_edge.evaluation.choices import parse_choices
from crag_edge.groups import CorpusView, parse_groups
from crag_edge.locations import parse_location
from crag_edge.retrieval import MODES, Mode
from crag_edge.store.sqlite.corpus import SQLITE_HEADER
from crag_edge.text_boundary import QuestionError, asked_question


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


JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ModeOption = Annotated[
    Mode | None,
    typer.Option(
        "--mode",
        help=f"Retrieval mode: {', '.join(MODES)} (default: setting retrieval_mode).",
    ),
]
TOP_K_MIN, TOP_K_MAX = field_range("top_k")
TopKOption = Annotated[
    int | None,
    typer.Option(
        "--top-k",
        help="Hits per retrieval (default: setting top_k).",
        min=TOP_K_MIN,
        max=TOP_K_MAX,
    ),
]


def _asked(question: str) -> str:
    """The question as the engine takes it; one with nothing to search for is a usage error,
    as the HTTP service and the MCP tools treat it."""
    try:
        return asked_question(question)
    except QuestionError as exc:
        raise typer.BadParameter(str(exc), param_hint="QUESTION") from None


QuestionArgument = Annotated[
    str, typer.Argument(help="The question, in plain words.", callback=_asked)
]
ViewGroupsOption = Annotated[
    str | None,
    typer.Option(
        "--groups",
        help="See only what a caller with these access groups (comma-separated) sees: "
        "untagged documents and those sharing one of the groups (default: everything).",
    ),
]


def choices_option(text: str, allowed: Sequence[str], option: str) -> list[str]:
    """A comma-separated option's names; a usage error (exit 2) naming `option` if unknown."""
    try:
        return parse_choices(text, allowed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def groups_option(text: str | None) -> frozenset[str] | None:
    """A `--groups` option's names (None when not given); a usage error (exit 2) if invalid."""
    if text is None:
        return None
    try:
        return parse_groups(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--groups") from None


def view_option(text: str | None) -> CorpusView:
    """The view a `--groups` option asks for: that of a caller with those groups, or the
    owner's (every document: the local user opened the corpus) when it is not given."""
    names = groups_option(text)
    return CorpusView.everything() if names is None else CorpusView.of(names)


def settings_of(ctx: typer.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


@dataclass(frozen=True)
class Asked:
    """One question as `search`, `query` and `answer` take it from the command line."""

    question: str
    mode: Mode | None
    top_k: int | None
    view: CorpusView
    as_json: bool


def question_command(run: Callable[[Engine, Asked], None]) -> Callable[..., None]:
    """A command that asks one question of a corpus, its options and the corpus it opens
    written once for `search`, `query` and `answer`: `run` gets the open engine and the
    question as asked; its docstring is the command's help. The view is built before the
    corpus opens, so a bad `--groups` is a usage error before any model loads."""

    def command(
        ctx: typer.Context,
        question: QuestionArgument,
        db: DbOption,
        mode: ModeOption = None,
        top_k: TopKOption = None,
        groups: ViewGroupsOption = None,
        as_json: JsonOption = False,
    ) -> None:
        asked = Asked(question, mode, top_k, view_option(groups), as_json)
        with Engine.open(db, settings_of(ctx)) as engine:
            run(engine, asked)

    command.__name__ = command.__qualname__ = run.__name__
    command.__doc__ = run.__doc__
    return friendly_errors(command)
