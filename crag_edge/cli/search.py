"""`search`: the passages a question finds, ranked, each with its place and a snippet; no
model but the embedder, so it answers in a fraction of a second."""

from __future__ import annotations

from typing import Annotated

import typer

from crag_edge.citations import locator
from crag_edge.console.errors import friendly_errors
from crag_edge.console.options import (
    TOP_K_MAX,
    TOP_K_MIN,
    DbOption,
    JsonOption,
    ModeOption,
    QuestionArgument,
    ViewGroupsOption,
    settings_of,
    view_option,
)
from crag_edge.console.output import fmt_number, marked, print_json, say
from crag_edge.engine import Engine
from crag_edge.retrieval.passages import Passage


@friendly_errors
def search(
    ctx: typer.Context,
    question: QuestionArgument,
    db: DbOption,
    mode: ModeOption = None,
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", help="Passages to show.", min=TOP_K_MIN, max=TOP_K_MAX),
    ] = None,
    groups: ViewGroupsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Find the passages for a question: hybrid retrieval only (no grading, no answer), each
    with its page or section and the question's words marked."""
    view = view_option(groups)
    with Engine.open(db, settings_of(ctx)) as engine:
        found = engine.search_passages(question, mode=mode, top_k=top_k, view=view)
    if as_json:
        print_json({"question": question, "passages": [p.to_dict() for p in found]})
        return
    for passage in found:
        print_passage(passage)
    if not found:
        say("no passages: the corpus is empty or nothing matches")


def print_passage(passage: Passage) -> None:
    """The rank and place in bold, the scores dim, then the snippet indented."""
    hit = passage.hit
    say(
        (f"{hit.rank}. {locator(hit.chunk)}", "bold"),
        (
            f"  rrf {hit.score:.4f} · cos {fmt_number(hit.dense_score)} · "
            f"bm25 {fmt_number(hit.bm25_score)}",
            "dim",
        ),
    )
    say("   ", *marked(passage.snippet.text, passage.snippet.marks))
