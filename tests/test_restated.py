"""A passage's words restated of another subject (`answer.restated`)."""

from __future__ import annotations

import pytest

from crag_edge.answer.restated import other_subject

HANDBOOK = (
    "Power\n\nThe harbour\u2019s emergency generator runs on biodiesel and is tested every second "
    "Tuesday. Fuel for it is kept in the locked shed behind the crane."
)
INVOICE = "Subject: Invoice 311\n\nInvoice 311 for the crane repair is due on 30 April."


@pytest.mark.parametrize(
    ("claim", "passage", "theirs"),
    [
        (
            "The harbour crane runs on biodiesel and is tested every second Tuesday.",
            HANDBOOK,
            "the harbour's emergency generator",
        ),
        ("Invoice 313 for the crane repair is due on 30 April.", INVOICE, "invoice 311"),
    ],
)
def test_a_sentence_ending_as_a_passage_sentence_about_another_subject(
    claim: str, passage: str, theirs: str
) -> None:
    assert other_subject(claim, passage) == theirs


@pytest.mark.parametrize(
    "claim",
    [
        "The harbour's emergency generator runs on biodiesel.",  # word for word, whole
        "The emergency generator runs on biodiesel and is tested every second Tuesday.",
        "Fuel for the generator is kept in the locked shed behind the crane.",  # its head
        "It is kept in the locked shed behind the crane.",  # a pointer: the pointer rules'
        "Invoice 311 for the crane repair is due on 30 April.",
        "The crane runs on biodiesel and is tested weekly.",  # not word for word to its end
        "According to the harbour handbook, the crane runs on biodiesel and is tested "
        "every second Tuesday.",  # a long opening is a clause, not a subject
    ],
)
def test_the_passages_own_subject_or_another_shape_is_left_alone(claim: str) -> None:
    assert other_subject(claim, f"{HANDBOOK}\n\n{INVOICE}") is None


def test_a_closing_phrase_pointing_at_the_passages_is_set_aside() -> None:
    claim = "The harbour crane runs on biodiesel, as stated in the passage."
    assert other_subject(claim, HANDBOOK) == "the harbour's emergency generator"
