"""Chunker with MiniLM's real tokenizer: exact offsets, token budgets, overlap, boundaries
(whole sentences in prose, headings and paragraphs first, words only inside long sentences)."""

from __future__ import annotations

import itertools
import random
import textwrap
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from crag_edge.ingest import Chunker, TextSpan
from crag_edge.sentences import sentence_spans

VOCABULARY = (
    "the retrieval grader scores each passage before generation uses it; x-ray antidisestablishment"
    " naïve café 東京 résumé data-driven re-ranking 3.14 e-mail"
)
WORDS = VOCABULARY.split()


@pytest.fixture(scope="module")
def minilm_tokenizer(minilm_dir: Path) -> Tokenizer:
    """MiniLM's tokenizer exactly as shipped (its tokenizer.json truncates and pads to 128)."""
    return Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))


def sample_text(seed: int, paragraphs: int) -> str:
    rng = random.Random(seed)
    out = []
    for _ in range(paragraphs):
        sentences = [
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 30))).capitalize()
            + rng.choice([".", "!", "?", '."'])
            for _ in range(rng.randint(1, 6))
        ]
        out.append(" ".join(sentences))
    return "\n\n".join(out)


def token_ranges(tokenizer: Tokenizer, text: str, spans: list[TextSpan]) -> list[tuple[int, int]]:
    """Each span as [first, stop) token indices in one reference encoding of the whole text."""
    reference = Tokenizer.from_str(tokenizer.to_str())
    reference.no_truncation()
    offsets = reference.encode(text, add_special_tokens=False).offsets
    starts = {start: i for i, (start, _) in enumerate(offsets)}
    ends = {end: i + 1 for i, (_, end) in enumerate(offsets)}
    return [(starts[s.start], ends[s.end]) for s in spans]


@pytest.mark.parametrize(("size", "overlap"), [(200, 40), (50, 10), (32, 0), (16, 15)])
def test_offsets_budget_and_overlap(minilm_tokenizer: Tokenizer, size: int, overlap: int) -> None:
    text = sample_text(seed=size, paragraphs=40)
    spans = Chunker(minilm_tokenizer, size, overlap).split(text)
    ranges = token_ranges(minilm_tokenizer, text, spans)
    assert len(spans) > 3
    assert ranges[0][0] == 0 and ranges[-1][1] == max(stop for _, stop in ranges)
    for span, (first, stop) in zip(spans, ranges, strict=True):
        assert text[span.start : span.end] == span.text
        assert span.token_count == stop - first <= size
    for (first, stop), (next_first, _) in itertools.pairwise(ranges):
        assert next_first > first  # always progresses
        assert 0 <= stop - next_first <= overlap


@pytest.mark.parametrize(("size", "overlap"), [(200, 40), (120, 30)])
def test_prose_chunks_start_and_end_with_whole_sentences(
    minilm_tokenizer: Tokenizer, size: int, overlap: int
) -> None:
    text = sample_text(seed=size, paragraphs=40)  # every sentence fits in half a chunk
    spans = Chunker(minilm_tokenizer, size, overlap).split(text)
    sentences = sentence_spans(text)
    starts, ends = {start for start, _ in sentences}, {end for _, end in sentences}
    assert len(spans) > 3
    for span in spans:
        assert span.start in starts and span.end in ends, span.text[:40]
    ranges = token_ranges(minilm_tokenizer, text, spans)
    shared = [stop - next_first for (_, stop), (next_first, _) in itertools.pairwise(ranges)]
    assert max(shared) > 0  # neighbours still share whole sentences


def test_wrapped_lines_give_way_to_sentence_ends(minilm_tokenizer: Tokenizer) -> None:
    sentences = [f"Sentence {i} runs across a wrapped line of this paragraph." for i in range(30)]
    text = textwrap.fill(" ".join(sentences), width=50)  # line breaks fall mid-sentence
    spans = Chunker(minilm_tokenizer, 40, 8).split(text)
    assert len(spans) > 3
    for span in spans:
        assert span.text.startswith("Sentence") and span.text.endswith("paragraph.")


def test_a_list_item_starts_a_sentence_and_its_number_is_not_one() -> None:
    text = "Steps to follow\n1. Install it\n2. Run it. Then wait.\n- a bullet\nWe saw 2. Then"
    assert [text[a:b] for a, b in sentence_spans(text)] == [
        "Steps to follow",
        "1. Install it",
        "2. Run it.",
        "Then wait.",
        "- a bullet\nWe saw 2.",  # a line without a marker continues the item
        "Then",
    ]


def test_cuts_prefer_a_heading_to_a_sentence_end(minilm_tokenizer: Tokenizer) -> None:
    sections = [f"## Part {i}\nIt has one sentence. It has another one." for i in range(20)]
    spans = Chunker(minilm_tokenizer, 40, 0).split("\n".join(sections))
    assert len(spans) > 3
    for span in spans:
        assert span.text.startswith("## Part") and span.text.endswith("another one.")


def test_a_sentence_longer_than_a_chunk_splits_at_words(minilm_tokenizer: Tokenizer) -> None:
    text = "The " + " ".join(WORDS * 12) + " ends here."  # one sentence of ~400 tokens
    spans = Chunker(minilm_tokenizer, 50, 10).split(text)
    ranges = token_ranges(minilm_tokenizer, text, spans)
    assert len(spans) > 5
    for span, (first, stop) in zip(spans, ranges, strict=True):
        assert text[span.start : span.end] == span.text
        assert span.token_count == stop - first <= 50
        assert text[span.start - 1 : span.start].isspace() or span.start == 0  # a word start
    for (_, stop), (next_first, _) in itertools.pairwise(ranges):
        assert 0 < stop - next_first <= 10  # mid-sentence: neighbours share whole words


def test_cuts_prefer_paragraph_ends(minilm_tokenizer: Tokenizer) -> None:
    paragraphs = [f"Paragraph {i} talks about topic {i} in a few words." for i in range(12)]
    text = "\n\n".join(paragraphs)
    spans = Chunker(minilm_tokenizer, 40, 0).split(text)
    assert len(spans) > 1
    for span in spans:
        assert span.text.startswith("Paragraph") and span.text.endswith("words.")


def test_cuts_prefer_sentence_ends_within_a_paragraph(minilm_tokenizer: Tokenizer) -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(40))
    for span in Chunker(minilm_tokenizer, 30, 0).split(text)[:-1]:
        assert span.text.startswith("Sentence") and span.text.endswith("here.")


def test_overlap_starts_at_a_word(minilm_tokenizer: Tokenizer) -> None:
    text = " ".join(["antidisestablishmentarianism"] * 200)  # ~6 tokens per word
    spans = Chunker(minilm_tokenizer, 50, 9).split(text)
    for span in spans:
        assert span.text.startswith("antidis") and span.text.endswith("ism")


def test_long_text_is_tokenized_in_pieces_without_changing_offsets(
    minilm_tokenizer: Tokenizer,
) -> None:
    text = sample_text(seed=7, paragraphs=400)
    assert len(text) > 50_000  # several internal pieces
    spans = Chunker(minilm_tokenizer, 200, 40).split(text)
    ranges = token_ranges(minilm_tokenizer, text, spans)
    assert all(text[s.start : s.end] == s.text for s in spans)
    assert all(
        s.token_count == stop - first for s, (first, stop) in zip(spans, ranges, strict=True)
    )


def test_short_empty_and_whitespace_texts(minilm_tokenizer: Tokenizer) -> None:
    chunker = Chunker(minilm_tokenizer, 200, 40)
    assert chunker.split("") == []
    assert chunker.split(" \n\t \n") == []
    assert chunker.split("  Just one line.  ") == [TextSpan("Just one line.", 2, 16, 4)]


def test_shared_tokenizer_is_not_modified(minilm_tokenizer: Tokenizer) -> None:
    truncation = minilm_tokenizer.truncation
    Chunker(minilm_tokenizer, 300, 10).split("word " * 500)
    assert minilm_tokenizer.truncation == truncation


def test_invalid_sizes(minilm_tokenizer: Tokenizer) -> None:
    with pytest.raises(ValueError):
        Chunker(minilm_tokenizer, 10, 10)
    with pytest.raises(ValueError):
        Chunker(minilm_tokenizer, 0, 0)


@pytest.mark.parametrize(
    "run",
    [
        pytest.param("ACGT" * 250_000, id="dna-without-spaces"),
        pytest.param("\U0001f41d\U0001f338" * 20_000, id="emoji"),
        pytest.param("Z" + "\u0301\u0302\u0303" * 30_000 + "algo", id="combining-marks"),
        pytest.param("a" + "\u200d" * 100_000 + "b", id="zero-width-joiners"),
    ],
)
def test_a_run_the_tokenizer_reads_as_one_token_is_still_cut_into_chunks(
    minilm_tokenizer: Tokenizer, run: str
) -> None:
    """WordPiece reads a word of over 100 characters as one unknown token, a letter under
    thousands of combining marks as that letter, and skips zero-width characters: counted as
    one token or none, such a run made one chunk of a megabyte, which no answer's context
    could hold. Every character still lands in a chunk, none longer than one of plain words."""
    text = f"Bees dance. {run} The end."
    spans = Chunker(minilm_tokenizer, 200, 0).split(text)
    assert max(len(s.text) for s in spans) <= 200 * 10
    assert "".join(s.text for s in spans).replace(" ", "") == text.replace(" ", "")
    assert all(text[s.start : s.end] == s.text for s in spans)


def test_a_long_blank_stretch_ends_a_chunk(minilm_tokenizer: Tokenizer) -> None:
    """The tokenizer skips blanks, so a megabyte of spaces between two words was no token and
    one chunk held it whole. A blank stretch over a kilobyte ends the chunk, and no chunk
    reaches across it; shorter blanks (indentation, aligned columns) still count as nothing."""
    text = "Bees dance to find flowers." + " " * 1_000_000 + "\n\nAnts march in lines."
    spans = Chunker(minilm_tokenizer, 200, 20).split(text)
    assert [s.text for s in spans] == ["Bees dance to find flowers.", "Ants march in lines."]
    assert all(text[s.start : s.end] == s.text for s in spans)
    padded = "Bees dance." + " " * 1000 + "Ants march."
    assert [s.text for s in Chunker(minilm_tokenizer, 200, 20).split(padded)] == [padded]
