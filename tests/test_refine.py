"""Knowledge refinement: strips keep absolute offsets, each scorer ranks the evidence-bearing
strip first, recomposition respects threshold, budget and document order."""

from __future__ import annotations

import pytest

from crag_edge.correction.refine import Strip, decompose, recompose, refine, score_strips
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.types import Chunk

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


def _strip(source: str, start: int, score: float, text: str = "word word") -> Strip:
    return Strip(1, hash(source) % 100, source, "", start, start + len(text), text, score)


def test_recompose_keeps_threshold_budget_and_document_order() -> None:
    strips = [
        _strip("b.md", 50, 0.9),
        _strip("a.md", 10, 0.4),
        _strip("a.md", 0, 0.8),
        _strip("b.md", 0, 0.05),  # below threshold
        _strip("c.md", 0, 0.7, "many words " * 20),  # over the budget left
    ]
    kept = recompose(strips, threshold=0.1, budget_tokens=6, count_tokens=lambda t: len(t.split()))
    assert [(s.source, s.start) for s in kept] == [("a.md", 0), ("a.md", 10), ("b.md", 50)]
    assert recompose(strips, threshold=0.95, budget_tokens=6, count_tokens=len) == []


def test_overlapping_chunks_do_not_repeat_a_strip(embedder: OnnxEmbedder) -> None:
    overlap = Chunk(
        chunk_id=8,
        doc_id=3,
        ordinal=2,
        text=DOCUMENT[DOCUMENT.index("The duration") :],
        start=DOCUMENT.index("The duration"),
        end=len(DOCUMENT),
        source="bees.md",
    )
    kept, scored = refine(QUESTION, [CHUNK, overlap], embedder, threshold=0.0)
    assert len(scored) == 4 + 3
    assert len(kept) == 4 and len({(s.doc_id, s.start) for s in kept}) == 4
    assert [s.start for s in kept] == sorted(s.start for s in kept)


def test_without_a_cross_encoder_strips_fall_back_to_coverage(embedder: OnnxEmbedder) -> None:
    strips = decompose(CHUNK, "sentences")
    assert score_strips(QUESTION, strips, "cross_encoder", embedder) == score_strips(
        QUESTION, strips, "coverage", embedder
    )
