"""Whether a sentence of an answer addresses what was asked, and the rule an answer keeps by:
it holds at least one sentence that answers, and every other sentence it shows addresses the
question or supports one that does.

A sentence can be stated by its passage and answer nothing asked. Asked what DELETE's
RETURNING clause gives back, a small model quoted four notes of CREATE RULE's page, each
naming RETURNING; asked about unlogged tables, it quoted CREATE SEQUENCE's "This option is
mainly intended for sequences associated with unlogged tables". Each is true of its page, and
read as the answer it misleads. So such a sentence is removed and listed as any failed
sentence is, and an answer with nothing left that answers is the insufficient-evidence reply.

Cheap signals only (the numbers are in docs/answer-quality.md, "Answers that answer"):
- **focus**: the question's content terms (stemmed, as keyword coverage counts them), less
  the words that frame a question ("default", "use", "purpose" …): a sentence that holds
  none of them is about something else;
- **meaning**: the embedder's cosine between the question and the sentence, from
  `SIMILAR`: the quotes of CREATE RULE's notes hold the DELETE question's words and mean
  something else;
- **answer type**: a question asking how many, how long, how old … is answered by a number
  (in digits or words) the question does not state, and one asking for a price, a length
  or a weight not by a quantity of another kind ("8 metres" for a cost: `answer.measures`);
  one asking who, by someone the question does not name (a name, an email address, a word
  for a person or a group); one asking which option, by an option it does not name; and
  one asking what a thing is, not by a sentence only saying what sets it ("The name of the
  remote … is given by the `-o` option").
A sentence that points back ("This limit is set to 10 by default.") borrows its subject from
the one before it (`answer.pointing`), so it never answers alone: it supports the sentence it
points to. A sentence that answers nothing supports one that does when it points back to it
or is stated by the passage of a sentence that addresses the question.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from crag_edge.answer.measures import of_another_kind, unmeasured
from crag_edge.answer.support import (
    NUMBER,
    NUMBER_WORDS,
    claim_text,
    options_named,
    refers_back,
)
from crag_edge.grading.keywords import tokenize

# Words that say how a question asks, not what it asks about; stemmed as the terms are.
FRAME_TERMS = frozenset(
    tokenize("default use used purpose mean meaning happen work kind type way value get give")
)
# A question whose answer is a quantity: the sentence that answers it states one.
WANTS_NUMBER = re.compile(
    r"\bhow (?:many|much|long|old|often|large|big|far|few|high|low|deep|wide|soon)\b"
    r"|\bwhat (?:size|year|port|number|percentage|age)\b"
    # "What is the default maximum length of a string?", "At what WAL file size …?", "What is
    # the default maximum host parameter number (SQLITE_MAX_VARIABLE_NUMBER) …?"
    r"|\bwhat is the (?:[\w-]+ ){0,4}?(?:size|length|limit|number|count)"
    r"(?: of| for| in| \(|\?|$)"
    r"|\bat what (?:[\w-]+ ){0,3}?(?:size|length|age|count|number)\b",
    re.IGNORECASE,
)
# A place in an order ("every second Tuesday", "the third row"): a quantity as a number is.
ORDINAL_WORDS = frozenset(
    {
        *("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth"),
        *("ninth", "tenth", "eleventh", "twelfth", "twentieth", "hundredth", "thousandth"),
    }
)
# How often something happens, said in words: the answer a question asking how often wants.
FREQUENCY_WORDS = frozenset(
    {"once", "twice", "thrice", "hourly", "daily", "nightly", "weekly", "monthly", "yearly"}
    | {"annually", "every", "each"}
)
ASKS_HOW_OFTEN = re.compile(r"\bhow often\b", re.IGNORECASE)
# A question asking which option does something: the sentence that answers it names one.
ASKS_OPTION = re.compile(
    r"\b(?:which|what) (?:command[- ]line )?(?:option|flag|switch)e?s?\b", re.IGNORECASE
)
# A question asking who: the sentence that answers it names someone.
ASKS_WHO = re.compile(r"^\W*(?:(?:to|by|for|from|with) )?(?:who|whom|whose)\b", re.IGNORECASE)
# Words that name a person or a group in lower case: a role answers "who" as a name does.
PERSON_WORDS = frozenset(
    tokenize(
        "person people someone anyone everyone nobody user owner author administrator admin "
        "maintainer committer contributor reviewer approver operator manager engineer "
        "developer customer client staff member team group department committee board "
        "lead chair superuser root vendor supplier"
    )
)
# A sentence whose predicate only names what sets the thing asked about ("The name of the
# remote … is given by the `-o` option"): it says how the value is chosen, not what it is.
SET_BY = re.compile(
    r"\b(?:is|are) (?:given|specified|set|determined|controlled|configured|defined|chosen"
    r"|selected|governed) (?:by|with|using|via|through)\b",
    re.IGNORECASE,
)
# A value said beside it: a predicate of its own or a number ("…, which defaults to 1 billion").
VALUE_SAID = re.compile(r"\b(?:is|are|was|were|has|have|defaults? to)\b|\d", re.IGNORECASE)
# A question asking what sets something ("Which setting determines …?", "Which variable
# controls …?") is answered by what sets it.
ASKS_WHAT_SETS = re.compile(
    r"\b(?:determin|control|specif|configur|select|decid|chos|choos|govern)\w*"
    r"|\b(?:which|what) (?:[\w-]+ )?(?:setting|variable|parameter|option|pragma|flag|key)s?\b",
    re.IGNORECASE,
)
CAPITALISED = re.compile(r"\b[A-Z][\w-]*")
EMAIL = re.compile(r"\S+@\S+\.\w+")
WORD = re.compile(r"\w+")
# The cosine (all-MiniLM-L6-v2) from which a sentence holding the question's terms addresses it.
SIMILAR = 0.55
# The cosine of a claim with the question, or None when no embedder is at hand.
Similarity = Callable[[str], float] | None


@dataclass(frozen=True)
class Asked:
    """One sentence read against the question: `addresses` whether it speaks of what was
    asked, `answers` whether it can be the answer (it addresses it and states the kind of
    thing asked for)."""

    addresses: bool
    answers: bool


def focus_terms(question: str) -> set[str]:
    """The question's content terms, less those that only frame it."""
    return set(tokenize(question)) - FRAME_TERMS


def read_against(question: str, sentence: str, similarity: Similarity = None) -> Asked:
    """How `sentence` stands to the question (module docstring); `similarity` gives the
    cosine of a claim with the question, asked only of a claim holding the question's terms
    (None: no embedder is at hand, and the terms decide alone)."""
    claim = claim_text(sentence)
    if refers_back(claim):
        return Asked(addresses=False, answers=False)
    focus = focus_terms(question)
    held = not focus or bool(set(tokenize(claim)) & focus)  # a question of frame words only
    addresses = held and (similarity is None or similarity(claim) >= SIMILAR)
    return Asked(addresses, addresses and _kind_stated(question, claim))


def _kind_stated(question: str, claim: str) -> bool:
    """Whether the claim states what the question's form asks for: a number the question
    does not state (in digits, or a number or place in an order in words), when it asks
    how many, how long …, or how often it happens ("every second Tuesday", "weekly"), and
    never only quantities of another kind than a price, length or weight asked for;
    someone, when it asks who; an option, when it asks which option; anything otherwise."""
    if ASKS_WHO.search(question):
        return _names_someone(question, claim)
    if ASKS_OPTION.search(question):
        return bool(options_named(claim) - options_named(question))
    if of_another_kind(question, claim) or unmeasured(question, claim):
        return False
    if _only_says_what_sets_it(question, claim):
        return False
    if not WANTS_NUMBER.search(question):
        return True
    given = {m.group() for m in NUMBER.finditer(question)}
    stated = {m.group() for m in NUMBER.finditer(claim)} - given
    quantities = NUMBER_WORDS | ORDINAL_WORDS
    if ASKS_HOW_OFTEN.search(question):
        quantities |= FREQUENCY_WORDS
    words = {w.lower() for w in WORD.findall(claim)} & quantities
    return bool(stated or words)


def _only_says_what_sets_it(question: str, claim: str) -> bool:
    """Whether the claim's predicate names only what sets the thing asked about ("… is given
    by the `-o` or `--origin` option") where the question asks what the thing is ("What
    name does git clone give the remote …?"): no value is said before or after it ("… is
    defined by SQLITE_MAX_LENGTH, which defaults to 1 billion" answers), and the question
    does not ask what sets it ("Which setting determines the precision?")."""
    setter = SET_BY.search(claim)
    if setter is None or ASKS_WHAT_SETS.search(question):
        return False
    beside = claim[: setter.start()] + " " + claim[setter.end() :]
    return VALUE_SAID.search(beside) is None


def _names_someone(question: str, claim: str) -> bool:
    """Whether the claim names someone the question does not: a capitalised content word
    (the first word too: "Lena switches the DNS"), an email address, or a word for a person
    or a group ("the maintainer"). Asked who approves a rollback, "The rollback window is two
    hours" quotes its page and names no one."""
    asked = set(tokenize(question))
    capitalised = {t for m in CAPITALISED.finditer(claim) for t in tokenize(m.group())}
    named = (capitalised | (set(tokenize(claim)) & PERSON_WORDS)) - asked
    return bool(named) or EMAIL.search(claim) is not None


@dataclass
class Answering:
    """The rule an answer keeps by, read sentence by sentence as they are released: a
    sentence that answers is shown at once; another is shown once something answered, if it
    addresses the question or supports a sentence that does (it points back to the sentence
    shown before it, or its passage states a sentence that addresses the question); until
    then it waits, and when the answer is complete (`final`) it is decided on the whole
    answer."""

    question: str
    answered: bool = False
    addressing: set[int] = field(default_factory=set)  # passages of sentences addressing it

    def decide(
        self, read: Asked, sentence: str, passage: int | None, leans_on_shown: bool
    ) -> bool | None:
        """True: show it; None: wait for the rest of the answer. Never False before the end:
        a later sentence may answer."""
        if read.addresses and passage is not None:
            self.addressing.add(passage)
        if read.answers:
            self.answered = True
            return True
        if self.answered and self._supports(read, sentence, passage, leans_on_shown):
            return True
        return None

    def finally_decide(
        self, reads: Sequence[tuple[Asked, str, int | None]], shown_before: bool
    ) -> list[bool]:
        """For the supported sentences still waiting when the answer is complete, in order
        ((reading, text, passage) each; `shown_before`: whether the sentence before the first
        is shown), whether each is shown."""
        self.addressing |= {p for read, _, p in reads if read.addresses and p is not None}
        self.answered = self.answered or any(read.answers for read, _, _ in reads)
        shown: list[bool] = []
        for read, text, passage in reads:
            leans = shown[-1] if shown else shown_before
            shown.append(self.answered and self._supports(read, text, passage, leans))
        return shown

    def _supports(self, read: Asked, sentence: str, passage: int | None, leans: bool) -> bool:
        return read.addresses or (leans and refers_back(sentence)) or passage in self.addressing
