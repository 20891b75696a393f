"""The support model's pair recipes and how it reads a passage (windows of whole sentences)."""

from __future__ import annotations

import itertools
import random

from crag_edge.models.support_model import SEPARATOR, passage_windows, support_input
from crag_edge.training.support_data import (
    Document,
    DocumentRecipes,
    SupportPair,
    Table,
    cap_typed,
    paraphrase,
    row_text,
    sentences_of,
    table_pairs,
    typed_error,
)

GC = (
    "Running git gc removes unreachable loose objects. By default, git gc keeps them for "
    "2 weeks (the gc.pruneExpire setting). It also packs refs into a single file. "
    "The --aggressive option optimizes the repository more at the cost of time."
)
CLEAN = (
    "The git clean command removes untracked files from the working tree. "
    "With the -d option it removes untracked directories too. "
    "This is useful to start a build from a clean tree. "
    "The -n option only shows what would be done."
)


def test_windows_hold_every_sentence_and_each_starts_with_the_last_of_the_one_before() -> None:
    text = " ".join(f"Sentence number {i} has exactly seven words." for i in range(40))
    windows = passage_windows(text, words=30)
    assert len(windows) > 1
    assert all(len(w.split()) <= 30 for w in windows)
    for before, after in itertools.pairwise(windows):
        assert sentences_of(after)[0] == sentences_of(before)[-1]
    assert {s for w in windows for s in sentences_of(w)} == set(sentences_of(text))


def test_the_sentence_before_is_read_first_and_only_when_there_is_one() -> None:
    assert support_input("It packs refs.", "Running git gc removes objects.") == (
        f"Running git gc removes objects.{SEPARATOR}It packs refs."
    )
    assert support_input("It packs refs.", "  ") == "It packs refs."


def test_a_paraphrase_says_no_more_than_the_sentence() -> None:
    sentence = "By default, git gc keeps them for 2 weeks (the gc.pruneExpire setting)."
    made = {paraphrase(sentence, random.Random(seed)) for seed in range(20)}
    assert "Git gc keeps them for 2 weeks (the gc.pruneExpire setting) by default." in made
    assert "By default, git gc keeps them for 2 weeks." in made
    assert paraphrase("Nothing here can be reworded at all.", random.Random(0)) is None


def test_a_typed_error_changes_one_fact_so_the_passage_no_longer_holds_it() -> None:
    rng = random.Random(3)
    for _ in range(10):
        wrong = typed_error("It keeps them for 2 weeks.", GC, ["--bare"], rng)
        assert wrong is not None and wrong != "It keeps them for 2 weeks."
    changed = typed_error("The --aggressive option is slow.", GC, ["--aggressive", "--bare"], rng)
    assert changed in ("The --bare option is slow.", "The --aggressive option is not slow.")


def test_recipes_label_what_the_passage_states_and_what_it_does_not() -> None:
    docs = [Document("gc", "git", (GC,)), Document("clean", "git", (CLEAN,))]
    pairs = list(DocumentRecipes(docs, seed=5).pairs(per_window=4))
    origins = {p.origin for p in pairs}
    assert {"removed", "out-of-context", "in-context"} <= origins
    for pair in pairs:
        claim = pair.query.split(SEPARATOR)[-1]
        if pair.origin == "removed":
            assert pair.label == 0.0 and claim not in pair.passage
        if pair.origin in ("sentence", "in-context", "out-of-context"):
            assert claim in pair.passage
        if pair.origin == "out-of-context":  # a pointer read after another document's sentence
            previous = pair.query.split(SEPARATOR)[0]
            assert pair.label == 0.0 and previous not in pair.passage


def test_a_table_row_is_read_alone_with_its_headers() -> None:
    table = Table(
        "Numeric Types",
        ("Name", "Storage Size", "Range"),
        (("smallint", "2 bytes", "-32768 to +32767"), ("bigint", "8 bytes", "large")),
    )
    assert row_text(table, table.rows[1]) == (
        "Numeric Types: Name bigint · Storage Size 8 bytes · Range large"
    )
    pairs = list(table_pairs(table, "pg", "numeric", random.Random(0)))
    stated = [p for p in pairs if p.label == 1.0]
    wrong = [p for p in pairs if p.origin == "table-wrong-cell"]
    assert stated and wrong
    for pair in wrong:  # the other row's cell, against this row
        assert any(cell in pair.query for cell in ("2 bytes", "8 bytes", "-32768", "large"))


def test_typed_errors_are_at_most_a_quarter_of_the_negatives() -> None:
    def pair(origin: str, label: float) -> SupportPair:
        return SupportPair("q", "p", label, origin, "u", "c")

    pairs = [pair("typed-error", 0.0)] * 10 + [pair("removed", 0.0)] * 10 + [pair("s", 1.0)] * 5
    kept = cap_typed(pairs, random.Random(0))
    negatives = [p for p in kept if p.label == 0.0]
    assert sum(p.origin == "typed-error" for p in kept) == 3 <= len(negatives) / 4
    assert sum(p.origin == "removed" for p in kept) == 10
