"""Text → term ids: stopwords, stemming, whole-word matching, stable hashes, Unicode."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from crag_edge.grading.keywords import (
    batch_terms,
    query_terms,
    rarity_coverage,
    stem,
    term_id,
    tokenize,
)
from crag_edge.kernels import keyword_coverage


def coverage(query: str, *texts: str) -> list[float]:
    offsets, ids = batch_terms(texts)
    return keyword_coverage(query_terms(query), offsets, ids).tolist()


def test_stopwords_and_punctuation_are_dropped() -> None:
    assert tokenize("What is the capital of France?") == ["capital", "franc"]
    assert tokenize("It's THE end, isn't it?") == ["end"]
    assert query_terms("the of and to").size == 0
    assert query_terms("").size == 0


@pytest.mark.parametrize(
    ("words", "stem_"),
    [
        (["cat", "cats"], "cat"),
        (["run", "runs", "running"], "run"),
        (["study", "studies"], "studi"),
        (["make", "making"], "make"),
        (["match", "matches"], "match"),
        (["box", "boxes"], "box"),
        (["class", "classes"], "class"),
        (["control", "controlling", "controlled"], "control"),
        (["hope", "hoped", "hoping"], "hope"),
    ],
)
def test_inflections_share_a_stem(words: list[str], stem_: str) -> None:
    assert {stem(w) for w in words} == {stem_}


def test_whole_words_only() -> None:
    assert coverage("cat", "a category of concatenated catalogues") == [0.0]
    assert coverage("cat", "two cats sat") == [1.0]
    assert coverage("cats sleeping", "the cat sleeps", "sleep", "scatter") == [1.0, 0.5, 0.0]


def test_term_ids_are_stable_across_processes() -> None:
    # BLAKE2b-64 of b"cat", little-endian signed: independent of PYTHONHASHSEED and platform.
    assert term_id("cat") == 3429664268601861939
    assert term_id("cat") == int.from_bytes(
        bytes.fromhex("3327dd2c7b9d982f"), "little", signed=True
    )
    assert query_terms("Cats!").tolist() == [3429664268601861939]


def test_unicode() -> None:
    assert tokenize("Straße STRASSE") == ["strass", "strass"]  # case folding
    assert tokenize("ﬁle") == ["file"]  # NFKC ligature
    assert tokenize("Café naïve Ärzte") == ["café", "naïve", "ärzte"]  # not stemmed
    assert tokenize("東京タワー 2019 x2") == ["東京タワー", "2019", "x2"]
    assert tokenize("snake_case") == ["snake", "case"]
    assert coverage("ärzte café", "Die Ärzte im Café") == [1.0]


def test_batch_terms_layout() -> None:
    offsets, ids = batch_terms(["cat cat dog", "", "the", "dog bird"])
    assert offsets.dtype == np.int64 and ids.dtype == np.int64
    assert offsets.tolist() == [0, 2, 2, 2, 4]
    assert set(ids[0:2].tolist()) == {term_id("cat"), term_id("dog")}
    empty_offsets, empty_ids = batch_terms([])
    assert empty_offsets.tolist() == [0] and empty_ids.size == 0


@given(st.lists(st.text(max_size=60), max_size=8))
def test_batch_items_are_sorted_unique_and_match_query_terms(texts: list[str]) -> None:
    offsets, ids = batch_terms(texts)
    assert offsets[0] == 0 and len(offsets) == len(texts) + 1
    for i, text in enumerate(texts):
        item = ids[offsets[i] : offsets[i + 1]]
        assert np.all(item[1:] > item[:-1])  # np.diff would overflow
        assert item.tolist() == query_terms(text).tolist()


@pytest.mark.parametrize("length", [4, 5000])
def test_a_word_of_any_length_is_stemmed_by_the_same_rules(length: int) -> None:
    """A document may hold a word of thousands of letters (a run of "y", whose kind depends
    on the letter before it): it is stemmed like a short one, and the passage still graded."""
    assert stem("y" * length + "ing") == "y" * (length - 1) + "i"
    assert coverage("bees", f"Bees dance. {'y' * length}ing") == [1.0]


def test_rarity_coverage_weighs_a_word_every_text_shares_least() -> None:
    """On git-archive's page "git" and "archive" fill most sentences: plain coverage ties the
    one naming the formats with those holding only the page's name, rarity ranks it first."""
    page = [f"git archive {option} is an option." for option in ("--prefix", "-o", "-v")]
    formats = "It can write these formats: tar, zip, tar.gz and tgz."
    texts = [*page, "git archive behaves differently when given a tree ID.", formats]
    question = "Which archive formats can git archive write?"
    assert coverage(question, *texts) == [0.5] * len(texts)
    weighted = rarity_coverage(question, texts).tolist()
    assert weighted[-1] > weighted[0] == weighted[1] == weighted[3]
    assert rarity_coverage(question, ["tar and zip"]).tolist() == [0.0]
    assert rarity_coverage("the of and", texts).tolist() == [0.0] * len(texts)
