"""An uncited answer names the passages its sentences were drawn from, and only those."""

from __future__ import annotations

from crag_edge.answer.attribution import drawn_from, drawn_from_note
from crag_edge.answer.generation import cited
from crag_edge.result import ContextItem

PASSAGES = [
    "Retrieval-augmented generation answers a question by first retrieving passages from a "
    "document collection and then asking a language model to write an answer from them.",
    "Corrective RAG adds a retrieval evaluator between retrieval and generation. The "
    "evaluator scores every retrieved passage for relevance to the question.",
    "AMBIGUOUS means the evidence is partial: the question is rewritten and searched again.",
]


def context() -> list[ContextItem]:
    return [
        ContextItem(n, n, n, f"doc{n}.md", "", 0, len(text), text, "corpus", 0.9)
        for n, text in enumerate(PASSAGES, start=1)
    ]


def test_each_sentence_is_traced_to_the_passage_holding_most_of_its_terms() -> None:
    answer = (
        "An evaluator scores each retrieved passage for its relevance to the question. "
        "When the evidence is partial, the question is rewritten and searched again."
    )
    assert [item.n for item in drawn_from(answer, context())] == [2, 3]


def test_a_sentence_from_outside_the_context_is_traced_to_nothing() -> None:
    answer = "The Eiffel Tower was completed in 1889 for the World's Fair in Paris."
    assert drawn_from(answer, context()) == []
    assert drawn_from_note([]) == ""


def test_short_sentences_are_not_matched() -> None:
    assert drawn_from("Yes. It does.", context()) == []


def test_the_note_resolves_as_citations_in_order_of_use() -> None:
    items = drawn_from(
        "Partial evidence is rewritten and searched again. Generation asks a language model "
        "to write an answer from retrieved passages.",
        context(),
    )
    note = drawn_from_note(items)
    assert note == " (drawn from [3], [1])"
    assert [item.n for item in cited("An answer." + note, context())] == [3, 1]
