"""Citations people can open: a PDF's page, an HTML or Markdown page's section, everywhere
a source is named (cited answers, `query --json`, the text output, the TUI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag_edge.answer.generation import passages_text, source_line
from crag_edge.citations import Location, locate, locator, place_label, places_within
from crag_edge.cli import app
from crag_edge.grading import ItemGrade
from crag_edge.result import ContextItem
from crag_edge.tui.widgets import chunk_view, citation_label
from crag_edge.types import Chunk, Hit, Place
from tests.documents import make_pdf

SEP = " \u203a "
PAGES = [
    "Honeybees communicate the direction of food with a waggle dance inside the hive.",
    "The Danube river flows through ten countries before it reaches the Black Sea.",
    "The Zorbex alloy melts at 1420 degrees Celsius in the Halvard furnace.",
    "Steam locomotives were replaced by diesel engines on most railways after 1960.",
]
HTML = """<html><head><title>PostgreSQL: Documentation: CREATE INDEX</title></head><body>
<h1>CREATE INDEX</h1><p>CREATE INDEX constructs an index on the specified column.</p>
<h2>Parameters</h2><p>UNIQUE causes the system to check for duplicate values.</p>
<h3>Index Storage Parameters</h3><p>The fillfactor for an index is a percentage that
determines how full the index method will try to pack index pages.</p>
<h2>Examples</h2><p>To create a B-tree index on the column title in the table films.</p>
</body></html>"""
MARKDOWN = """# Field guide

Notes for the expedition.

## Camp

### Water

Boil river water for three minutes before drinking it at the camp.

## Weather

Storms arrive from the west in the afternoon.
"""


def item(source: str, pages: tuple[int, int] | None = None, section: str | None = None) -> Any:
    chunk = Chunk(1, 1, 0, "text.", 0, 5, source, "Title", pages=pages, section=section)
    return ContextItem.from_chunk(chunk, n=1, origin="search", score=0.9)


@pytest.mark.parametrize(
    ("pages", "section", "expected"),
    [
        ((12, 12), None, "report.pdf p. 12"),
        ((12, 13), None, "report.pdf pp. 12\u201313"),
        (
            None,
            f"CREATE INDEX{SEP}Index Storage Parameters",
            "report.pdf § Index Storage Parameters",
        ),
        (None, None, "report.pdf"),
    ],
)
def test_locator_names_the_file_and_its_page_or_deepest_heading(
    pages: tuple[int, int] | None, section: str | None, expected: str
) -> None:
    assert locator(item("/docs/report.pdf", pages, section)) == expected


def test_web_sources_keep_their_address_and_the_whole_path_is_available() -> None:
    assert locator(item("https://example.org/a/b")) == "https://example.org/a/b"
    deep = item("g.md", section=f"Guide{SEP}Install{SEP}Linux")
    assert place_label(deep) == "§ Linux"
    assert place_label(deep, whole_path=True) == f"§ Guide{SEP}Install{SEP}Linux"
    assert source_line(deep) == "[1] Title — g.md § Linux"


def test_a_span_is_located_by_the_places_it_covers() -> None:
    places = [Place(0, 1), Place(100, 2), Place(200, 3)]
    assert places_within(places, 120, 250) == (Place(100, 2), Place(200, 3))
    assert locate(places, 120, 150).pages == (2, 2)
    assert locate(places, 50, 150).pages == (1, 2)
    assert locate(places, 150, 201).pages == (2, 3)
    assert locate(places, 150, 200).pages == (2, 2)  # ends right where page 3 starts
    headings = [Place(10, None, "A"), Place(50, None, f"A{SEP}B"), Place(60, None, "C")]
    assert locate(headings, 0, 30).section == "A"  # mostly in A, after a short preamble
    assert locate(headings, 0, 15).section is None  # mostly before the first heading
    assert locate(headings, 48, 58).section == f"A{SEP}B"  # mostly after the heading
    assert locate(headings, 45, 100).section == "C"  # crosses A and B into C, mostly C
    assert locate([], 0, 10) == locate(headings, 0, 5) == Location()  # nothing to cite


def test_tui_citations_and_evidence_view_show_the_place() -> None:
    cited = item("/docs/report.pdf", (3, 3))
    assert citation_label(cited) == "[1] report.pdf p. 3  chars 0-5"
    # Where the answer's sentences were found in it, those places (each once) stand instead.
    places = ["report.pdf p. 3 row 2", "report.pdf p. 3 row 2", "report.pdf p. 3 row 4"]
    label = "[1] report.pdf p. 3 row 2; report.pdf p. 3 row 4  chars 0-5"
    assert citation_label(cited, places) == label
    path = f"CREATE INDEX{SEP}Index Storage Parameters"
    chunk = Chunk(1, 1, 0, "The fillfactor.", 0, 15, "/d/sql-createindex.html", section=path)
    grade = ItemGrade(1, 1, 0.9, "signals", {}, {}, True, "")
    shown = chunk_view(Hit(chunk, 1, 0.5), grade, []).plain
    assert f"sql-createindex.html  § {path}" in shown


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A corpus of a four-page PDF, an HTML reference page and a Markdown guide."""
    folder = tmp_path_factory.mktemp("library")
    (folder / "report.pdf").write_bytes(make_pdf(PAGES, "Annual report"))
    (folder / "sql-createindex.html").write_text(HTML)
    (folder / "guide.md").write_text(MARKDOWN)
    db = folder.parent / "library.db"
    ingested = invoke("ingest", "--db", str(db), str(folder), "--json")
    assert ingested.exit_code == 0, ingested.output
    assert json.loads(ingested.stdout)["added"] == 3
    return db


def invoke(*args: str):  # type: ignore[no-untyped-def]
    env = {"CRAG_EDGE_GRADING_TIERS": '["signals"]', "CRAG_EDGE_REWRITE_WITH_LLM": "false"}
    return CliRunner().invoke(app, list(args), env=env, catch_exceptions=False)


def evidence(db: Path, question: str, fact: str) -> dict[str, Any]:
    """The context item of `query --json` that holds `fact`."""
    result = invoke("query", "--db", str(db), "--json", question)
    assert result.exit_code == 0, result.output
    return next(c for c in json.loads(result.stdout)["context"] if fact in c["text"])


@pytest.mark.models
def test_a_fact_on_page_3_is_cited_as_page_3(library: Path) -> None:
    question = "At what temperature does the Zorbex alloy melt?"
    cited = evidence(library, question, "1420 degrees")
    assert (cited["pages"], cited["section"]) == ([3, 3], None)
    assert cited["locator"] == "report.pdf p. 3"
    printed = invoke("query", "--db", str(library), question)
    assert "report.pdf p. 3" in printed.stdout


@pytest.mark.models
def test_html_and_markdown_evidence_is_cited_by_its_section(library: Path) -> None:
    html = evidence(library, "What does the fillfactor of an index determine?", "fillfactor")
    assert html["section"] == f"CREATE INDEX{SEP}Parameters{SEP}Index Storage Parameters"
    assert html["locator"] == "sql-createindex.html § Index Storage Parameters"
    md = evidence(library, "How long should river water be boiled at camp?", "three minutes")
    assert md["section"] == f"Field guide{SEP}Camp{SEP}Water"
    assert md["locator"] == "guide.md § Water"


def test_the_answer_prompt_names_each_document_once_per_run_of_its_passages() -> None:
    """Every prompt token is read before the first word: a title is not repeated for each
    passage of one document, but a new document (or a return to one) is named again."""
    context = [
        ContextItem(n, n, doc, source, title, 0, 5, f"passage {n}.", "search", 0.9)
        for n, doc, source, title in [
            (1, 1, "bees.md", "Honeybees"),
            (2, 1, "bees.md", "Honeybees"),
            (3, 2, "notes.txt", ""),
            (4, 1, "bees.md", "Honeybees"),
        ]
    ]
    assert passages_text(context).split("\n\n") == [
        "[1] (Honeybees) passage 1.",
        "[2] passage 2.",
        "[3] (notes.txt) passage 3.",
        "[4] (Honeybees) passage 4.",
    ]
