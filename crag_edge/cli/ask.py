"""`query` and `answer`: the corrective loop on one question, printed for a person (or --json)."""

from __future__ import annotations

from pathlib import Path

import typer

from crag_edge.answer.checked import SupportReport
from crag_edge.answer.finished import Answer
from crag_edge.answer.generation import source_line
from crag_edge.answer.timing import timings_line
from crag_edge.answer.views import describe_corrections
from crag_edge.citations import locator
from crag_edge.console.options import Asked, question_command
from crag_edge.console.output import (
    fmt_number,
    out,
    print_json,
    say,
    tell,
)
from crag_edge.engine import Engine
from crag_edge.result import CragResult


def print_result(result: CragResult) -> None:
    """The decision, corrections, the last round's graded hits and the final context."""
    colour = {"CORRECT": "green", "AMBIGUOUS": "yellow", "INCORRECT": "red"}[result.decision]
    say(
        (result.decision, f"bold {colour}"),
        f"  score {result.score:.2f} ({result.reason}); next: {result.action}; "
        f"iterations {result.iterations}",
    )
    if result.corrections:
        say((f"corrections: {describe_corrections(result)}", "dim"))
    unavailable = [t for t, state in result.tiers.items() if state != "ok"]
    if unavailable:
        not_run = ", ".join(f"{t} ({result.tiers[t]})" for t in unavailable)
        say((f"tiers not run: {not_run}", "dim"))
    for warning in result.warnings:  # each one changed what is shown below
        tell(("warning", "yellow"), f": {warning}")
    if result.cache_hits:
        served = ", ".join(f"{tier} {n}" for tier, n in result.cache_hits.items())
        say((f"scores from the evaluation cache: {served}", "dim"))
    _print_hits(result)
    if result.insufficient_evidence:
        say(("insufficient evidence", "bold red"), ": nothing trustworthy was found")
    else:
        say(("context", "bold"), f" ({len(result.context)} strips):")
        for item in result.context:
            say(
                f"  [{item.n}] {locator(item)} [{item.start}:{item.end}] "
                f"{' '.join(item.text.split())[:200]}"
            )


def _print_hits(result: CragResult) -> None:
    """The last round's hits, each with its grade, scores and the start of its text."""
    last_round = result.hits[-result.rounds[-1].hits :] if result.rounds[-1].hits else []
    say((f"hits of round {result.iterations}", "bold"), " (all rounds: --json)")
    for h, grade in last_round:
        name = " ".join((h.chunk.title or Path(h.chunk.source).name).split())
        say(
            (f"{h.rank}. {name}", "bold"),
            "  ",
            ("kept", "green") if grade.kept else ("dropped", "red"),
            f" {grade.score:.2f} by {grade.decided_by}  ",
            (
                f"{locator(h.chunk)} [{h.chunk.start}:{h.chunk.end}]  rrf {h.score:.4f} · "
                f"cos {fmt_number(h.dense_score)} · bm25 {fmt_number(h.bm25_score)}",
                "dim",
            ),
        )
        snippet = " ".join(h.chunk.text.split())
        say(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}")
    if not result.hits:
        say("no hits: the corpus is empty or nothing matches")


@question_command
def query(engine: Engine, asked: Asked) -> None:
    """Retrieve the best chunks for a question, grade each one, and decide CORRECT /
    AMBIGUOUS / INCORRECT."""
    result = engine.query(asked.question, mode=asked.mode, top_k=asked.top_k, view=asked.view)
    if asked.as_json:
        print_json(result.to_dict())
        return
    print_result(result)


@question_command
def answer(engine: Engine, asked: Asked) -> None:
    """Run the corrective loop, then stream an answer that cites its evidence by number.

    Exits 1 when the answer is empty (stalled, or the model wrote nothing); an answer cut
    off by llm_max_tokens or the stall timeout gets a note on stderr."""
    result, stream = engine.answer(
        asked.question, mode=asked.mode, top_k=asked.top_k, view=asked.view
    )
    if not asked.as_json:
        print_result(result)
        say(("answer", "bold"), ":")
    for piece in stream:
        if not asked.as_json:
            say(piece, end="")
    finished = stream.answer
    if asked.as_json:
        print_json(finished.to_dict())
    else:
        _print_answer_tail(finished)
        if finished.support.sentences:
            _print_support(finished.support)
        if finished.text.strip():  # an empty answer is one error line, below
            tell((timings_line(finished.timings), "dim"))
    if not finished.text.strip():
        assert finished.note is not None  # an empty answer is refused: the model wrote nothing
        tell(("error:", "bold red"), f" no answer: {finished.note}")
        raise typer.Exit(1)


def _print_support(report: SupportReport) -> None:
    """The support check's summary, then each sentence it kept from the reader, and why."""
    tell((report.summary(), "dim"))
    for sentence in report.removed:
        tell(("removed", "yellow"), f": {sentence.text} ", (f"({sentence.reason})", "dim"))


def _print_answer_tail(answer: Answer) -> None:
    """After the streamed text: its citations, each with the rows or slides of it its
    sentences were found in, then what the reader should know about it: where to go next
    when nothing was found or stated (the passages found, by their places), a note when
    the answer was stopped."""
    out.print()
    for citation in answer.citations:
        item = citation.item
        say(source_line(item), "  ", (f"{item.source} [{item.start}:{item.end}]", "dim"))
        for place in citation.places:
            say(f"    {place.locator}: ", (place.claim, "dim"))
    if not answer.text.strip():
        return  # `answer` reports an empty answer as the error it is
    refused = answer.refusal
    if refused is not None and refused.kind != "stopped":
        for line in refused.lines():
            say(line)
        return
    if refused is not None:
        tell(("note", "yellow"), f": {refused.note}")
    if answer.uncited:
        tell(
            ("note", "yellow"), ": the answer cites no passage; check it against the context above"
        )
