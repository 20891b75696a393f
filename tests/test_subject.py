"""A question's subject, and a sentence naming one that no document names."""

from __future__ import annotations

import pytest

from crag_edge.answer.subject import subject_words, unnamed_subject
from crag_edge.answer.support import term_support
from crag_edge.result import ContextItem


@pytest.mark.parametrize(
    ("question", "subject"),
    [
        # After "does": the subject and the verb; the kind asked for ("sound signal") is not.
        (
            "What sound signal does a sailing vessel make in fog?",
            ["sailing", "vessel", "make", "fog"],
        ),
        ("Which crew member is the cook?", ["cook"]),
        ("How high is Mount Everest?", ["Mount", "Everest"]),
        # "What is the A of B?": B alone; "What is the A?" names none apart.
        ("What is the lead time for stainless steel shackles?", ["stainless", "steel", "shackles"]),
        ("What is the largest value a smallint can hold?", []),
        # A verb after a modal is the reader's word.
        ("Which value can a smallint hold?", ["smallint", "hold"]),
        # No auxiliary: no subject read.
        ("Which knot joins two ropes?", []),
    ],
)
def test_a_questions_subject_is_read_from_its_form(question: str, subject: list[str]) -> None:
    assert subject_words(question) == subject


CREW = "Name: Mira Holt; Role: Skipper; Watch: Morning; Certificate: Yachtmaster Offshore"
NEVER_NAMED = {"cook", "sailing", "sail", "hold"}


def corpus_names(word: str) -> bool:
    return word.lower() not in NEVER_NAMED


@pytest.mark.parametrize(
    ("question", "sentence", "unnamed"),
    [
        # The row's value given to a subject the documents never name.
        ("Which crew member is the cook?", "The cook is Mira Holt, the Skipper [1].", ["cook"]),
        # The kind asked for and the verb are the reader's words, named or not.
        ("Which certificate does the skipper hold?",
         "The skipper holds the Yachtmaster Offshore certificate [1].", []),
        ("Which value can a smallint hold?", "A smallint can hold 32767 [1].", []),
        # A subject word the sentence does not repeat is not the sentence's.
        ("Which crew member is the cook?", "No one on the list is named as such.", []),
    ],
)  # fmt: skip
def test_a_sentence_naming_a_subject_no_document_names(
    question: str, sentence: str, unnamed: list[str]
) -> None:
    held = {"name", "mira", "holt", "role", "skipper", "watch", "morn", "certif", "yachtmast"}
    assert unnamed_subject(sentence, question, held, corpus_names) == unnamed


def test_the_cheap_tier_fails_a_sentence_about_an_unnamed_subject() -> None:
    """The judge passes "a sailing vessel makes one prolonged blast" on the power-driven
    vessel's line: the value is there, the subject swapped. With the corpus at hand the
    cheap tier finds that nothing names sailing; without it, nothing is decided so."""
    fog = "In fog, a power-driven vessel sounds one prolonged blast on its horn."
    context = [ContextItem(1, 1, 1, "book.epub", "", 0, len(fog), fog, "corpus", 0.9)]
    question = "What sound signal does a sailing vessel make in fog?"
    sentence = "A sailing vessel sounds one prolonged blast on its horn in fog [1]."
    assert term_support(sentence, context, corpus_names, question).missing == ("sailing",)
    assert term_support(sentence, context, None, question).missing == ()
    power = "A power-driven vessel sounds one prolonged blast on its horn in fog [1]."
    asked = "What sound signal does a power-driven vessel make in fog?"
    assert term_support(power, context, corpus_names, asked).missing == ()
