"""What a question asks about, apart from the kind of answer it wants, and the words of it a
sentence repeats that the documents never name.

A question near the corpus's domain often asks about something the documents do not hold:
"What sound signal does a sailing vessel make in fog?" of a manual giving the power-driven
vessel's signal, "Which crew member is the cook?" of a crew list with no cook. A small model
answers from the row or line beside it ("a sailing vessel makes one prolonged blast …",
"the cook is Mira Holt, the skipper"), and a small judge reading that line passes it: the
value is there, only the subject is swapped. What gives it away is plain: the sentence
names the question's subject ("sailing", "cook"), and no document anywhere names it.

Only the question's subject counts, not its other words. The kind of answer a question asks
for ("what *sound signal*", "how *deep*", "which *certificate*") and its verbs ("does the
skipper *hold*", "a smallint can *hold*") are the reader's words, which a small corpus may
never use while stating the answer ("Depth: 4.4 m", "Certificate: Yachtmaster Offshore").
The subject is read from the question's form:

- after its auxiliary ("What fuel does *the harbour crane* run on?", "Which crew member is
  *the cook*?", "How high is *Mount Everest*?"), less each word right after a modal (a verb:
  "can *hold*"), in the question or in the sentence ("Which value can a smallint hold?" is
  answered "A smallint can hold …");
- in "What is the A of B?" (nothing between the question word and "is"), B alone ("What is
  the lead time for *stainless steel shackles*?"); "What is the largest value …?" names none.

A verb the question writes bare after "does" the answer inflects ("the skipper *holds*"), so
a word counts only where the sentence writes it as the question does. Measured over every
answer sentence of the four question sets' runs (docs/answer-quality.md, "A subject no
document names"): no right sentence, of CRAG's or of plain RAG's, names such a word.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from itertools import pairwise

from crag_edge.grading.keywords import STOPWORDS, tokenize

WORD = re.compile(r"[^\W\d_][\w-]*")
# A question: its question word, what it asks for, its auxiliary, then the rest.
QUESTION_FORM = re.compile(
    r"^\W*(?:(?:in|on|at|for|by|to|from|with|of) )?"
    r"(?:what|which|who|whom|whose|how|where|when|why)\b(?P<kind>.*?)"
    r"\b(?P<aux>does|do|did|is|are|was|were|can|could|will|would|should|must|may|has|have|had)\b"
    r"(?P<rest>.*)$",
    re.IGNORECASE,
)
MODALS = frozenset({"can", "could", "will", "would", "should", "must", "may", "might", "shall"})
COPULAS = frozenset({"is", "are", "was", "were"})
# In "What is the A of B?", where B begins.
OF_SUBJECT = re.compile(r"\b(?:of|for|in|on|at)\b", re.IGNORECASE)


def subject_words(question: str) -> list[str]:
    """The content words naming what `question` asks about, as it writes them (module
    docstring); none for a question of another form."""
    form = QUESTION_FORM.match(question)
    if form is None:
        return []
    rest = form["rest"]
    if form["aux"].lower() in COPULAS and not WORD.search(form["kind"]):
        parts = OF_SUBJECT.split(rest, maxsplit=1)
        rest = parts[1] if len(parts) == 2 else ""
    words = WORD.findall(rest)
    verbs = _after_modals([word.lower() for word in words])
    return [
        word for word in words if word.lower() not in STOPWORDS | MODALS | verbs and tokenize(word)
    ]


def _after_modals(words: list[str]) -> set[str]:
    """The words (lower case) right after a modal: verbs ("can *hold*")."""
    return {after for word, after in pairwise(words) if word in MODALS}


def unnamed_subject(
    claim: str, question: str, held: set[str], mentioned: Callable[[str], bool]
) -> list[str]:
    """The question's subject words `claim` writes as the question does that no passage
    holds (`held`: the passages' terms, stemmed as `tokenize` stems them) and the corpus
    never names (`mentioned`): the sentence speaks of something the documents do not."""
    said = [word.lower() for word in WORD.findall(claim)]
    written = set(said) - _after_modals(said)
    return [
        word
        for word in subject_words(question)
        if word.lower() in written and tokenize(word)[0] not in held and not mentioned(word)
    ]
