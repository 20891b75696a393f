"""Pairs that teach the support model whether a passage states a sentence, made without an LLM.

Each recipe takes a passage window (as `support_model.passage_windows` cuts a chunk) and one
of its sentences, the claim, asked under a question made of the claim's own subject (most
claims) or under none, and read after its own previous sentence when it points back, after
a sentence about something else for some of the others, or after none. All pairs of a claim
share its question and the sentence before it, so neither tells the label:

- **stated**: the claim (or a rule-based paraphrase of it: a parenthesis or a trailing
  clause dropped, an opening phrase moved to the end, a verb swapped for a synonym) against
  its window, or against its window with another sentence swapped for one of the same
  length (as the removed negatives are made, so a swap tells nothing).
- **removed** (MiniCheck's hard negative): the claim against its window with the claim
  replaced by a sentence of the same length from elsewhere in its document, when what is
  left no longer holds most of its terms. Cut out instead, the window would be a sentence
  shorter than the positives', and a model learns to read length.
- **typed error** (TinyLettuce): the claim with one fact changed (a number, an option, a
  name, a negation, a condition) against its own window; at most a quarter of the negatives.
- **neighbour**: the claim against the run of its document's sentences after it (before
  it, at a document's end) as long as its window: the same topic, not the claim.
- **out of context**: a claim that points back ("This option …"), read after a sentence
  about something else (another part of its document, or another document): its words are
  the passage's own, and it still says something else.
- **not answering**: the claim against its own window, asked under a question another
  sentence of the window answers: stated, but not what was asked.
- **table rows**: a row read alone with its headers ("Name bigint · Storage Size 8 bytes")
  or as the page shows it, asked about that row: a sentence stating one of its cells ("The
  Storage Size of bigint is 8 bytes.") or another row's cell in its place; and two rows
  read together, where the other row's cell is stated but not asked.

Every negative's passage is as long as its claim's window (`LENGTH_TOLERANCE`). Every pair
carries its `unit` (the document or the claim it came from) and its `corpus`, so a corpus
can be held out whole.
"""

from __future__ import annotations

import dataclasses
import functools
import random
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from crag_edge.answer.support import NUMBER, OPTION, refers_back
from crag_edge.grading.keywords import tokenize
from crag_edge.models.support_model import passage_windows, support_input
from crag_edge.sentences import sentence_spans
from crag_edge.training.data import is_validation

SCIFACT = "scifact"
TYPED_SHARE = 0.25  # of the negatives at most
MIN_CLAIM_WORDS, MAX_CLAIM_WORDS = 5, 40
LEFT_SHARE = 0.6  # a window without its claim may hold at most this share of its terms
NOT_ASKED_SHARE = 0.5  # a question another claim answers shares at most this of the claim's
LENGTH_TOLERANCE = 0.2  # a negative's passage is within this share of its positive's words
MIN_LENGTH_SLACK = 4  # words: short passages may differ by this many
QUESTION_SHARE = 0.85  # pairs asked under a question (the rest read without one)
SPLICE_SHARE = 0.3  # stated windows with another sentence swapped in, as negatives are made
AFTER_OTHER_SHARE = 0.3  # claims that do not point back, read after an unrelated sentence
QUESTION_TEMPLATES = (
    "What about {subject}?",
    "What does {subject} do?",
    "How does {subject} work?",
    "What is said about {subject}?",
)
NAME = re.compile(r"(?<=\s)[A-Z][\w-]+|`[^`]+`")
PARENTHESIS = re.compile(r"\s*\([^()]{1,80}\)")
TRAILING_CLAUSE = re.compile(r"^(.{25,}?)(?:, which |, so that |; |, and | — ).*$")
OPENER = re.compile(r"^(By default|Normally|Usually|Typically|In general), (.+?)([.!?])$")
SYNONYMS = {
    "removes": "deletes", "shows": "displays", "creates": "makes", "returns": "gives back",
    "uses": "makes use of", "must": "has to", "allows": "lets", "prints": "outputs",
    "stores": "keeps", "specifies": "sets", "contains": "holds", "requires": "needs",
}  # fmt: skip
FLIPS = {
    "if": "unless", "unless": "if", "before": "after", "after": "before", "always": "never",
    "never": "always", "more": "less", "less": "more", "first": "last", "last": "first",
    "larger": "smaller", "smaller": "larger", "enabled": "disabled", "disabled": "enabled",
    "can": "cannot", "cannot": "can", "is": "is not", "are": "are not", "does": "does not",
    "not": "", "only": "also", "all": "no", "minimum": "maximum", "maximum": "minimum",
}  # fmt: skip


@dataclass(frozen=True)
class SupportPair:
    """One training example: `query` is `support_input(sentence, previous)`."""

    query: str
    passage: str
    label: float
    origin: str
    unit: str
    corpus: str


@dataclass(frozen=True)
class Document:
    """A document's passage windows, in order, and the corpus it belongs to."""

    key: str
    corpus: str
    windows: tuple[str, ...]


def is_heldout(corpus: str, unit: str, heldout_corpora: Sequence[str]) -> bool:
    """Whether a pair is never trained on: its whole corpus is held out, or it is one of
    SciFact's held-out claims (the evaluator's split of them)."""
    return corpus in heldout_corpora or (corpus == SCIFACT and is_validation(unit))


def sentences_of(text: str) -> list[str]:
    return [text[a:b] for a, b in sentence_spans(text)]


def is_claim(sentence: str) -> bool:
    words = sentence.split()
    return (
        MIN_CLAIM_WORDS <= len(words) <= MAX_CLAIM_WORDS
        and sentence[:1].isupper()
        and sentence.rstrip()[-1:] in ".!?"
        and len(set(tokenize(sentence))) >= 3
    )


def coverage(claim: str, passage: str) -> float:
    """The share of the claim's content terms the passage holds."""
    terms = terms_of(claim)
    return len(terms & terms_of(passage)) / len(terms) if terms else 0.0


@functools.lru_cache(maxsize=200_000)
def terms_of(text: str) -> frozenset[str]:
    """A text's content terms (cached: the recipes ask about each sentence many times)."""
    return frozenset(tokenize(text))


def paraphrase(sentence: str, rng: random.Random) -> str | None:
    """A rule-based rewording that says no more than `sentence`, or None if no rule applies."""
    rules = [_drop_parenthesis, _drop_trailing_clause, _move_opener, _swap_synonyms]
    rng.shuffle(rules)
    for rule in rules:
        made = rule(sentence)
        if made and made != sentence and len(made.split()) >= MIN_CLAIM_WORDS:
            return made
    return None


def _drop_parenthesis(sentence: str) -> str | None:
    return PARENTHESIS.sub("", sentence) if PARENTHESIS.search(sentence) else None


def _drop_trailing_clause(sentence: str) -> str | None:
    match = TRAILING_CLAUSE.match(sentence)
    return f"{match.group(1).rstrip(',;')}." if match else None


def _move_opener(sentence: str) -> str | None:
    match = OPENER.match(sentence)
    if not match:
        return None
    rest = match.group(2)
    return f"{rest[0].upper()}{rest[1:]} {match.group(1).lower()}{match.group(3)}"


def _swap_synonyms(sentence: str) -> str | None:
    words = sentence.split(" ")
    swapped = [SYNONYMS.get(w, w) for w in words]
    return " ".join(swapped) if swapped != words else None


def typed_error(
    sentence: str, passage: str, names: Sequence[str], rng: random.Random
) -> str | None:
    """The sentence with one fact changed so that `passage` no longer states it: a number,
    an option or a name the passage does not hold, a negation or a condition turned."""
    kinds = [_other_number, _other_option, _other_name, _flip_word]
    rng.shuffle(kinds)
    for kind in kinds:
        made = kind(sentence, passage, names, rng)
        if made and made != sentence:
            return made
    return None


def _other_number(
    sentence: str, passage: str, names: Sequence[str], rng: random.Random
) -> str | None:
    found = list(NUMBER.finditer(sentence))
    if not found:
        return None
    match = rng.choice(found)
    value = int(re.sub(r"\D", "", match.group()) or "0")
    for candidate in (value * 2, value + rng.randint(1, 9), max(0, value - 1), value * 10):
        text = str(candidate)
        if not re.search(rf"(?<![\w.]){re.escape(text)}(?![\w.])", passage):
            return sentence[: match.start()] + text + sentence[match.end() :]
    return None


def _other_option(
    sentence: str, passage: str, names: Sequence[str], rng: random.Random
) -> str | None:
    found = list(OPTION.finditer(sentence))
    options = [n for n in names if n.startswith("-") and n not in passage]
    if not found or not options:
        return None
    match = rng.choice(found)
    return sentence[: match.start()] + rng.choice(options) + sentence[match.end() :]


def _other_name(
    sentence: str, passage: str, names: Sequence[str], rng: random.Random
) -> str | None:
    found = list(NAME.finditer(sentence))
    others = [n for n in names if not n.startswith("-") and n not in passage]
    if not found or not others:
        return None
    match = rng.choice(found)
    return sentence[: match.start()] + rng.choice(others) + sentence[match.end() :]


def _flip_word(sentence: str, passage: str, names: Sequence[str], rng: random.Random) -> str | None:
    words = sentence.split(" ")
    spots = [i for i, w in enumerate(words) if w.lower() in FLIPS and i > 0]
    if not spots:
        return None
    i = rng.choice(spots)
    words[i] = FLIPS[words[i].lower()]
    return " ".join(w for w in words if w)


def corpus_names(documents: Sequence[Document]) -> list[str]:
    """The options and names the corpus writes: what a typed error swaps a fact for."""
    found: set[str] = set()
    for doc in documents:
        for window in doc.windows:
            found.update(OPTION.findall(window))
            found.update(NAME.findall(window))
    return sorted(found)


@dataclass(frozen=True)
class Claim:
    """A window's sentence read as a claim, with the question every pair of it is asked
    under (made from its own words, so that the question does not tell its label) and the
    sentence every pair of it is read after (so that having one does not tell it either)."""

    doc: Document
    index: int
    window: str
    sentence: str
    question: str
    previous: str = ""

    def pair(
        self, sentence: str, passage: str, label: float, origin: str, previous: str | None = None
    ) -> SupportPair:
        after = self.previous if previous is None else previous
        query = support_input(sentence, after, self.question)
        return SupportPair(query, passage, label, origin, self.doc.key, self.doc.corpus)


class DocumentRecipes:
    """The recipes over the windows of a corpus's documents (seeded, so reruns agree).
    Every negative is read against a passage as long as its claim's window (within
    `LENGTH_TOLERANCE`): a model must not learn that a shorter passage states less."""

    def __init__(self, documents: Sequence[Document], seed: int) -> None:
        self.documents = list(documents)
        self.names = corpus_names(self.documents)
        self.rng = random.Random(seed)
        self.sentences = {d.key: document_sentences(d) for d in self.documents}
        self.pointer_free = [
            s for d in self.documents for s in self.sentences[d.key]
            if is_claim(s) and not refers_back(s)
        ]  # fmt: skip

    def pairs(self, per_window: int = 1) -> Iterator[SupportPair]:
        for doc in self.documents:
            for index, window in enumerate(doc.windows):
                claims = [s for s in sentences_of(window) if is_claim(s)]
                for sentence in self.rng.sample(claims, min(per_window, len(claims))):
                    claim = Claim(doc, index, window, sentence, self._question(sentence))
                    claim = dataclasses.replace(claim, previous=self._read_after(claim))
                    yield from self._stated(claim)
                    yield from self._negatives(claim, claims)

    def _question(self, sentence: str) -> str:
        return pseudo_question(sentence, self.rng) if self.rng.random() < QUESTION_SHARE else ""

    def _read_after(self, claim: Claim) -> str:
        """The sentence a claim's pairs are read after: its own previous one when it points
        back, else for `AFTER_OTHER_SHARE` of claims a sentence about something else (which
        does not change what it says), else none."""
        previous = self._previous(claim.window, claim.sentence)
        if refers_back(claim.sentence) and previous:
            return previous
        return self._other(claim) if self.rng.random() < AFTER_OTHER_SHARE else ""

    def _stated(self, claim: Claim) -> Iterator[SupportPair]:
        """The claim as written or paraphrased against its window (or the window with
        another sentence swapped for one of the same length, as negatives are made); and a
        claim that points back read after a sentence about something else (not stated)."""
        rng, sentence = self.rng, claim.sentence
        made = paraphrase(sentence, rng) if rng.random() < 0.6 else None
        passage, origin = claim.window, "paraphrase" if made else "sentence"
        others = [s for s in sentences_of(claim.window) if s != sentence]
        if others and rng.random() < SPLICE_SHARE:
            swapped = rng.choice(others)
            stand_in = self._stand_in(claim, swapped)
            if stand_in:
                passage, origin = claim.window.replace(swapped, stand_in), "spliced"
        yield claim.pair(made or sentence, passage, 1.0, origin)
        if refers_back(sentence) and claim.previous:
            yield claim.pair(sentence, claim.window, 0.0, "out-of-context", self._other(claim))

    def _negatives(self, claim: Claim, claims: Sequence[str]) -> Iterator[SupportPair]:
        """The window with the claim replaced by a sentence of the same length, a typed
        error, a neighbouring run of sentences as long as the window, and the claim asked
        under another claim's question (stated, but not an answer)."""
        rng, sentence, window = self.rng, claim.sentence, claim.window
        stand_in = self._stand_in(claim, sentence)
        if stand_in:
            replaced = window.replace(sentence, stand_in)
            if coverage(sentence, replaced) <= LEFT_SHARE:
                yield claim.pair(sentence, replaced, 0.0, "removed")
        if rng.random() < 0.5:
            wrong = typed_error(sentence, window, self.names, rng)
            if wrong:
                yield claim.pair(wrong, window, 0.0, "typed-error")
        neighbour = self._neighbour(claim)
        if neighbour:
            yield claim.pair(sentence, neighbour, 0.0, "neighbour")
        asked = [c for c in claims if c != sentence and coverage(c, sentence) <= LEFT_SHARE]
        if claim.question and asked:
            other = pseudo_question(rng.choice(asked), rng)
            if coverage(other, sentence) <= NOT_ASKED_SHARE:
                elsewhere = dataclasses.replace(claim, question=other)
                yield elsewhere.pair(sentence, window, 0.0, "not-answering")

    def _stand_in(self, claim: Claim, replaced: str) -> str | None:
        """A sentence of the same length as `replaced` from another window of the claim's
        document (its topic), else from another document, that does not state the claim."""
        words = len(replaced.split())
        own = [s for s in self.sentences[claim.doc.key] if s not in claim.window]
        for pool in (own, self.pointer_free):
            fits = [
                s for s in pool
                if close_length(len(s.split()), words) and coverage(claim.sentence, s) <= 0.3
                and s not in claim.window
            ]  # fmt: skip
            if fits:
                return self.rng.choice(fits)
        return None

    def _neighbour(self, claim: Claim) -> str | None:
        """The run of the document's sentences after the claim (before it, at the end of a
        document) as long as the claim's window, when it does not state the claim."""
        sentences = self.sentences[claim.doc.key]
        at = sentences.index(claim.sentence)
        target = len(claim.window.split())
        after = sentences[at + 1 :]
        before = list(reversed(sentences[:at]))
        for side in (after, before):
            run = length_run(side, target)
            if run is None:
                continue
            passage = " ".join(run if side is after else list(reversed(run)))
            if claim.sentence not in passage and coverage(claim.sentence, passage) <= LEFT_SHARE:
                return passage
        return None

    def _previous(self, window: str, claim: str) -> str:
        sentences = sentences_of(window)
        at = sentences.index(claim) if claim in sentences else 0
        return sentences[at - 1] if at > 0 else ""

    def _other(self, claim: Claim) -> str:
        """A sentence the claim cannot be about: another window's of its document (about
        something else there) or another document's."""
        own = [
            s for s in self.sentences[claim.doc.key]
            if s not in claim.window and is_claim(s) and not refers_back(s)
        ]  # fmt: skip
        pool = own if own and self.rng.random() < 0.5 else self.pointer_free
        for _ in range(20):
            sentence = self.rng.choice(pool)
            if sentence not in claim.window:
                return sentence
        return self.rng.choice(self.pointer_free)


def document_sentences(doc: Document) -> list[str]:
    """A document's sentences in order, once each (its windows overlap by a sentence)."""
    found: list[str] = []
    for window in doc.windows:
        for sentence in sentences_of(window):
            if not found or found[-1] != sentence:
                found.append(sentence)
    return found


def close_length(words: int, target: int) -> bool:
    """Whether a passage of `words` words is as long as one of `target`, near enough."""
    return abs(words - target) <= max(MIN_LENGTH_SLACK, LENGTH_TOLERANCE * target)


def length_run(sentences: Sequence[str], target: int) -> list[str] | None:
    """The shortest run of the first sentences that is as long as `target` words, if any."""
    count = 0
    for end, sentence in enumerate(sentences, 1):
        count += len(sentence.split())
        if close_length(count, target):
            return list(sentences[:end])
        if count > target:
            return None
    return None


def pseudo_question(sentence: str, rng: random.Random) -> str:
    """A question a sentence answers, made of its subject: its option or name if it has one,
    else a few of its content words in order ("What about gc pruneExpire setting?")."""
    named = OPTION.findall(sentence) + NAME.findall(sentence)
    if named:
        subject = rng.choice(named).strip("`")
    else:
        words = [w.strip(".,;:()\"'") for w in sentence.split()]
        content = [w for w in words if len(w) > 3 and tokenize(w)]
        start = rng.randrange(max(1, len(content) - 2))
        subject = " ".join(content[start : start + 3]) or sentence.split()[0]
    return rng.choice(QUESTION_TEMPLATES).format(subject=subject)


def document(key: str, corpus: str, chunks: Sequence[str]) -> Document:
    """A document from its chunks' texts, in order, each cut into windows."""
    return Document(key, corpus, tuple(w for c in chunks for w in passage_windows(c)))


@dataclass(frozen=True)
class Table:
    """A table of a page: its caption (or the heading above it), headers and rows of cells."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def row_text(table: Table, row: Sequence[str]) -> str:
    """A row read alone with its headers: "Caption: Name bigint · Storage Size 8 bytes"."""
    cells = " · ".join(f"{h} {c}" for h, c in zip(table.headers, row, strict=False) if c)
    return f"{table.caption}: {cells}" if table.caption else cells


def plain_rows(table: Table, rows: Sequence[Sequence[str]]) -> str:
    """Rows as a page's text shows them: the header line, then cells separated by spaces."""
    return "\n".join([" ".join(table.headers), *(" ".join(r) for r in rows)])


ROW_TEMPLATES = (
    "The {header} of {key} is {value}.",
    "{key} has a {header} of {value}.",
    "For {key}, the {header} is {value}.",
    "The {key} {header} is {value}.",
    "{key}: {value}.",
)
ROW_QUESTIONS = (
    "What is the {header} of {key}?",
    "Which {header} does {key} have?",
    "What {header} has {key}?",
)


@dataclass(frozen=True)
class RowClaims:
    """Sentences about one column of a table's rows, all read as one layout (the row alone
    with its headers, or as the page's text shows it) and asked about one row."""

    table: Table
    column: int
    template: str
    labelled: bool  # "Name bigint · Storage Size 8 bytes" rather than the page's text
    question: str
    unit: str
    corpus: str

    def sentence(self, row: Sequence[str], value: str | None = None) -> str:
        header = self.table.headers[self.column].lower() or "value"
        cell = row[self.column] if value is None else value
        return self.template.format(header=header, key=row[0], value=cell)

    def passage(self, *rows: Sequence[str]) -> str:
        if self.labelled:
            return "\n".join(row_text(self.table, row) for row in rows)
        return plain_rows(self.table, rows)

    def pair(self, sentence: str, passage: str, label: float, origin: str) -> SupportPair:
        query = support_input(sentence, "", self.question)
        return SupportPair(query, passage, label, origin, self.unit, self.corpus)


def table_pairs(table: Table, corpus: str, key: str, rng: random.Random) -> Iterator[SupportPair]:
    """Per row and up to two of its columns, asked about that row (`row_pairs`)."""
    for i, row in enumerate(table.rows):
        other = table.rows[(i + 1) % len(table.rows)]
        columns = range(1, len(table.headers))
        for column in rng.sample(columns, min(2, len(columns))):
            if not row[column] or not row[0]:
                continue
            header = table.headers[column].lower() or "value"
            asked = rng.choice(ROW_QUESTIONS).format(header=header, key=row[0])
            template, labelled = rng.choice(ROW_TEMPLATES), rng.random() < 0.6
            claims = RowClaims(table, column, template, labelled, asked, f"{key}:row{i}", corpus)
            yield from row_pairs(claims, row, other, rng)


def row_pairs(
    claims: RowClaims, row: Sequence[str], other: Sequence[str], rng: random.Random
) -> Iterator[SupportPair]:
    """A cell stated from the row alone (1), the same sentence with another row's cell of
    that column (0), the sentence against the next row (0); and, from that row and the
    next read together, this row's cell (1) and the next row's (0: stated, not asked)."""
    column, value = claims.column, row[claims.column]
    claim = claims.sentence(row)
    yield claims.pair(claim, claims.passage(row), 1.0, "table-row")
    others = [r[column] for r in claims.table.rows if r[column] != value]
    if others:
        wrong = claims.sentence(row, rng.choice(others))
        yield claims.pair(wrong, claims.passage(row), 0.0, "table-wrong-cell")
    if other[0] != row[0] and other[column] != value:
        yield claims.pair(claim, claims.passage(other), 0.0, "table-other-row")
        both = claims.passage(*rng.sample([row, other], 2))
        yield claims.pair(claim, both, 1.0, "table-two-rows")
        yield claims.pair(claims.sentence(other), both, 0.0, "table-not-answering")


def cap_typed(pairs: list[SupportPair], rng: random.Random) -> list[SupportPair]:
    """Drop typed errors beyond `TYPED_SHARE` of the negatives that are left."""
    typed = [i for i, p in enumerate(pairs) if p.origin == "typed-error"]
    others = sum(1 for p in pairs if p.label < 0.5) - len(typed)
    allowed = int(TYPED_SHARE * others / (1 - TYPED_SHARE))
    if len(typed) <= allowed:
        return pairs
    dropped = set(rng.sample(typed, len(typed) - allowed))
    return [p for i, p in enumerate(pairs) if i not in dropped]
