"""The words of a text as keyword coverage compares them: text → hashed term ids.

Keyword coverage must compare *words*, not substrings ("cat" must not hit "category"), and
must survive light inflection ("cats" should hit "cat"). Text is NFKC-normalised, case-folded
and split into Unicode word tokens; English stopwords are dropped; plain ASCII words get
Porter's steps 1a-1c and 5 (plurals, -ed/-ing, y→i, final -e, -ll); every term is hashed
to a stable signed 64-bit id (BLAKE2b, 8 bytes — never Python's salted ``hash()``) so that
ids can be stored at ingest time and compared across processes.

Words in other scripts are kept as whole tokens without stemming; scripts written without
spaces (Chinese, Japanese) therefore yield one token per run of characters.

This is the one word tokenizer of grading and of the answer's checks. Full-text search cuts
text with FTS5's own tokenizer instead (`store.fts_terms`): its terms must be the SQLite
index's, while the grading signals' weights and calibration were fitted on these words
(stopwords out, light stems), so each keeps its own.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Iterable, Sequence

import numpy as np
import numpy.typing as npt

from crag_edge.kernels import keyword_coverage

__all__ = [
    "STOPWORDS",
    "batch_terms",
    "coverage",
    "query_terms",
    "rarity_coverage",
    "stem",
    "term_id",
    "tokenize",
]

_WORD = re.compile(r"[^\W_]+")
_ASCII_WORD = re.compile(r"[a-z]+")
_VOWELS = frozenset("aeiou")

# English function words (NLTK's list plus contraction fragments such as the "s" of "it's"),
# matched against case-folded tokens before stemming.
_STOPWORD_LIST = """
    a about above after again against ain all am an and any are aren as at be because been
    before being below between both but by can couldn d did didn do does doesn doing don
    down during each few for from further had hadn has hasn have haven having he her here
    hers herself him himself his how i if in into is isn it its itself just ll m ma me
    mightn more most mustn my myself needn no nor not now o of off on once only or other
    our ours ourselves out over own re s same shan she should shouldn so some such t than
    that the their theirs them themselves then there these they this those through to too
    under until up ve very was wasn we were weren what when where which while who whom why
    will with won wouldn y you your yours yourself yourselves
"""
STOPWORDS: frozenset[str] = frozenset(_STOPWORD_LIST.split())


def _consonants(word: str) -> list[bool]:
    """Which letters of `word` are consonants; a "y" is one at the start or after a vowel.
    One pass from the left: a "y" depends on the letter before it, and asking letter by
    letter would recurse once per "y" of a long run (a hostile word of thousands of them)."""
    kinds: list[bool] = []
    for char in word:
        kinds.append((not kinds or not kinds[-1]) if char == "y" else char not in _VOWELS)
    return kinds


def _measure(stem: str) -> int:
    """Porter's m: the number of vowel→consonant transitions in the stem."""
    m, previous_vowel = 0, False
    for consonant in _consonants(stem):
        if consonant and previous_vowel:
            m += 1
        previous_vowel = not consonant
    return m


def _has_vowel(stem: str) -> bool:
    return not all(_consonants(stem))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _consonants(word)[-1]


def _ends_cvc(word: str) -> bool:
    """Consonant-vowel-consonant ending, last letter not w/x/y (Porter's *o)."""
    kinds = _consonants(word)
    return len(word) >= 3 and kinds[-3:] == [True, False, True] and word[-1] not in "wxy"


def _step_1a(word: str) -> str:
    if word.endswith("sses") or word.endswith("ies"):
        return word[:-2]
    if word.endswith("ss"):
        return word
    if word.endswith("s"):
        return word[:-1]
    return word


def _step_1b(word: str) -> str:
    if word.endswith("eed"):
        return word[:-1] if _measure(word[:-3]) > 0 else word
    for suffix in ("ed", "ing"):
        if word.endswith(suffix) and _has_vowel(word[: -len(suffix)]):
            word = word[: -len(suffix)]
            break
    else:
        return word
    if word.endswith(("at", "bl", "iz")):
        return word + "e"
    if _ends_double_consonant(word) and word[-1] not in "lsz":
        return word[:-1]
    if _measure(word) == 1 and _ends_cvc(word):
        return word + "e"
    return word


def _step_1c(word: str) -> str:
    if word.endswith("y") and _has_vowel(word[:-1]):
        return word[:-1] + "i"
    return word


def _step_5(word: str) -> str:
    """Drop a final -e and undouble a final -ll, so "matches"/"match" and "controlling"/"control"
    meet at the same stem after step 1."""
    if word.endswith("e"):
        m = _measure(word[:-1])
        if m > 1 or (m == 1 and not _ends_cvc(word[:-1])):
            word = word[:-1]
    if word.endswith("ll") and _measure(word) > 1:
        word = word[:-1]
    return word


def stem(word: str) -> str:
    """Light Porter stem of a case-folded ASCII word; other words are returned unchanged."""
    if len(word) <= 2 or not _ASCII_WORD.fullmatch(word):
        return word
    return _step_5(_step_1c(_step_1b(_step_1a(word))))


def tokenize(text: str) -> list[str]:
    """The terms of ``text`` in order (with repeats): normalised, stopwords removed, stemmed."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return [stem(token) for token in _WORD.findall(folded) if token not in STOPWORDS]


def term_id(term: str) -> int:
    """Stable signed 64-bit id of a term: the same in every process and on every platform."""
    digest = hashlib.blake2b(term.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def _sorted_unique_ids(text: str, known: dict[str, int]) -> list[int]:
    ids: set[int] = set()
    for term in set(tokenize(text)):
        tid = known.get(term)
        if tid is None:
            tid = known[term] = term_id(term)
        ids.add(tid)
    return sorted(ids)


def query_terms(text: str) -> npt.NDArray[np.int64]:
    """Sorted unique term ids of a query (empty when it has only stopwords or no words)."""
    return np.array(_sorted_unique_ids(text, {}), dtype=np.int64)


def batch_terms(texts: Iterable[str]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Term ids of many texts in CSR form: item i owns ``ids[offsets[i]:offsets[i + 1]]``.

    Each item's ids are unique and sorted ascending so kernels can binary-search them.
    """
    known: dict[str, int] = {}
    offsets = [0]
    flat: list[int] = []
    for text in texts:
        flat.extend(_sorted_unique_ids(text, known))
        offsets.append(len(flat))
    return np.array(offsets, dtype=np.int64), np.array(flat, dtype=np.int64)


def coverage(query: str, texts: Sequence[str]) -> npt.NDArray[np.float64]:
    """Share of the query's terms each text holds (the keyword-coverage kernel's score)."""
    offsets, ids = batch_terms(texts)
    return keyword_coverage(query_terms(query), offsets, ids)


def rarity_coverage(query: str, texts: Sequence[str]) -> npt.NDArray[np.float64]:
    """Share of the query's terms each text holds, each term weighted by how few of `texts`
    hold it (log(1 + n / (1 + texts holding it)), n the number of texts).

    Ranking the sentences of the evidence kept for one question, a word most of them share
    (the page's subject: "git", "archive" on git-archive's page) says nothing about which one
    answers, while plain coverage counts it like the word that does ("formats"); on a short
    question a few words make a few score levels, and the subject's sentences fill them."""
    asked = set(tokenize(query))
    held = [set(tokenize(text)) & asked for text in texts]
    n = len(texts)
    weight = {term: math.log1p(n / (1 + sum(term in terms for terms in held))) for term in asked}
    total = sum(weight.values())
    if not total:
        return np.zeros(n, dtype=np.float64)
    return np.array([sum(weight[t] for t in terms) / total for terms in held], dtype=np.float64)
