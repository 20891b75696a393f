"""A term a passage defines: a sentence pairing it with its own definition is located there
(`answer.definitions`)."""

from __future__ import annotations

from crag_edge.answer.definitions import defined_terms, pairs_with_definition
from crag_edge.answer.support import claim_text, term_support
from crag_edge.result import ContextItem

# git-sparse-checkout(1) as the HTML reader writes it: prose about `reapply`, then two terms.
SPARSE = (
    "In such cases, it can make sense to run git sparse-checkout reapply later after "
    "cleaning up affected paths (e.g. resolving conflicts, undoing or committing changes, "
    "etc.).\n\nThe reapply command can also take --[no-]cone and --[no-]sparse-index flags, "
    "with the same meaning as the flags from the set command.\n\ndisable\n\nDisable the "
    "core.sparseCheckout config setting, and restore the working directory to include all "
    "files.\n\ninit\n\nDeprecated command that behaves like set with no specified paths. May "
    "be removed in the future."
)
QUESTION = (
    "Which git sparse-checkout subcommand restores the working directory to include all files?"
)
DISABLE = (
    "The `git sparse-checkout disable` subcommand restores the working directory to include "
    "all files [1]."
)


def item(text: str) -> ContextItem:
    return ContextItem(1, 1, 0, "", "", 0, len(text), text, "corpus", 1.0)


def test_terms_are_short_paragraphs_followed_by_prose() -> None:
    pairs = defined_terms(SPARSE)
    assert [term for term, _ in pairs] == ["disable", "init"]
    assert pairs[0][1].startswith("Disable the core.sparseCheckout")


def test_a_sentence_pairing_a_term_with_its_definition_is_located() -> None:
    assert pairs_with_definition(claim_text(DISABLE), QUESTION, SPARSE)
    assert term_support(DISABLE, [item(SPARSE)], None, QUESTION).located == (1,)


def test_another_terms_definition_does_not_state_it() -> None:
    swapped = "The init subcommand restores the working directory to include all files."
    assert not pairs_with_definition(swapped, QUESTION, SPARSE)


def test_words_the_definition_lacks_keep_it_unlocated() -> None:
    added = "The disable subcommand deletes the sparse-checkout file and rewrites every branch."
    assert not pairs_with_definition(added, QUESTION, SPARSE)


def test_a_term_the_question_names_is_not_what_the_sentence_answers_with() -> None:
    asked = "What does git sparse-checkout disable do?"
    said = "It restores the working directory to include all files."
    assert not pairs_with_definition(f"disable {said}", asked, SPARSE)


def test_a_markdown_heading_is_not_a_term() -> None:
    assert defined_terms("# Results\n\nThe assay measured binding affinity.") == []
    assert defined_terms("Results\n\nThe assay measured binding affinity.") != []
