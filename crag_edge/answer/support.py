"""Whether the context states an answer's sentence: the support check's scores.

A small generator adds facts from its own memory, explains one product with another's
passage, or cites a passage that says something else. So every sentence of an answer is
checked against the passages before a reader sees it, cheapest signal first:

- **terms**: the share of the sentence's content terms (stemmed, stopwords dropped, as
  keyword coverage counts them) that one passage holds, and whether every number and name
  the sentence states appears in the context. A number or a name no passage holds (a port,
  a version, another product, a command written as code) makes it unsupported at once;
  a sentence that copies a passage word for word (its citations and a closing "as stated
  in" aside; a table row's words are its cells in order) is supported without asking,
  since the small judge scores even a verbatim copy below its threshold now and then;
  otherwise the share decides alone only for a sentence the LLM could not check in time
  (`support_terms_accept`), since a sentence can hold every term of a passage and still say
  the opposite ("If not, X" of a passage saying "if so, X"). A number the question itself
  states is the reader's, not the model's, so it is never missing.
- **located**: the passages that hold every fact the sentence states (its numbers, in
  digits or words, names and command-line options, at least one of them beyond the
  question's own words), every word of it that turns its meaning (not, if, unless, …) and
  at least `LOCATED_SHARE` of its content terms. The judge scores one statement nearly alike
  against every passage of the context (a sentence's P(yes) varies far less from passage to
  passage than from sentence to sentence: measured in docs/answer-quality.md), so its
  score says how plausible the sentence is more than where it is stated; a located
  sentence has been found by the cheap tier, and the judge need only not doubt it
  (`support_threshold_located`).
- **llm**: the local LLM asked whether one passage states the sentence, scored as the
  judge scores relevance, P(yes) / (P(yes) + P(no)) over its first token, no generation.
  The prompt opens with the answer prompt's own system turn; the judge then reads passage
  n's sentence (a table's row) holding most of the sentence's terms with its neighbours
  (`judged_part`), where a small judge reads whether the lines state the sentence instead of
  how plausible it sounds (`support_judge_reads`; with `context` it reads every passage, the
  KV cache the answer left behind is reused and each check evaluates only the statement and
  the question). The located passage is asked first, then the cited one, then the one
  holding most of the sentence's terms.
"""

from __future__ import annotations

import math
import re
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace

from crag_edge.answer.definitions import pairs_with_definition
from crag_edge.answer.generation import CONTEXT_OPENING, SYSTEM, passages_text
from crag_edge.answer.subject import unnamed_subject
from crag_edge.answer.table_rows import misplaced, restates_row
from crag_edge.config import JudgeReads
from crag_edge.grading.keywords import STOPWORDS, tokenize
from crag_edge.ingest.formats.builder import record_values
from crag_edge.models.chat_model import ChatModel, LlmCallError, Message
from crag_edge.result import ContextItem
from crag_edge.sentences import sentence_spans

CHECK_USER = CONTEXT_OPENING + (
    "{passages}\n\nStatement: {statement}\n\n"
    "Does passage [{n}] state what this statement says? Answer Yes or No."
)
ANSWERS = ("yes", "no")
CITATION = re.compile(r"\s*\[(\d+)\]")
# A number (with its decimals) or a version: the facts a model most often gets wrong from memory.
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")
# A name: a word written as code, or capitalised inside a sentence (a product, a company, a
# feature's proper name). The model brings names from memory as it brings numbers: asked about
# another product, it names that product beside a passage about this one.
WORD = re.compile(r"[^\W\d_][\w-]*")
CODE = re.compile(r"`([^`]+)`")
# A command-line option ("-d", "--bare"): a fact as a number is, the one a question about a
# command most often asks for.
OPTION = re.compile(r"(?<![\w-])--?[^\W\d_][\w-]*")
# A literal written with symbols inside it (a format string `%(process)d`, a network
# `192.168/24`, a path `~/.config`, `1/mu^2`): a fact as a whole, which its numbers and words
# apart do not say ("192.168/24" is not "192.168.0/24", though both hold 192.168 and 24).
LITERAL_SYMBOLS = frozenset("%/=<>@$^~{}[]*+#|\\:()")
# A symbol a sentence names in quotes (the struct prefix '!', the `@` character): a name as a
# word in quotes is, held by a passage only where it stands alone there ("Character: !;").
QUOTED_SYMBOL = re.compile(
    r"['\"`\u2018\u201c]([^\w\s'\"`\u2018\u2019\u201c\u201d]{1,3})['\"`\u2019\u201d]"
)
# The quotes around a token, straight or curly, and the punctuation a sentence puts after one.
QUOTES = "'\"`\u2018\u2019\u201c\u201d"
TRAILING = ",;:.!?"
# A reference to a place in the documents ("Table 8.22", "Section 9.8"): where an answer is,
# as a citation is, never what it says.
REFERENCE = re.compile(
    r"\b(?:table|section|chapter|figure|appendix|page|example|row|column)s?\s+\d[\w.]*\b",
    re.IGNORECASE,
)
# The share of a sentence's content terms a passage must hold, beside its every fact, for the
# sentence to count as located there: its facts with most of its words, not a stray number.
LOCATED_SHARE = 0.75
# A number written as a word ("two minutes", "four thousand hours") is a fact as "2" is.
NUMBER_WORDS = frozenset(
    {
        *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"),
        *("ten", "eleven", "twelve", "twenty", "thirty", "forty", "fifty", "sixty"),
        *("hundred", "thousand", "million", "billion"),
    }
)
# Words that turn what a sentence says (a negation, a condition) and that content terms do
# not count: "If not, X" holds every term of a passage saying "X when …" and every fact.
TURNING_WORDS = frozenset(
    {
        *("not", "no", "never", "none", "nor", "without", "cannot", "can't", "don't"),
        *("doesn't", "isn't", "aren't", "won't", "if", "unless", "only", "except"),
    }
)
# Words as a quote is compared: letters and digits, an apostrophe kept inside a word.
PLAIN_WORD = re.compile(r"\w+(?:'\w+)*")
MIN_QUOTE_WORDS = 5
# A sentence that opens by pointing back ("This command …", "It …", "For example, …", "The
# former …"), or whose opening phrase holds the pointer ("Fuel for it …", "Most of them …"),
# leans on the one before.
BACK_REFERENCE = re.compile(
    r"(?P<holder>(?:(?:the|a|an)\s+)?[^\W\d_][\w-]*\s+(?:for|of|in|on|from|with|to|about)\s+)?"
    r"(?:this|that|these|those|it|its|they|their|them|such|here|for (?:example|instance)"
    r"|the (?:former|latter|same))\b",
    re.IGNORECASE,
)
# Words a sentence uses to speak of the passages rather than of what was asked ("This is the
# evidence from [2].", "The passages state this."): a sentence made of nothing else tells the
# reader nothing and is not shown. Stemmed as the terms are.
META_WORDS = (
    "evidence passage context document documentation source stated statement mention "
    "information provided sufficient insufficient answer question cite citation according "
    "refer based given described explained text said specified found shown following noted "
    "section manual defined located listed"
)
META_TERMS = frozenset(tokenize(META_WORDS))
# Whether the corpus (as the caller may see it) names a word anywhere.
Mentioned = Callable[[str], bool] | None
# A passage the model cites is asked first when it holds at least this part of the share of
# the sentence's terms that the best passage holds: a cited page holding a few of its terms
# beside the page that states it is not asked first (the case in docs/answer-quality.md).
CITED_SHARE = 0.5
# Two passages at most per sentence: its cited one (or the one with most of its terms), then
# the best other; each costs a prompt of the LLM (timed in docs/answer-quality.md).
MAX_CANDIDATES = 2


@dataclass(frozen=True)
class SentenceSupport:
    """One sentence of an answer and its check: `score` is the best passage's support
    score, `passage` that passage's number (None when no passage is near), `cited` the
    numbers the model wrote after it, `checked_by` the tier or rule that decided (`terms`: a
    number or name no passage holds; `quote`: a passage's own words; `repeat`; `meta`: says
    nothing of its own; `llm`; `orphan`: points back to a removed sentence; `pointer`: points
    back to a sentence its passage does not state, or forward to what is not shown;
    `unasked`: answers nothing asked and supports no sentence that does; `budget`: the
    LLM's time ran out and the terms decided; `row-cells`: the cells of a table row the
    question asks about, shown in place of a removed sentence that misstates them or after
    one that states them in part), `shown` whether the reader sees it, `reason` why it was
    removed or flagged (empty when supported), `locator` where a reader checks a supported
    one: its passage's citation, narrowed to the row, slide or page of it that states the
    sentence (`narrowing`)."""

    text: str
    supported: bool
    score: float
    passage: int | None
    cited: tuple[int, ...]
    checked_by: str
    shown: bool
    reason: str = ""
    locator: str | None = None

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"cited": list(self.cited)}


@dataclass(frozen=True)
class TermSupport:
    """The cheap tier's reading of one sentence: each passage's share of its terms, the
    numbers and names it states that no passage holds, and whether it says nothing of its
    own (no content terms, or only words that speak of the passages)."""

    shares: dict[int, float]
    missing: tuple[str, ...]
    terms: int
    meta: bool = False
    quoted: int | None = None
    located: tuple[int, ...] = ()

    def best(self) -> tuple[int | None, float]:
        if not self.shares:
            return None, 0.0
        n = max(self.shares, key=lambda k: self.shares[k])
        return n, self.shares[n]


def claim_text(sentence: str) -> str:
    """The sentence without its citation markers: what is checked."""
    return CITATION.sub("", sentence).strip()


def cited_numbers(sentence: str) -> tuple[int, ...]:
    return tuple(dict.fromkeys(int(m.group(1)) for m in CITATION.finditer(sentence)))


def term_support(
    sentence: str,
    context: Sequence[ContextItem],
    mentioned: Mentioned = None,
    question: str = "",
) -> TermSupport:
    """Per passage, the share of the sentence's content terms it holds; the numbers and
    names the sentence states that appear in no passage (a version, a size, a year, another
    product the model supplied), and the question's subject words it repeats that neither a
    passage nor the corpus names (`subject.unnamed_subject`: "a sailing vessel" of a manual
    that never speaks of sailing); and the passages it is located in (`located`).
    `mentioned` tells whether the corpus names a word anywhere: a name it does (its own
    subject, "SQLite", beside a passage that does not repeat it) is left to the LLM tier; one
    it never names ("Fossil" in a git manual) is the model's."""
    claim = claim_text(sentence)
    terms = set(tokenize(claim))
    shares = {item.n: term_share(terms, set(tokenize(item.text))) for item in context}
    everywhere = " ".join(item.text for item in context)
    # The question's numbers are the reader's; its names are not vouched for (asked about
    # Fossil, the model must not name Fossil beside a passage that never does).
    known = {m.group() for m in NUMBER.finditer(f"{question} {everywhere}")}
    missing = [m.group() for m in NUMBER.finditer(claim) if m.group() not in known]
    words = {w.lower() for w in WORD.findall(everywhere)} | standalone_symbols(everywhere)
    missing += [
        name
        for name in names(claim)
        if name.lower() not in words and not (mentioned is not None and mentioned(name))
    ]
    if mentioned is not None:
        missing += unnamed_subject(claim, question, set(tokenize(everywhere)), mentioned)
    unique: dict[str, str] = {}
    for word in missing:  # once each, as first written
        unique.setdefault(word.lower(), word)
    meta = terms - pointer_terms(claim) <= META_TERMS
    quoted = next((item.n for item in context if quotes(claim, item.text)), None)
    found = located(claim, context, shares, question)
    return TermSupport(shares, tuple(unique.values()), len(terms), meta, quoted, found)


def term_share(terms: set[str], held: set[str]) -> float:
    """The share of a sentence's content `terms` that a passage's terms (`held`) hold. A
    word that speaks of the passages ("as stated in [2]", "found in") counts only where the
    passage holds it: it says where the claim is, not what it is."""
    counted = terms - (META_TERMS - held)
    return len(counted & held) / len(counted) if counted else 0.0


def facts(text: str) -> set[str]:
    """The facts a text states as the model most often supplies them from memory: its
    numbers (in digits or in words), its names, its command-line options and its literals
    (`literals`), in lower case."""
    found = [m.group() for m in NUMBER.finditer(text)] + names(text) + OPTION.findall(text)
    found += literals(text)
    return {fact.lower() for fact in found} | (_plain_words(text) & NUMBER_WORDS)


def literals(text: str) -> list[str]:
    """The tokens of `text` written with symbols inside (`LITERAL_SYMBOLS`), without the
    quotes and punctuation around them, and the functions it writes as calls: a call's
    empty brackets aside, `abbrev()` names the function `abbrev` of a passage writing
    `abbrev(cidr)`, and `dense_rank()` is a fact a passage must hold as a number is."""
    found = []
    for token in text.split():
        token = _token(token)
        call = len(token) > 2 and token.endswith("()")
        token = token.removesuffix("()")
        if any(c.isalnum() for c in token) and (call or LITERAL_SYMBOLS.intersection(token)):
            found.append(token)
    return found


def _token(token: str) -> str:
    """A whitespace-separated token without what surrounds it: quotes, brackets around it or
    with no partner inside it, and a sentence's punctuation after it (a token that is only a
    symbol, "!", keeps it)."""
    token = _trailing(token.strip(QUOTES))
    for opening, closing in ("()", "[]", "{}"):
        if token.startswith(opening) and (token.endswith(closing) or closing not in token):
            token = token[1:]
        if token.endswith(closing) and opening not in token:
            token = token[:-1]
    return _trailing(token).strip(QUOTES)


def _trailing(token: str) -> str:
    """`token` without the punctuation a sentence puts after it, a lone symbol kept."""
    while len(token) > 1 and token[-1] in TRAILING:
        token = token[:-1]
    return token


def standalone_symbols(text: str) -> set[str]:
    """The symbols `text` writes as tokens of their own ("Character: !;", "(= big-endian)",
    "'@'"): where a passage holds a symbol a sentence names (`QUOTED_SYMBOL`)."""
    tokens = (_token(token) for token in text.split())
    return {token for token in tokens if token and not any(c.isalnum() for c in token)}


def located(
    claim: str, context: Sequence[ContextItem], shares: dict[int, float], question: str
) -> tuple[int, ...]:
    """The passages holding every fact of `claim`, every word of it that turns what it says
    (`TURNING_WORDS`) and `LOCATED_SHARE` of its content terms, when at least one of its
    facts is not the question's own (a sentence that only repeats the question's names is
    located nowhere: the answer is what the passage must hold; a reference such as "Table
    8.22" says where, not what), and a table row holds its answer under a column it names
    (`table_rows.misplaced`); or a passage holding its every fact and a table row it
    restates with the row's column names (`table_rows.restates_row`), or a term it defines
    with the words the sentence pairs the term with (`definitions.pairs_with_definition`)."""
    stated_facts = facts(claim)
    answered = answer_facts(claim, question)
    needed = stated_facts | (_plain_words(claim) & TURNING_WORDS)
    return tuple(
        item.n
        for item in context
        if needed <= held_words(item.text)
        and (
            (
                bool(answered)
                and shares[item.n] >= LOCATED_SHARE
                and not misplaced(claim, answered, item.text, facts, held_words)
            )
            or restates_row(claim, question, item.text, facts, held_words)
            or pairs_with_definition(claim, question, item.text)
        )
    )


def answer_facts(claim: str, question: str) -> set[str]:
    """The facts `claim` states beyond the question's own words: what it answers with (a
    reference such as "Table 8.22" says where, not what)."""
    asked = facts(question) | {w.lower() for w in WORD.findall(question)}
    return facts(REFERENCE.sub(" ", claim)) - asked


def unheld_options(claim: str, question: str, passage: str) -> list[str]:
    """The command-line options `claim` names that neither the question nor `passage` (the
    one it is credited to) holds. An option is the fact a small model most often pairs with
    the wrong command ("git reset with the --cached option", `--cached` being git rm's), and
    a judge shown the few lines about the command passes it: the lines never name it."""
    return sorted(options_named(claim) - options_named(question) - held_words(passage))


def swapped_options(claim: str, question: str, item: ContextItem) -> list[str]:
    """The options `claim` names (the question's aside) when the lines of `item` where its
    words are (`judged_part`) name other options and none of its own: "The -s option makes
    git blame ignore whitespace" of the lines about `-w`. The judge reading those lines
    passes the description and misses the option; a sentence naming several options, one
    of them in the lines ("--depth implies --single-branch"), is left to it."""
    own = options_named(claim) - options_named(question)
    lines = judged_part(item, claim).text
    if not own or not options_named(lines) or own & held_words(lines):
        return []
    return sorted(own)


def options_named(text: str) -> set[str]:
    """The command-line options `text` names, in lower case."""
    return {option.lower() for option in OPTION.findall(text)}


def held_words(text: str) -> set[str]:
    """What a fact of a sentence is matched against in a passage (or a row of one): its
    facts and its words, whole (so "10" is not found in "100", nor "-d" in "--dry-run"),
    and the symbols it writes alone."""
    words = {w.lower() for w in WORD.findall(text)} | _plain_words(text)
    return facts(text) | words | standalone_symbols(text)


def _plain_words(text: str) -> set[str]:
    return set(plain_words(text))


def quotes(claim: str, passage: str) -> bool:
    """Whether `claim` is `passage`'s own words, in order (case, punctuation and a closing
    phrase that only points at the passages aside); five words at least, so that a
    fragment ("It is two hours.") is not read as a quote. A table row's words are its cells'
    values as the table shows them, without the column names its record adds
    (`record_values`): "boolean 1 byte state of true or false" quotes the row."""
    words = closing_trimmed(plain_words(claim))
    if len(words) < MIN_QUOTE_WORDS:
        return False
    said = f" {' '.join(words)} "
    return any(
        said in f" {' '.join(plain_words(text))} " for text in (passage, record_values(passage))
    )


def closing_trimmed(words: list[str]) -> list[str]:
    """`words` (`plain_words`) without a closing phrase that only points at the passages
    ("…, as stated in the passage")."""
    end = len(words)
    while end and (words[end - 1] in STOPWORDS or set(tokenize(words[end - 1])) <= META_TERMS):
        end -= 1
    return words[:end]


def quoted_row(claim: str, passage: str) -> str | None:
    """The table row of `passage` whose cells `claim` restates (`quotes`), as its record
    reads with the column names, None when it restates none. The cells alone ("boolean 1
    byte state of true or false") say what they are by the columns they stand under."""
    said = claim_text(claim)
    for line in passage.split("\n"):
        values = record_values(line)
        if values != line and quotes(said, values):
            return line
    return None


def plain_words(text: str) -> list[str]:
    """The words of `text` as a quote is compared: case-folded, an apostrophe kept inside a
    word."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("\u2019", "'")
    return PLAIN_WORD.findall(folded)


def stated(
    terms: TermSupport, scored: tuple[int, float] | None, threshold: float, located: float
) -> bool:
    """The rule a checked sentence passes by: a passage's own words, or the LLM's support
    score for passage n (`scored`: n and its score) of at least `threshold`, or of at least
    `located` once the sentence is located in some passage; never with a number or a name
    no passage holds. The located passage need not be the one scored: every check shows the
    judge the whole context, and its P(yes) for one sentence moves from passage to passage
    whatever they hold (the largest ROWID, written out in one passage, scored under 0.65
    there and 0.68 on another), so the cheap tier says where, and the judge's best score
    over the passages asked says only that it does not doubt the sentence."""
    if terms.missing:
        return False
    if terms.quoted is not None:
        return True
    if scored is None:
        return False
    _, score = scored
    return score >= threshold or (bool(terms.located) and score >= located)


def cited_passage(terms: TermSupport, scored: tuple[int, float], threshold: float) -> int:
    """The passage a stated sentence is cited to: the one scored, unless it passed only for
    being located elsewhere; then the located passage, which holds its facts."""
    n, score = scored
    if score >= threshold or n in terms.located or not terms.located:
        return n
    return terms.located[0]


def names(claim: str) -> list[str]:
    """The words of `claim` that name something: each word written as code, each word
    capitalised after the first (a sentence's first word is capitalised whatever it is),
    and each symbol written in quotes (`QUOTED_SYMBOL`)."""
    coded = [w for span in CODE.findall(claim) for w in WORD.findall(span)]
    capitalised = [w for w in WORD.findall(claim)[1:] if w[0].isupper()]
    symbols = QUOTED_SYMBOL.findall(claim)
    return [w for w in coded + capitalised if len(w) > 1] + symbols


def refers_back(sentence: str) -> bool:
    """Whether the sentence opens by pointing at the one before it ("This command is
    described in [1].", "It also removes …", "Fuel for it is kept …"): shown without it, it
    would lend its subject to a claim the reader cannot see."""
    return _back_reference(sentence) is not None


def pointer_terms(claim: str) -> set[str]:
    """The terms of the words a sentence points back with ("This option", "These
    formats"): what they name is the sentence before, not something this one says. So "This
    option is described in [1]." only speaks of the passages. In "Fuel for it" the pointer
    is "it" alone: the fuel is this sentence's own."""
    pointer = _back_reference(claim)
    if pointer is None or pointer.group("holder"):
        return set()
    return set(tokenize(" ".join(claim.split()[:2])))


def _back_reference(sentence: str) -> re.Match[str] | None:
    return BACK_REFERENCE.match(claim_text(sentence).lstrip("`*\"'("))


def candidates(terms: TermSupport, cited: Sequence[int]) -> list[int]:
    """The passages to ask about, in order: the ones the sentence is located in (a cited one
    first), the cited ones that exist and hold at least half the share of its terms the best
    passage holds, then the rest by that share; at most `MAX_CANDIDATES`. Where its facts and
    words are outranks where the model pointed: a small model cites one passage for what
    another states, the judge passes a sentence nearly alike on any passage, and the first
    passage that passes is the one cited to the reader."""
    ranked = sorted(terms.shares, key=lambda n: -terms.shares[n])
    best = terms.shares[ranked[0]] if ranked else 0.0
    cited_here = [n for n in cited if terms.shares.get(n, -1.0) >= best * CITED_SHARE]
    located = sorted(terms.located, key=lambda n: n not in cited_here)
    ordered = located + cited_here + ranked
    return list(dict.fromkeys(ordered))[:MAX_CANDIDATES]


def check_messages(
    question_context: Sequence[ContextItem],
    statement: str,
    n: int,
    reads: JudgeReads = "context",
) -> list[Message]:
    """The support question for passage `n`, opening as the answer prompt does: over the
    whole context, or (`reads="piece"`) over passage `n`'s part holding the statement's
    words (`judged_part`)."""
    shown = question_context
    if reads == "piece":
        shown = [judged_part(item, statement) for item in question_context if item.n == n]
    user = CHECK_USER.format(passages=passages_text(shown), statement=statement, n=n)
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def judged_part(item: ContextItem, statement: str, around: int = 1) -> ContextItem:
    """`item` cut to its sentence holding the largest share of `statement`'s content terms
    (the first on a tie; a reference such as "Table 8.20" says where, not what, and is not
    counted; a table row holding the statement's values comes first: `_part_key`), with
    `around` sentences either side; a table's row alone, since a row with its
    column names is whole and its neighbours' cells are what a judge mixes up. Asked
    about a passage inside the whole context, the small judge rates how plausible a sentence
    is more than whether that passage states it; shown the few lines where the sentence's
    words are, it reads them (measured in docs/answer-quality.md, "The judge reading where
    the words are")."""
    spans = sentence_spans(item.text) or [(0, len(item.text))]
    claim = claim_text(REFERENCE.sub(" ", statement))
    terms, values = set(tokenize(claim)), _values(claim)
    keys = [_part_key(item.text[a:b], terms, values) for a, b in spans]
    best = keys.index(max(keys))
    start, end = spans[best]
    if _is_row(item.text[start:end]):
        return replace(item, text=item.text[start:end])
    kept = spans[max(0, best - around) : best + around + 1]
    return replace(item, text=" ".join(item.text[a:b] for a, b in kept))


def _values(claim: str) -> set[str]:
    """The values a sentence states as a table's cells write them: its numbers and its
    literals, in lower case."""
    return {m.group().lower() for m in NUMBER.finditer(claim)} | {
        value.lower() for value in literals(claim)
    }


def _part_key(part: str, terms: set[str], values: set[str]) -> tuple[int, float]:
    """How well `part` (a sentence or a row of a passage) holds a statement: a table row by
    the statement's values it holds first, then any part by its share of the statement's
    terms. A row's words are mostly its column names, which every row repeats; asked about
    "%(process)d", the row of the format string passed to the logging call holds more of
    "the format string that puts the process ID into a log record's message" than the row
    holding `%(process)d` does."""
    held = len(values & held_words(part)) if _is_row(part) else 0
    return held, term_share(terms, set(tokenize(part)))


def _is_row(part: str) -> bool:
    return record_values(part) != part


class LlmSupport:
    """The LLM tier: P(yes) that passage n states a statement, for many (statement, n) at
    once, within a deadline; None for a pair not scored in time or when the call failed.
    `reads` is what of the context the judge is shown (`check_messages`)."""

    def __init__(self, runtime: ChatModel, reads: JudgeReads = "context") -> None:
        self._runtime = runtime
        self._reads = reads

    def scores(
        self,
        context: Sequence[ContextItem],
        pairs: Sequence[tuple[str, int]],
        deadline: float,
    ) -> list[float | None]:
        if not pairs:
            return []
        left = deadline - time.monotonic()
        if left <= 0:
            return [None] * len(pairs)
        prompts = [check_messages(context, statement, n, self._reads) for statement, n in pairs]
        try:
            result = self._runtime.answer_logprobs(prompts, ANSWERS, timeout_s=left)
        except LlmCallError:
            return [None] * len(pairs)
        return [None if row is None else _yes_share(*row) for row in result.rows]


def _yes_share(log_yes: float, log_no: float) -> float | None:
    if log_yes == log_no == -math.inf:
        return None
    return 1.0 / (1.0 + math.exp(log_no - log_yes))
