"""Chunker with MiniLM's real tokenizer: exact offsets, token budgets, overlap, boundaries."""

from __future__ import annotations

import itertools
import random
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from crag_edge.ingest import Chunker, TextSpan

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
        shared = stop - next_first
        assert next_first > first  # always progresses
        assert overlap <= shared <= overlap + 8 if overlap else shared == 0


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
