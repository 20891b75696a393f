"""What the LLM judge reads of a long passage: the strips that best cover the question, in
their order, within the budget; a passage that fits is read whole."""

from __future__ import annotations

from crag_edge.grading.focus import STRIP_JOINER, focused_passage

QUESTION = "How long does git gc keep unreachable loose objects?"
FILLER = [
    "The command also packs references into a single file for faster lookups.",
    "Running it in the background is the default on most installations of the tool.",
    "Hooks may run before it starts, and they may stop it from starting at all.",
]
ANSWER = "Unreachable loose objects are kept for two weeks before gc prunes them."
PASSAGE = " ".join([FILLER[0], ANSWER, FILLER[1], FILLER[2]])


def words(text: str) -> int:
    return len(text.split())


def test_a_passage_within_the_budget_is_read_whole() -> None:
    assert focused_passage(QUESTION, PASSAGE, words(PASSAGE), words) == PASSAGE


def test_a_long_passage_is_read_as_its_best_covering_strips_in_order() -> None:
    budget = words(ANSWER) + words(FILLER[0])
    focused = focused_passage(QUESTION, PASSAGE, budget, words)
    assert focused == STRIP_JOINER.join([FILLER[0], ANSWER])  # ties: the earlier strip
    assert words(focused.replace(STRIP_JOINER, " ")) <= budget


def test_the_best_strip_is_read_even_when_it_alone_exceeds_the_budget() -> None:
    assert focused_passage(QUESTION, PASSAGE, 3, words) == ANSWER


def test_a_passage_of_one_strip_is_left_to_truncation() -> None:
    one = " ".join(["word"] * 50)
    assert focused_passage(QUESTION, one, 10, words) == one
