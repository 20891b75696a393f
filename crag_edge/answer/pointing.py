"""Sentences that point: back to the sentence before them ("This feature …", "It …", "For
example, …", "The former …"), or forward to something the answer does not show ("note the
differences here", "… as follows:").

A pointer borrows its subject from where it stands. A passage's own words, "This feature is
known as parallel vacuum.", are stated by a passage where "this feature" is parallel index
vacuuming; written after "VACUUM FULL rewrites the entire contents of the table into a new
disk file [4].", the same words name VACUUM FULL. So a sentence that points back is read with
the sentence it points to: the judge is asked about both together (`statement_read`), and
the passage that states it must state that one too, or the sentence its words follow in that
passage must be about the same thing. A sentence that
points forward ("For example, note the differences here.") points at text its passage holds
and the answer does not: shown, it is a dangling promise.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from crag_edge.answer.support import (
    LOCATED_SHARE,
    claim_text,
    facts,
    held_words,
    quotes,
    refers_back,
)
from crag_edge.grading.keywords import tokenize
from crag_edge.sentences import sentence_spans

# A sentence ending on these points at what follows it in its passage, not in the answer.
FORWARD = re.compile(r"(?:\b(?:here|below|as follows|the following)|:)\s*$", re.IGNORECASE)
# The share of the pointed-to sentence's terms that the sentence a pointer follows in its own
# passage must hold for both to be about the same thing.
REFERENT_SHARE = 0.5


@dataclass(frozen=True)
class Said:
    """A decided sentence as the pointer rules read it: its text, the passage that states it
    (None: none does) and whether it passed the check."""

    text: str
    passage: int | None
    supported: bool


def points_forward(sentence: str) -> bool:
    """Whether the sentence ends by pointing at what comes next ("… here.", "… as follows:",
    "the following command:")."""
    return FORWARD.search(claim_text(sentence).rstrip(".!? ")) is not None


def pointer_fault(
    sentence: Said, before: Said | None, passages: dict[int, str]
) -> tuple[str, str] | None:
    """Why a sentence the check passed may not be shown where it stands, as (rule, reason);
    None when it may. `before` is the sentence a reader would see before it (None: it opens
    the answer, and leans on the question), `passages` the context's texts by number. A
    pointer after a removed sentence goes with it (`orphan`): shown alone, "This command is
    described in [1]." reads as the answer and seems to vouch for the removed claim."""
    if points_forward(sentence.text):
        return "pointer", "points to something the answer does not show"
    if before is None or not refers_back(sentence.text):
        return None
    if not before.supported:
        return "orphan", "refers back to a removed sentence"
    if sentence.passage in passages and not read_together(before, sentence, passages):
        return "pointer", (
            f"points back to a sentence that passage [{sentence.passage}] does not state"
        )
    return None


def statement_read(sentence: str, before: str | None) -> str:
    """What a sentence says, as the judge is asked about it: its claim, or, when it points
    back, its claim after the one it points to (`before`, the sentence a reader sees before
    it): "Its range is -9223372036854775808 to +9223372036854775807." after "An integer
    takes 4 bytes." is a claim about integers, which the judge reading the bigint row alone
    passes and reading both doubts (measured in docs/answer-quality.md, "The whole check on
    the labelled items")."""
    claim = claim_text(sentence)
    if before is None or not refers_back(claim):
        return claim
    return f"{claim_text(before)} {claim}"


def fails_in_place(sentences: Sequence[tuple[str, bool]]) -> list[int]:
    """The positions of the sentences, given in order as (text, supported), that pass but
    that `pointer_fault` fails without their passages (a pointer after a failed sentence, one
    that points forward); a failure carries on down a chain of pointers."""
    found: list[int] = []
    before: Said | None = None
    for i, (text, supported) in enumerate(sentences):
        said = Said(text, None, supported)
        if supported and pointer_fault(said, before, {}) is not None:
            found.append(i)
            said = Said(text, None, False)
        before = said
    return found


def read_together(before: Said, pointer: Said, passages: dict[int, str]) -> bool:
    """Whether the passage stating `pointer` states `before` too: the same passage, or one
    holding `before` (quoted, or its facts and `LOCATED_SHARE` of its terms), or one where the
    sentence `pointer`'s words follow is about what `before` says."""
    assert pointer.passage is not None
    if before.passage == pointer.passage:
        return True
    passage = passages[pointer.passage]
    claim = claim_text(before.text)
    if quotes(claim, passage) or _holds(claim, passage, LOCATED_SHARE):
        return True
    return _share(claim, referent(claim_text(pointer.text), passage)) >= REFERENT_SHARE


def referent(pointer: str, passage: str) -> str:
    """The sentence of `passage` that its sentence most like `pointer` follows: what the
    pointer's words point to there ("" when that sentence opens the passage)."""
    sentences = [passage[a:b] for a, b in sentence_spans(passage)]
    if not sentences:
        return ""
    best = max(range(len(sentences)), key=lambda i: _share(pointer, sentences[i]))
    return sentences[best - 1] if best else ""


def _holds(claim: str, passage: str, share: float) -> bool:
    return facts(claim) <= held_words(passage) and _share(claim, passage) >= share


def _share(claim: str, text: str) -> float:
    """The share of `claim`'s content terms that `text` holds."""
    terms = set(tokenize(claim))
    return len(terms & set(tokenize(text))) / len(terms) if terms else 0.0
