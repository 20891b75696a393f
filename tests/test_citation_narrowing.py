"""An answer's sentence cited by the row or slide that states it, though its passage spans
several: on the sheet and deck LibreOffice and pandoc made, ingested and retrieved for real."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crag_edge.answer.checked import CheckedAnswer
from crag_edge.answer.finished import AnswerStream
from crag_edge.answer.narrowing import sentence_locator
from crag_edge.answer.timing import AnswerClock
from crag_edge.config import AnswerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.grading.result import ItemGrade
from crag_edge.ingest.outline import outline_places
from crag_edge.loop.stages import _whole_chunks
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.llm import LlamaRuntime
from crag_edge.result import ContextItem, CragResult
from crag_edge.server.routers.openai_api import _Reply
from crag_edge.tui.widgets import citation_label
from crag_edge.types import Action, Chunk, Decision, Hit, Place
from tests.test_formats import FIXTURES, load
from tests.test_support import smollm, stream_of

__all__ = ["smollm"]  # the SmolLM2 fixture, shared with the support check's tests


def whole(name: str) -> tuple[ContextItem, list[Place]]:
    """The fixture `name` as one passage spanning it (a small sheet or deck is one chunk),
    with its places."""
    doc = load(name)
    places = outline_places(doc.outline)
    pages = (min(p.page for p in places if p.page), max(p.page for p in places if p.page))
    chunk = Chunk(1, 1, 0, doc.text, 0, len(doc.text), name, doc.title, pages=pages,
                  section=places[-1].section)  # fmt: skip
    item = ContextItem.from_chunk(chunk, n=1, origin="corpus", score=0.9)
    return item, places


@pytest.mark.parametrize(
    ("sentence", "cited"),
    [
        (  # the only row holding its number and names
            "Anchor chain from Baltic Steel takes 3 weeks to arrive [1].",
            "suppliers.xlsx row 3 § suppliers",
        ),
        (  # no number or name: the row holding most of its terms, by a clear margin
            "Marine varnish arrives ten days after it is ordered [1].",
            "suppliers.xlsx row 4 § suppliers",
        ),
        (  # two rows' names: it sums them up, so both rows stand
            "Helio Ltd and SafeSea deliver in April [1].",
            "suppliers.xlsx rows 1\u20135 § suppliers",
        ),
        (  # terms every record shares ("lead time"): no row clearly wins
            "Every item has a lead time [1].",
            "suppliers.xlsx rows 1\u20135 § suppliers",
        ),
    ],
)
def test_a_sentence_is_cited_by_the_one_row_that_states_it(sentence: str, cited: str) -> None:
    item, places = whole("suppliers.xlsx")
    assert sentence_locator(sentence, item, places) == cited


def test_a_sentence_is_cited_by_the_slide_that_states_it() -> None:
    item, places = whole("deck.pptx")
    sentence = "The installer slipped because its certificate expired in March [1]."
    assert sentence_locator(sentence, item, places) == "deck.pptx slide 2 § Roadmap"
    assert sentence_locator("Questions are welcome [1].", item, places) == (
        "deck.pptx slide 4 § Closing"
    )


def test_a_sentence_is_cited_by_the_row_of_a_word_or_opendocument_table() -> None:
    item, places = whole("numeric-types.docx")
    sentence = "A smallserial is a small autoincrementing integer of 2 bytes [1]."
    assert sentence_locator(sentence, item, places) == (
        "numeric-types.docx row 8 § 8.1. Numeric Types"
    )
    item, places = whole("money-type.odt")
    assert sentence_locator("The money type takes 8 bytes [1].", item, places) == (
        "money-type.odt row 1 § 8.2. Monetary Types"
    )


def test_the_checked_answer_records_each_sentence_at_its_row(
    embedder: OnnxEmbedder, smollm: LlamaRuntime, tmp_path: Path
) -> None:
    """Through ingest, retrieval and the support check: the passage is the whole sheet, the
    sentence (the row's own words, passed as a quote) is recorded at its row."""
    sheet = tmp_path.resolve() / "suppliers.xlsx"
    shutil.copy(FIXTURES / "suppliers.xlsx", sheet)
    settings = Settings.load(chunk_tokens=256, chunk_overlap=8)
    with Engine.open(tmp_path / "kb.db", settings, create=True, embedder=embedder) as engine:
        engine.ingest([sheet])
        [hit] = engine.search("lead time of anchor chain", top_k=1)
    result = _result([hit])
    [passage] = result.context
    assert passage.pages == (1, 5)
    words = "Supplier: Baltic Steel; Lead time: 3 weeks [1]."
    answer = CheckedAnswer(stream_of([words]), result, smollm, AnswerSettings())
    clock = AnswerClock()
    clock.evidence_ready()
    stream = AnswerStream(answer, result, settings.models, clock)
    assert "".join(stream) == words
    [record] = answer.support.sentences
    assert (record.checked_by, record.locator) == ("quote", "suppliers.xlsx row 3 § suppliers")
    assert record.to_dict()["locator"] == "suppliers.xlsx row 3 § suppliers"
    # Every list of sources sends the reader to the row: the CLI's and the chat API's lines
    # under the passage, the TUI's citation list in its place.
    row = ("suppliers.xlsx row 3 § suppliers", "Supplier: Baltic Steel; Lead time: 3 weeks.")
    assert answer.support.narrowed(passage) == [row]
    tail = _Reply("m").tail(stream.answer)
    assert f"\n    {row[0]}: {row[1]}" in tail
    label = citation_label(passage, [place for place, _ in answer.support.narrowed(passage)])
    assert label.startswith("[1] suppliers.xlsx row 3 § suppliers  chars")


def _result(hits: list[Hit]) -> CragResult:
    """The hits kept whole, as the corrective loop's context."""
    kept = [(h, ItemGrade(h.chunk.chunk_id, n, 0.9)) for n, h in enumerate(hits, start=1)]
    context = _whole_chunks(kept)
    return CragResult("lead time?", Decision.CORRECT, Action.GENERATE, 0.9, "kept", context, kept)
