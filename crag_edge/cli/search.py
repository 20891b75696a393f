"""`search`: the passages a question finds, ranked, each with its place and a snippet; no
model but the embedder, so it answers in a fraction of a second."""

from __future__ import annotations

from crag_edge.citations import locator
from crag_edge.console.options import Asked, question_command
from crag_edge.console.output import fmt_number, marked, print_json, say
from crag_edge.engine import Engine
from crag_edge.retrieval.passages import Passage


@question_command
def search(engine: Engine, asked: Asked) -> None:
    """Find the passages for a question: hybrid retrieval only (no grading, no answer), each
    with its page or section and the question's words marked."""
    found = engine.search_passages(
        asked.question, mode=asked.mode, top_k=asked.top_k, view=asked.view
    )
    if asked.as_json:
        print_json({"question": asked.question, "passages": [p.to_dict() for p in found]})
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
