"""The support model's pair recipes and how it reads a passage (windows of whole sentences)."""

from __future__ import annotations

import itertools
import random
import statistics
from pathlib import Path

from tokenizers import Tokenizer

from crag_edge.config import IngestSettings
from crag_edge.grading.auc import roc_auc
from crag_edge.ingest.chunker import Chunker
from crag_edge.models.support_model import SEPARATOR, passage_windows, support_input
from crag_edge.training.support_data import (
    Document,
    DocumentRecipes,
    SupportPair,
    Table,
    cap_typed,
    close_length,
    document,
    paraphrase,
    row_text,
    sentences_of,
    table_pairs,
    typed_error,
)

SAMPLE_CORPUS = Path(__file__).resolve().parent.parent / "sample_corpus"
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


def test_a_question_is_read_first_and_each_part_keeps_its_place() -> None:
    asked = support_input("It packs refs.", "", "What does gc do?")
    assert asked == f"What does gc do?{SEPARATOR}{SEPARATOR}It packs refs."
    assert asked.split(SEPARATOR) == ["What does gc do?", "", "It packs refs."]
    after = support_input("It packs refs.", "Running gc removes objects.", "What does gc do?")
    assert after.split(SEPARATOR) == [
        "What does gc do?",
        "Running gc removes objects.",
        "It packs refs.",
    ]


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
    assert {"removed", "out-of-context", "not-answering"} <= origins
    for pair in pairs:
        claim = pair.query.split(SEPARATOR)[-1]
        if pair.origin == "removed":
            assert pair.label == 0.0 and claim not in pair.passage
        if pair.origin in ("sentence", "out-of-context"):
            assert claim in pair.passage
        if pair.origin == "out-of-context":  # a pointer read after a sentence from elsewhere
            previous = pair.query.split(SEPARATOR)[-2]
            assert pair.label == 0.0 and previous.strip() not in pair.passage
        if pair.origin == "not-answering":  # stated, asked about another sentence's subject
            assert pair.label == 0.0 and claim in pair.passage


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


def test_having_a_sentence_before_tells_nothing_of_the_label(minilm_dir: Path) -> None:
    """Every pair of a claim is read after the same sentence, so the share stated is about
    the same with a sentence before as without (a quote out of context is the exception)."""
    pairs = list(DocumentRecipes(_sample_documents(minilm_dir), seed=7).pairs(per_window=3))
    read_after = [bool((["", *p.query.split(SEPARATOR)])[-2].strip()) for p in pairs]
    after = [p.label for p, before in zip(pairs, read_after, strict=True) if before]
    alone = [p.label for p, before in zip(pairs, read_after, strict=True) if not before]
    assert len(after) >= 20 and len(alone) >= 20
    assert abs(statistics.mean(after) - statistics.mean(alone)) <= 0.1


def test_a_row_stated_beside_the_asked_row_is_not_an_answer() -> None:
    table = Table(
        "Numeric Types",
        ("Name", "Storage Size"),
        (("smallint", "2 bytes"), ("integer", "4 bytes"), ("bigint", "8 bytes")),
    )
    pairs = list(table_pairs(table, "pg", "numeric", random.Random(1)))
    by_passage: dict[str, list[SupportPair]] = {}
    for pair in pairs:
        if pair.origin in ("table-two-rows", "table-not-answering"):
            by_passage.setdefault(pair.passage, []).append(pair)
    assert by_passage
    for both in by_passage.values():  # one question, two rows: only the asked row answers
        question = both[0].query.split(SEPARATOR)[0]
        assert {p.query.split(SEPARATOR)[0] for p in both} == {question}
        assert {p.label for p in both} == {0.0, 1.0}
        for pair in both:
            asked_row = next(r for r in table.rows if r[0] in question)
            assert (pair.label == 1.0) == (asked_row[1] in pair.query.split(SEPARATOR)[-1])


def _sample_documents(minilm_dir: Path) -> list[Document]:
    """The sample corpus's text files, chunked as ingestion chunks them."""
    chunking = IngestSettings()
    chunker = Chunker(
        Tokenizer.from_file(str(minilm_dir / "tokenizer.json")),
        chunking.chunk_tokens,
        chunking.chunk_overlap,
    )
    return [
        document(path.name, "sample", [span.text for span in chunker.split(path.read_text())])
        for path in sorted(SAMPLE_CORPUS.glob("*"))
        if path.suffix in (".md", ".txt")
    ]


def test_every_negative_is_read_against_a_passage_as_long_as_its_positives(
    minilm_dir: Path,
) -> None:
    """A shorter passage must not tell a negative: by recipe, the passages' mean length is
    the positives', and length alone ranks stated against the rest no better than chance
    (cut out rather than replaced, a removed claim leaves its window a sentence short)."""
    pairs = list(DocumentRecipes(_sample_documents(minilm_dir), seed=7).pairs(per_window=3))
    words = [len(p.passage.split()) for p in pairs]
    positive = [w for w, p in zip(words, pairs, strict=True) if p.label == 1.0]
    by_origin: dict[str, list[int]] = {}
    for w, pair in zip(words, pairs, strict=True):
        if pair.label == 0.0:
            by_origin.setdefault(pair.origin, []).append(w)
    assert {"removed", "neighbour", "not-answering", "typed-error"} <= set(by_origin)
    mean = statistics.mean(positive)
    for origin, lengths in by_origin.items():
        if len(lengths) >= 10:  # a recipe that made a handful of pairs has no mean to speak of
            assert abs(statistics.mean(lengths) - mean) <= 0.15 * mean, origin
    assert 0.4 <= roc_auc([float(w) for w in words], [int(p.label) for p in pairs]) <= 0.6


def test_a_removed_claim_leaves_a_sentence_of_its_length_in_its_place(minilm_dir: Path) -> None:
    pairs = list(DocumentRecipes(_sample_documents(minilm_dir), seed=3).pairs(per_window=3))
    removed = [p for p in pairs if p.origin == "removed"]
    assert removed
    windows = {w for d in _sample_documents(minilm_dir) for w in d.windows}
    for pair in removed:
        claim = pair.query.split(SEPARATOR)[-1]
        window = max(  # the claim's window: the longest of which all but the claim is there
            (
                w for w in windows
                if claim in w and all(s in pair.passage for s in sentences_of(w) if s != claim)
            ),
            key=len,
        )  # fmt: skip
        assert claim not in pair.passage
        assert close_length(len(pair.passage.split()), len(window.split()))


def test_typed_errors_are_at_most_a_quarter_of_the_negatives() -> None:
    def pair(origin: str, label: float) -> SupportPair:
        return SupportPair("q", "p", label, origin, "u", "c")

    pairs = [pair("typed-error", 0.0)] * 10 + [pair("removed", 0.0)] * 10 + [pair("s", 1.0)] * 5
    kept = cap_typed(pairs, random.Random(0))
    negatives = [p for p in kept if p.label == 0.0]
    assert sum(p.origin == "typed-error" for p in kept) == 3 <= len(negatives) / 4
    assert sum(p.origin == "removed" for p in kept) == 10
