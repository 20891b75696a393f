"""A passage's words restated of another subject.

A small model answering "What fuel does the harbour crane run on?" from "The harbour's
emergency generator runs on biodiesel and is tested every second Tuesday." writes "The
harbour crane runs on biodiesel and is tested every second Tuesday.": every word of what it
says is the passage's, only the subject is swapped, and a small judge reading the passage
(which names the crane two sentences on) passes it. The same slip swaps an invoice's number
("Invoice 313 for the crane repair is due on 30 April." of invoice 311) or an option's verb
("--expire-unreachable=all keeps …" of "… prunes …").

What gives it away is the sentence's shape: a short subject, then the rest of the sentence
word for word as a passage sentence ends, after a short subject of its own that does not name
the sentence's. Only that shape is read: a subject of up to `MAX_SUBJECT_WORDS` words (longer
openings are clauses, not subjects), the passage's own subject naming something
(`MAX_THEIR_SUBJECT_WORDS`, at least one content word), and a restated part of at least
`MIN_RESTATED_WORDS` words, two of them content words, that runs to the sentence's end (a
closing "as stated in the passage" aside). A sentence that points back ("This
limit …") is the pointer rules' to read. Measured on the labelled sentences and the question
sets' answers (docs/answer-quality.md, "Words restated of another subject").
"""

from __future__ import annotations

from difflib import SequenceMatcher

from crag_edge.answer.support import closing_trimmed, plain_words, refers_back
from crag_edge.grading.keywords import STOPWORDS, stem
from crag_edge.sentences import sentence_spans

MAX_SUBJECT_WORDS = 4
MAX_THEIR_SUBJECT_WORDS = 5
MIN_RESTATED_WORDS = 3
MIN_RESTATED_CONTENT = 2
# Prepositions that end a subject's head ("the fuel *for* the generator" is about the fuel).
PREPOSITIONS = frozenset({"of", "for", "in", "on", "at", "to", "from", "with", "by"})


def other_subject(claim: str, passage: str) -> str | None:
    """The subject of the passage sentence whose ending `claim` restates word for word after
    a subject that sentence does not name, or None."""
    said = closing_trimmed(plain_words(claim))
    if not said or refers_back(claim):
        return None
    for start, end in sentence_spans(passage):
        theirs = plain_words(passage[start:end])
        match = SequenceMatcher(None, said, theirs, autojunk=False).find_longest_match()
        ours_end, their_start = match.a, match.b
        if not _restates(said, match.a, match.size) or not 0 < ours_end <= MAX_SUBJECT_WORDS:
            continue
        if not 0 < their_start <= MAX_THEIR_SUBJECT_WORDS:
            continue
        head = _head(said[:ours_end])
        their_subject = _content(theirs[:their_start])
        if head is not None and their_subject and head not in their_subject:
            return " ".join(theirs[:their_start])
    return None


def _restates(said: list[str], start: int, size: int) -> bool:
    """Whether said[start:start + size] is long enough and runs to the sentence's end."""
    restated = said[start : start + size]
    return (
        size >= MIN_RESTATED_WORDS
        and start + size == len(said)
        and len(_content(restated)) >= MIN_RESTATED_CONTENT
    )


def _head(subject: list[str]) -> str | None:
    """The last content word of `subject` before its first preposition: "the fuel for the
    generator" → fuel, "the harbour crane" → crane."""
    cut = next((i for i, word in enumerate(subject) if word in PREPOSITIONS), len(subject))
    content = _content(subject[:cut])
    return content[-1] if content else None


def _content(words: list[str]) -> list[str]:
    """Stems of the words that are not stopwords, a possessive's "'s" dropped."""
    bare = (word.split("'")[0] for word in words)
    return [stem(word) for word in bare if word not in STOPWORDS]
