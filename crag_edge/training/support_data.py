"""Pairs that teach the support model whether a passage states a sentence, made without an LLM.

Each recipe takes a passage window (as `support_model.passage_windows` cuts a chunk) and one
of its sentences, the claim:

- **stated**: the claim (or a rule-based paraphrase of it: a parenthesis or a trailing
  clause dropped, an opening phrase moved to the end, a verb swapped for a synonym) against
  its window; the claim after a sentence that has nothing to do with it, when it does not
  point back (the sentence before does not change what it says).
- **removed** (MiniCheck's hard negative): the claim against its window with the claim taken
  out, when what is left no longer holds most of its terms.
- **typed error** (TinyLettuce): the claim with one fact changed (a number, an option, a
  name, a negation, a condition) against its own window; at most a quarter of the negatives.
- **neighbour**: the claim against the next window of its document, which shares its topic.
- **out of context**: a claim that points back ("This option …"), read after a sentence of
  another document: its words are the passage's own, and it still says something else.
- **table rows**: a row read alone with its headers ("Name bigint · Storage Size 8 bytes"),
  and a sentence stating one of its cells ("The Storage Size of bigint is 8 bytes.") or
  another row's cell in its place.

Every pair carries its `unit` (the document or the claim it came from) and its `corpus`, so
a corpus can be held out whole.
"""

from __future__ import annotations

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
    terms = set(tokenize(claim))
    return len(terms & set(tokenize(passage))) / len(terms) if terms else 0.0


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


class DocumentRecipes:
    """The recipes over the windows of a corpus's documents (seeded, so reruns agree)."""

    def __init__(self, documents: Sequence[Document], seed: int) -> None:
        self.documents = list(documents)
        self.names = corpus_names(self.documents)
        self.rng = random.Random(seed)
        self.pointer_free = [
            s for d in self.documents for w in d.windows for s in sentences_of(w)
            if is_claim(s) and not refers_back(s)
        ]  # fmt: skip

    def pairs(self, per_window: int = 1) -> Iterator[SupportPair]:
        for doc in self.documents:
            for index, window in enumerate(doc.windows):
                claims = [s for s in sentences_of(window) if is_claim(s)]
                for claim in self.rng.sample(claims, min(per_window, len(claims))):
                    yield from self._claim_pairs(doc, index, window, claim)

    def _claim_pairs(
        self, doc: Document, index: int, window: str, claim: str
    ) -> Iterator[SupportPair]:
        def pair(query: str, passage: str, label: float, origin: str) -> SupportPair:
            return SupportPair(query, passage, label, origin, doc.key, doc.corpus)

        rng = self.rng
        stated = paraphrase(claim, rng) if rng.random() < 0.6 else None
        yield pair(stated or claim, window, 1.0, "paraphrase" if stated else "sentence")
        previous = self._previous(window, claim)
        if refers_back(claim) and previous:
            yield pair(support_input(claim, previous), window, 1.0, "in-context")
            yield pair(support_input(claim, self._elsewhere(doc)), window, 0.0, "out-of-context")
        elif rng.random() < 0.3:
            yield pair(support_input(claim, self._elsewhere(doc)), window, 1.0, "after-other")
        left = window.replace(claim, " ").strip()
        if len(left.split()) >= MIN_CLAIM_WORDS and coverage(claim, left) <= LEFT_SHARE:
            yield pair(claim, left, 0.0, "removed")
        if rng.random() < 0.5:
            wrong = typed_error(claim, window, self.names, rng)
            if wrong:
                yield pair(wrong, window, 0.0, "typed-error")
        neighbour = doc.windows[index + 1] if index + 1 < len(doc.windows) else None
        if neighbour and claim not in neighbour and coverage(claim, neighbour) <= LEFT_SHARE:
            yield pair(claim, neighbour, 0.0, "neighbour")

    def _previous(self, window: str, claim: str) -> str:
        sentences = sentences_of(window)
        at = sentences.index(claim) if claim in sentences else 0
        return sentences[at - 1] if at > 0 else ""

    def _elsewhere(self, doc: Document) -> str:
        """A sentence of another document, which the claim cannot be about."""
        for _ in range(20):
            sentence = self.rng.choice(self.pointer_free)
            if not any(sentence in w for w in doc.windows):
                return sentence
        return self.rng.choice(self.pointer_free)


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


def table_pairs(table: Table, corpus: str, key: str, rng: random.Random) -> Iterator[SupportPair]:
    """Per row and up to two of its columns: a cell stated from the row alone (1), the same
    sentence with another row's cell of that column (0), and the sentence against the next
    row (0)."""
    for i, row in enumerate(table.rows):
        alone = row_text(table, row) if rng.random() < 0.6 else plain_rows(table, [row])
        other = table.rows[(i + 1) % len(table.rows)]
        unit = f"{key}:row{i}"
        columns = range(1, len(table.headers))
        for column in rng.sample(columns, min(2, len(columns))):
            value = row[column]
            others = [r[column] for r in table.rows if r[column] != value]
            if not value or not row[0]:
                continue
            template = rng.choice(ROW_TEMPLATES)
            header = table.headers[column].lower() or "value"
            claim = template.format(header=header, key=row[0], value=value)
            yield SupportPair(claim, alone, 1.0, "table-row", unit, corpus)
            if others:
                wrong = template.format(header=header, key=row[0], value=rng.choice(others))
                yield SupportPair(wrong, alone, 0.0, "table-wrong-cell", unit, corpus)
            if other[0] != row[0] and other[column] != value:
                yield SupportPair(
                    claim, row_text(table, other), 0.0, "table-other-row", unit, corpus
                )


def cap_typed(pairs: list[SupportPair], rng: random.Random) -> list[SupportPair]:
    """Drop typed errors beyond `TYPED_SHARE` of the negatives that are left."""
    typed = [i for i, p in enumerate(pairs) if p.origin == "typed-error"]
    others = sum(1 for p in pairs if p.label < 0.5) - len(typed)
    allowed = int(TYPED_SHARE * others / (1 - TYPED_SHARE))
    if len(typed) <= allowed:
        return pairs
    dropped = set(rng.sample(typed, len(typed) - allowed))
    return [p for i, p in enumerate(pairs) if i not in dropped]
