"""`crag-edge`: the command line. Thin: parse, call the Python API, print (tables or --json).

This module assembles the commands; each area has its own module (`models`, `corpus`, `ask`,
`evals`), and what every command line shares is in `crag_edge.console`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Annotated

import typer

from crag_edge.cli import ask, corpus, evals, inventory, models, search
from crag_edge.config import Settings, SettingsError
from crag_edge.console.commands import command
from crag_edge.console.errors import DEBUG_ENV, fail, friendly_errors, show_tracebacks
from crag_edge.console.options import corpus_defaults
from crag_edge.server.cli import mcp, serve
from crag_edge.server.tokens_cli import tokens_app
from crag_edge.training.cli import evaluator_app
from crag_edge.tui.cli import tui as tui_command

app = typer.Typer(
    help="crag-edge: Corrective RAG that runs fully offline. Retrieve from a local corpus, "
    "grade the evidence, correct it, answer with citations.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,  # locals may hold an API token or a document's text
)
models_app = typer.Typer(
    help="Pull, list and verify the local models (sha256-pinned).", no_args_is_help=True
)
eval_app = typer.Typer(help="Measure quality on labelled data.", no_args_is_help=True)
cache_app = typer.Typer(
    help="The evaluation cache: model scores kept in the corpus file for repeat questions.",
    no_args_is_help=True,
)
app.add_typer(models_app, name="models")
app.add_typer(eval_app, name="eval")
app.add_typer(cache_app, name="cache")
app.add_typer(evaluator_app, name="evaluator")
app.add_typer(tokens_app, name="tokens")


@app.callback()
def main_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML settings file (flat keys or a \\[crag_edge] table)."),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            envvar=DEBUG_ENV,
            help="Show the traceback of expected errors too (bugs always show theirs).",
        ),
    ] = False,
) -> None:
    """Settings come from CRAG_EDGE_* env vars, .env, then --config; errors stop here."""
    show_tracebacks(debug)
    try:
        ctx.obj = Settings.load(config)
    except SettingsError as exc:
        raise fail(exc) from None
    if ctx.obj.store.db_url is not None:
        ctx.default_map = corpus_defaults(ctx.command, ctx.obj.store.db_url)


command(app, "ingest")(corpus.ingest)
command(app, "check")(corpus.check)
command(app, "stats")(inventory.stats)
command(app, "documents")(inventory.documents)
command(app, "calibrate")(corpus.calibrate)
command(cache_app, "clear")(corpus.cache_clear)
command(app, "search")(search.search)
command(app, "query")(ask.query)
command(app, "answer")(ask.answer)
command(models_app, "pull")(models.models_pull)
command(models_app, "list")(models.models_list)
command(models_app, "verify")(models.models_verify)
command(eval_app, "retrieval")(evals.eval_retrieval)
command(eval_app, "crag")(evals.eval_crag)
command(eval_app, "answers")(evals.eval_answers)
command(eval_app, "qa")(evals.eval_qa)
command(eval_app, "pairs")(evals.eval_pairs)
command(eval_app, "grading")(evals.eval_grading)
command(app, "serve")(serve)
command(app, "mcp")(friendly_errors(mcp))
command(app, "tui")(friendly_errors(tui_command))


def main() -> None:
    """Console-script entry point."""
    # pdfminer (pdfplumber's reader of PDF tables) warns about recoverable PDF quirks through
    # logging; the ingest report says what failed, and stray log lines would tear the progress
    # bar. psycopg's pool warns of every connection it discards or fails to make; the
    # command's one error line (the service's readiness and request logs) says the database
    # was lost.
    for name in ("pdfminer", "psycopg.pool"):
        logging.getLogger(name).setLevel(logging.ERROR)
    app()
