"""Knowledge refinement: strips are whole sentences of a minimum length with absolute offsets,
each scorer ranks the evidence-bearing strip first, overlapping chunks yield each sentence once,
recomposition respects threshold, budget and document order and joins neighbouring strips."""

from __future__ import annotations

import itertools
from dataclasses import replace
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from crag_edge.correction.refine import (
    decompose,
    join_neighbours,
    recompose,
    refine,
    score_strips,
)
from crag_edge.ingest import Chunker
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.sentences import MAX_ITEM_WORDS, MIN_STRIP_CHARS, MIN_STRIP_WORDS, ends_sentence
from crag_edge.types import Chunk, Span

DOCUMENT = (
    "Preface that is not part of the chunk. "
    "Honeybees communicate with a waggle dance. The duration of the waggle run encodes the "
    "distance to the food source! Its angle to the vertical encodes the direction?\n\n"
    "Drones do not forage."
)
CHUNK_START = DOCUMENT.index("Honeybees")
CHUNK = Chunk(
    chunk_id=7,
    doc_id=3,
    ordinal=1,
    text=DOCUMENT[CHUNK_START:],
    start=CHUNK_START,
    end=len(DOCUMENT),
    source="bees.md",
    title="Bees",
)
QUESTION = "How does the waggle dance encode the distance to food?"


def test_sentence_strips_point_into_the_document() -> None:
    strips = decompose(CHUNK, "sentences")
    assert [s.text for s in strips] == [
        "Honeybees communicate with a waggle dance.",
        "The duration of the waggle run encodes the distance to the food source!",
        "Its angle to the vertical encodes the direction?",
        "Drones do not forage.",
    ]
    for strip in strips:
        assert DOCUMENT[strip.start : strip.end] == strip.text
        assert (strip.chunk_id, strip.doc_id, strip.source) == (7, 3, "bees.md")


def test_fixed_windows_and_whole_selection() -> None:
    windows = decompose(CHUNK, "fixed_num", words_per_strip=5)
    assert all(len(s.text.split()) <= 5 for s in windows)
    assert " ".join(s.text for s in windows).split() == CHUNK.text.split()
    for strip in windows:
        assert DOCUMENT[strip.start : strip.end] == strip.text
    (whole,) = decompose(CHUNK, "selection")
    assert whole.text == CHUNK.text.strip() and whole.start == CHUNK_START


def test_blank_chunks_have_no_strips() -> None:
    blank = Chunk(chunk_id=1, doc_id=1, ordinal=0, text="  \n\n ", start=0, end=5, source="x")
    assert decompose(blank, "sentences") == []


@pytest.mark.parametrize("scorer", ["coverage", "embedding", "cross_encoder"])
def test_each_scorer_ranks_the_answering_strip_first(scorer: str, embedder: OnnxEmbedder) -> None:
    strips = decompose(CHUNK, "sentences")
    scores = score_strips(QUESTION, strips, scorer, embedder)  # type: ignore[arg-type]
    assert len(scores) == len(strips) and all(0.0 <= x <= 1.0 for x in scores)
    assert strips[scores.index(max(scores))].text.startswith("The duration of the waggle run")
    assert scores[3] == min(scores)  # drones: no word of the question
    assert score_strips(QUESTION, [], scorer, embedder) == []  # type: ignore[arg-type]


def _strip(source: str, start: int, score: float, text: str = "word word") -> Span:
    chunk = Chunk(1, hash(source) % 100, 0, text, start, start + len(text), source)
    return replace(Span.strip_of(chunk, 0, text), score=score)


def test_recompose_keeps_threshold_budget_and_document_order() -> None:
    strips = [
        _strip("b.md", 50, 0.9),
        _strip("a.md", 10, 0.4),
        _strip("a.md", 0, 0.8),
        _strip("b.md", 0, 0.05),  # below threshold
        _strip("c.md", 0, 0.7, "many words " * 20),  # over the budget left
    ]
    kept = recompose(strips, threshold=0.1, budget_tokens=8, count_tokens=words)
    assert [(s.source, s.start) for s in kept] == [("a.md", 0), ("a.md", 10), ("b.md", 50)]
    assert recompose(strips, threshold=0.95, budget_tokens=8, count_tokens=len) == []


def words(text: str) -> int:
    return len(text.split())


def test_the_budget_pays_for_each_documents_title_once() -> None:
    """The answer prompt names a document once before its passages; those tokens cost the
    first word as much as the passages' own."""
    one_document = [_strip("a.md", 0, 0.9), _strip("a.md", 10, 0.8)]  # 1 + 2 + 2 words
    two_documents = [_strip("a.md", 0, 0.9), _strip("b.md", 10, 0.8)]  # 1 + 2 + 1 + 2 words
    assert len(recompose(one_document, 0.1, budget_tokens=5, count_tokens=words)) == 2
    assert len(recompose(two_documents, 0.1, budget_tokens=5, count_tokens=words)) == 1
    titled = [replace(s, title="A long document title") for s in one_document]
    assert len(recompose(titled, 0.1, budget_tokens=7, count_tokens=words)) == 1
    assert len(recompose(titled, 0.1, budget_tokens=8, count_tokens=words)) == 2


def chunk_of(document: str, start: int, end: int, ordinal: int, chunk_id: int = 1) -> Chunk:
    return Chunk(chunk_id, 3, ordinal, document[start:end], start, end, "doc.md")


def whole_document_strips(document: str) -> list[str]:
    """The texts of the sentence strips of a chunk that is the whole document."""
    return [s.text for s in decompose(chunk_of(document, 0, len(document), ordinal=0), "sentences")]


def assert_whole_sentence_strips(document: str, strips: list[Span]) -> None:
    for strip in strips:
        assert document[strip.start : strip.end] == strip.text
        assert len(strip.text) >= MIN_STRIP_CHARS and len(strip.text.split()) >= MIN_STRIP_WORDS
        assert ends_sentence(strip.text), strip.text


def test_short_pieces_join_a_neighbour_in_the_same_chunk() -> None:
    document = (
        "# Results\n\nThe assay measured binding affinity. See Fig. 2 for the curve. It failed. "
        "Most values were recorded in the appendix, e.g. the index. Drones do not forage."
    )
    strips = decompose(chunk_of(document, 0, len(document), ordinal=0), "sentences")
    assert [s.text for s in strips] == [
        "# Results\n\nThe assay measured binding affinity. See Fig. 2 for the curve. It failed.",
        "Most values were recorded in the appendix, e.g. the index.",
        "Drones do not forage.",
    ]
    assert_whole_sentence_strips(document, strips)


def test_a_label_stays_with_the_text_it_names() -> None:
    document = (
        "Without options the default applies to every entry.\n\n"
        "pop [--index] [-q|--quiet] [<stash>]\n\n"
        "Remove a single stashed state from the stash list and apply it.\n\n"
        "Applying the state can fail with conflicts; then it is kept.\n\n"
        "apply [--index] [-q|--quiet] [<stash>]"
    )
    assert whole_document_strips(document) == [
        "Without options the default applies to every entry.",
        "pop [--index] [-q|--quiet] [<stash>]\n\n"
        "Remove a single stashed state from the stash list and apply it.",
        "Applying the state can fail with conflicts; then it is kept.\n\n"
        "apply [--index] [-q|--quiet] [<stash>]",  # nothing follows it in this chunk
    ]


def test_a_short_list_item_is_one_strip_and_never_shares_one_with_another_item() -> None:
    document = (
        "The evaluator decides one of three outcomes.\n\n"
        "- **AMBIGUOUS**: the evidence is partial. The query is rewritten and retrieval runs\n"
        "  again.\n"
        "- **INCORRECT**: nothing relevant was found. With no fallback it reports that the\n"
        "  evidence is insufficient.\n"
        "1. Install the package first.\n"
        "2. Run it."
    )
    assert whole_document_strips(document) == [
        "The evaluator decides one of three outcomes.",
        document[document.index("- **AMB") : document.index("\n- **INC")],
        document[document.index("- **INC") : document.index("\n1.")],
        "1. Install the package first.\n2. Run it.",  # "2. Run it." alone is too short
    ]


def test_a_long_list_item_is_split_into_sentences() -> None:
    sentence = "Each of these sentences says one more thing about the item."
    item = "- " + " ".join([sentence] * (MAX_ITEM_WORDS // 10 + 1))

    assert len(item.split()) > MAX_ITEM_WORDS
    assert whole_document_strips(item) == ["- " + sentence] + [sentence] * (MAX_ITEM_WORDS // 10)


def test_a_long_line_without_a_terminator_is_a_strip_of_its_own() -> None:
    row = "gc.auto 6700 loose objects before an automatic gc packs them into one pack file"
    document = f"{row}\n\nThe threshold counts loose objects only."
    assert whole_document_strips(document) == [row, "The threshold counts loose objects only."]


def test_a_chunk_starting_mid_sentence_drops_a_short_tail_and_keeps_a_long_one() -> None:
    document = "The waggle run is recorded in the index. Honeybees communicate with a dance."
    short_tail = chunk_of(document, document.index("index."), len(document), ordinal=1)
    assert [s.text for s in decompose(short_tail, "sentences")] == [
        "Honeybees communicate with a dance."
    ]
    long_tail = chunk_of(document, document.index("run is"), len(document), ordinal=1)
    assert [s.text for s in decompose(long_tail, "sentences")] == [
        "run is recorded in the index.",
        "Honeybees communicate with a dance.",
    ]
    first = chunk_of(document, document.index("index."), len(document), ordinal=0)
    assert decompose(first, "sentences")[0].text == "index. Honeybees communicate with a dance."


def test_overlapping_chunks_yield_each_sentence_once(embedder: OnnxEmbedder) -> None:
    start = DOCUMENT.index("The duration")
    overlap = replace(CHUNK, chunk_id=8, ordinal=2, text=DOCUMENT[start:], start=start)
    refined = refine(QUESTION, [CHUNK, overlap], embedder, threshold=0.0)
    scored = refined.scored
    assert len(scored) == 4 and len({(s.start, s.end) for s in scored}) == 4
    assert len(refined.kept) == 4
    (piece,) = refined.pieces  # every strip kept: one passage, the chunk's own text
    assert (piece.start, piece.end, piece.text) == (CHUNK.start, CHUNK.end, CHUNK.text)


def test_real_chunks_give_whole_distinct_sentences(
    minilm_dir: Path, embedder: OnnxEmbedder
) -> None:
    sentences = [
        f"Colony {i} sent {i % 5 + 2} foragers to the meadow before noon." for i in range(60)
    ]
    document = " ".join(sentences)
    tokenizer = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    spans = Chunker(tokenizer, 60, 20).split(document)
    chunks = [chunk_of(document, s.start, s.end, n, chunk_id=n) for n, s in enumerate(spans)]
    assert any(a.end > b.start for a, b in itertools.pairwise(chunks))  # they do overlap
    refined = refine("How many foragers did colony 7 send?", chunks, embedder)
    assert sorted(s.text for s in refined.scored) == sorted(sentences)
    assert_whole_sentence_strips(document, refined.scored)
    pieces = refined.pieces
    assert pieces and all(document[p.start : p.end] == p.text for p in pieces)


def test_neighbouring_kept_strips_join_with_exact_offsets() -> None:
    strips = decompose(CHUNK, "sentences")
    kept = [strips[0], strips[1], strips[3]]  # the third is not kept: a gap of text
    pieces = join_neighbours(kept, [CHUNK])
    assert [(p.start, p.end) for p in pieces] == [
        (strips[0].start, strips[1].end),
        (strips[3].start, strips[3].end),
    ]
    for piece in pieces:
        assert DOCUMENT[piece.start : piece.end] == piece.text
    assert join_neighbours(kept, []) == kept  # the text between is unknown: not joined


def test_strips_of_other_documents_or_texts_are_not_joined() -> None:
    (strip,) = decompose(replace(CHUNK, text=CHUNK.text[:42], end=CHUNK.start + 42), "sentences")
    other_text = replace(strip, text="Honeybees communicate with a polka dance")
    other_document = replace(strip, doc_id=4)
    assert len(join_neighbours([strip, other_text], [CHUNK])) == 2
    assert len(join_neighbours([strip, other_document], [CHUNK])) == 2
    assert recompose([strip, other_text], 0.0, 100, len) == [strip, other_text]
    assert recompose([strip, strip], 0.0, 100, len) == [strip]


def test_without_a_cross_encoder_strips_fall_back_to_coverage(embedder: OnnxEmbedder) -> None:
    strips = decompose(CHUNK, "sentences")
    assert score_strips(QUESTION, strips, "cross_encoder", embedder) == score_strips(
        QUESTION, strips, "coverage", embedder
    )


def test_the_best_graded_chunk_keeps_its_best_strip_whatever_coverage_says(
    embedder: OnnxEmbedder,
) -> None:
    """The claim names the enzyme "ACE" where the evidence spells it out: keyword coverage
    scores the evidence below the threshold. Refinement keeps the anchor's best strip anyway,
    and only the anchor's: without an anchor the same evidence is refined away, and an anchor
    whose document is in the context already adds nothing."""
    text = (
        "Angiotensin-converting enzyme blockade lowered the decline of kidney function in "
        "elderly patients. The trial ran for four years."
    )
    evidence = Chunk(1, 1, 0, text, 0, len(text), "trial.txt")
    other_text = "ACE inhibitors are sold in pharmacies in most countries of the world."
    other = Chunk(2, 2, 0, other_text, 0, len(other_text), "shop.txt")
    question = "Do ACE inhibitors protect the kidneys of older people?"
    without = refine(question, [evidence, other], embedder, threshold=0.2)
    assert {p.source for p in without.pieces} == {"shop.txt"}
    anchored = refine(question, [evidence, other], embedder, threshold=0.2, anchor=evidence)
    assert {p.source for p in anchored.pieces} == {"shop.txt", "trial.txt"}
    (from_evidence,) = [p for p in anchored.pieces if p.source == "trial.txt"]
    assert from_evidence.text.startswith("Angiotensin-converting enzyme blockade")
    assert anchored.over_budget == 0
    present = refine(question, [evidence, other], embedder, threshold=0.2, anchor=other)
    assert [p.text for p in present.pieces] == [p.text for p in without.pieces]


# git-archive(1)'s --format entry as the HTML reader writes it, after the section's heading.
ARCHIVE_OPTIONS = (
    "OPTIONS\n\n--format=<fmt>\n\nFormat of the resulting archive. Possible values are tar, "
    "zip, tar.gz, tgz, and any format defined using the configuration option "
    "tar.<format>.command.\n\n-l\n--list\n\nShow all available formats.\n\n"
    "--prefix=<prefix>/\n\nPrepend <prefix>/ to paths in the archive. Can be repeated; its "
    "rightmost value is used for all tracked files. See below which value gets used by "
    "--add-file and --add-virtual-file."
)


def test_a_definition_entry_is_one_strip_with_its_term() -> None:
    """The values the --format entry lists stay with the option they belong to: alone,
    "Possible values are tar, zip, …" names neither the option nor the question's words."""
    chunk = Chunk(1, 1, 0, ARCHIVE_OPTIONS, 0, len(ARCHIVE_OPTIONS), "git-archive.html")
    strips = [s.text for s in decompose(chunk, "sentences")]
    assert strips[0].startswith("OPTIONS\n\n--format=<fmt>\n\nFormat of the resulting archive.")
    assert strips[0].endswith("tar.<format>.command.")
    assert strips[1] == "-l\n--list\n\nShow all available formats."
    assert strips[2].startswith("--prefix=<prefix>/") and strips[2].endswith("--add-virtual-file.")


def test_a_long_definition_is_split_into_sentences() -> None:
    definition = " ".join(["The option does one more thing here."] * 12)
    text = f"--many\n\n{definition}"
    chunk = Chunk(1, 1, 0, text, 0, len(text), "manual.html")
    assert len(text.split()) > MAX_ITEM_WORDS
    assert len(decompose(chunk, "sentences")) > 1
