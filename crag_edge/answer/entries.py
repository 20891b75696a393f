"""A definition entry's words said of the term beside it.

Reference manuals list subcommands side by side, and neighbours are described through each
other: git stash's `pop` entry ("Remove a single stashed state from the stash list and apply
it …") and `apply`'s ("Like pop, but do not remove the state from the stash list"). Asked
which subcommand applies a stash and removes it, a small model wrote "The git stash apply
command applies a stashed state and removes it from the stash list", credited to pop's
entry: every word but the name is pop's definition, and the small judge, reading words and
not the negation in apply's entry, passed it at 0.86.

So a sentence is not stated by an entry whose definition holds what it says (the share of
its words beyond the names that a term's definition must hold for the term to be paired
with it, `definitions.DEFINED_SHARE`) when it names another term the context defines and not
the entry's own, unless that other term's definition holds as much of it. A term is named
when the sentence writes its first word as a name: in code, after a word of the question
("git stash apply"), or before the word for what it is ("the apply subcommand"); a verb
that happens to spell a neighbour's name ("… and applies it") names nothing.

The same list lends its values to subjects it never names. Asked how long reflog entries are
kept, the model wrote "Reflog entries are kept for 60 days by default [1]" from
gc.rerereResolved's entry ("Records of conflicted merge you resolved earlier are kept for
this many days … The default is 60 days."), and the judge passed it at 0.81. A sentence whose
answer (its facts beyond the question's) an entry's definition holds, that does not name the
entry, and whose first content word is one the question asks about (not a word that only
frames it, such as "default") that neither the passage nor its page's title writes, states
that value of a subject the passage never speaks of.

Manuals name commands by what they do, and a family's names share all words but the last
(`git worktree add`, `git worktree remove`, `git worktree prune`). Asked "Which command
removes a linked working tree?", the model answered "`git worktree prune`" from a passage
naming both ("If a working tree is deleted without using git worktree remove, … you can run
git worktree prune … to clean up any stale administrative files"); the judge passed it at
0.81. A name written in code of at least three words whose last word is not one the question
asks about, where the passage names a sibling whose last word is ("remove" for "removes"),
passes over the command the question names.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from crag_edge.answer.answering import focus_terms
from crag_edge.answer.definitions import DEFINED_SHARE, defined_terms
from crag_edge.answer.support import CODE, WORD, answer_facts, held_words, plain_words
from crag_edge.grading.keywords import STOPWORDS, tokenize
from crag_edge.result import ContextItem

# The words of a command's name in code at the least: its family ("git worktree") and its own.
FAMILY_WORDS = 3
# What a manual calls an entry of its lists, written after its name ("the pop subcommand").
KIND_WORDS = ("subcommand", "command", "option", "flag", "mode", "setting", "action", "verb")
KINDS = f"(?:{'|'.join(KIND_WORDS)})s?"
KIND_TERMS = frozenset(tokenize(" ".join(KIND_WORDS)))
# An entry's name: a lower-case word opening its term ("pop [--index]", "set"); a term
# opening with a capital is a heading ("NAME", "Notes") or a label, not a list's entry.
NAME = re.compile(r"^[a-z][\w-]*")
# A negation and the rest of its clause: words a definition says are not so ("Like pop, but
# do not remove the state from the stash list") are not what it holds.
NEGATED = re.compile(r"\b(?:not|never|no|without|cannot)\b[^,.;:]*", re.IGNORECASE)


@dataclass(frozen=True)
class Entry:
    """A defined term: its name (the term's first word), the term's first line and its
    definition."""

    name: str
    term: str
    definition: str

    def named_in(self, terms: set[str]) -> bool:
        """Whether `terms` (a sentence's, stemmed) hold the entry's name."""
        return bool(set(tokenize(self.name)) & terms)


def entries(passage: str) -> list[Entry]:
    """The entries `passage` defines, each named by its term's first word."""
    found = []
    for term, definition in defined_terms(passage):
        if (first := NAME.search(term.strip())) is not None and first.group() not in STOPWORDS:
            found.append(Entry(first.group(), term.splitlines()[0], definition))
    return found


def said_of_neighbour(
    claim: str, question: str, item: ContextItem, context: Sequence[ContextItem]
) -> tuple[str, str] | None:
    """(the term named, the entry's own term) when `claim` says what one of `item`'s entries
    defines of a neighbouring term the context defines, or None. What the claim says is its
    words less the names it writes, the words for what an entry is and the page's title
    (every entry of git-remote(1) is about a remote: those words tell no entry apart)."""
    neighbours = {entry.name: entry for other in context for entry in entries(other.text)}
    asked = _question_words(question)
    named = [n for n in neighbours if n not in asked and _names(claim, asked, n)]
    claim_terms = set(tokenize(claim))
    shared = {term for name in named for term in tokenize(name)} | set(tokenize(item.title))
    described = claim_terms - shared - KIND_TERMS
    for entry in entries(item.text):
        if entry.named_in(claim_terms) or not _holds(described, entry):
            continue
        for name in named:
            if not _holds(described, neighbours[name]):
                return name, entry.name
    return None


def value_of_unnamed(claim: str, question: str, item: ContextItem) -> tuple[str, str] | None:
    """(the subject's word, the entry's term) when `claim` states an entry's value of a
    subject `item` never names (module docstring), or None."""
    answer = answer_facts(claim, question)
    opening = [w for w in plain_words(claim) if w not in STOPWORDS and WORD.fullmatch(w)][:1]
    if not answer or not opening:
        return None
    subject = set(tokenize(opening[0]))
    written = set(tokenize(item.text)) | set(tokenize(item.title))
    if not subject or not subject <= focus_terms(question) or subject & written:
        return None
    said = set(tokenize(claim))
    for entry in entries(item.text):
        if answer <= held_words(entry.definition) and not entry.named_in(said):
            return opening[0], entry.term
    return None


def passed_over(claim: str, question: str, passage: str) -> tuple[str, str] | None:
    """(the name written, its sibling the question names) when `claim` names a command
    in code whose sibling in `passage` the question's own word names (module docstring)."""
    asked = focus_terms(question)
    for code in CODE.findall(claim):
        words = code.lower().split()
        if len(words) < FAMILY_WORDS or set(tokenize(words[-1])) & asked:
            continue
        family = " ".join(words[:-1])
        for sibling in re.findall(rf"\b{re.escape(family)} ([a-z][\w-]*)", passage.lower()):
            if sibling != words[-1] and set(tokenize(sibling)) & asked:
                return code, f"{family} {sibling}"
    return None


def _question_words(question: str) -> set[str]:
    """The question's words as written, lower-cased."""
    return set(re.findall(r"[\w-]+", question.lower()))


def _names(claim: str, asked: set[str], name: str) -> bool:
    """Whether the claim writes `name` as a name (module docstring), not as a word; `asked`
    is the question's words."""
    word = re.escape(name)
    before = "|".join(re.escape(w) for w in sorted(asked - STOPWORDS))
    forms = [rf"`[^`]*\b{word}\b[^`]*`", rf"\b{word}\s+{KINDS}\b"]
    if before:
        forms.append(rf"\b(?:{before})\s+{word}\b")
    return any(re.search(form, claim, re.IGNORECASE) for form in forms)


def _holds(described: set[str], entry: Entry) -> bool:
    """Whether the entry's definition holds `DEFINED_SHARE` of the claim's words beyond the
    names it writes."""
    held = described & set(tokenize(NEGATED.sub(" ", entry.definition)))
    return bool(described) and len(held) >= DEFINED_SHARE * len(described)
