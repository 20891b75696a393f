"""A term a passage defines, and a sentence that pairs it with its own definition.

Reference manuals list subcommands, options and settings as definition lists: a short term
on a paragraph of its own ("disable"), its definition in the paragraph after ("Disable the
core.sparseCheckout config setting, and restore the working directory to include all
files."). A sentence answering "Which git sparse-checkout subcommand restores the working
directory to include all files?" with `git sparse-checkout disable` adds only the term to
the question's words, so no fact of its own locates it, and the small judge, reading the
term's line among its neighbours, doubts it. The sentence is stated where the term it names
is defined by the words it pairs the term with; another term's definition (`init`, the next
one) does not state it.
"""

from __future__ import annotations

from crag_edge.grading.keywords import tokenize
from crag_edge.sentences import definition_pairs, paragraph_spans

# The share of what a sentence says of its term that the term's definition must hold, as a
# located sentence's passage holds its content terms.
DEFINED_SHARE = 0.75


def defined_terms(passage: str) -> list[tuple[str, str]]:
    """The (term, definition) pairs of `passage`: a term's paragraph and the prose one after it."""
    return [
        (passage[term[0] : term[1]], passage[definition[0] : definition[1]])
        for term, definition in definition_pairs(passage)
    ]


def _paragraphs(passage: str) -> list[str]:
    return [passage[start:end] for start, end in paragraph_spans(passage)]


def pairs_with_definition(claim: str, question: str, passage: str) -> bool:
    """Whether `claim` names a term `passage` defines, one the question does not name, and
    says of it what the term's definition says: `DEFINED_SHARE` of the words it adds to the
    term, the question's words held by the prose around the list left out (the subject
    every term of the list shares, "git sparse-checkout")."""
    claim_terms, asked = set(tokenize(claim)), set(tokenize(question))
    pairs = defined_terms(passage)
    listed = {part for pair in pairs for part in pair}
    prose = " ".join(part for part in _paragraphs(passage) if part not in listed)
    subject = asked & set(tokenize(prose))
    for term, definition in pairs:
        named = set(tokenize(term))
        if not named or not named <= claim_terms or named <= asked:
            continue
        described = claim_terms - named - subject
        held = described & set(tokenize(definition))
        if described and len(held) >= DEFINED_SHARE * len(described):
            return True
    return False
