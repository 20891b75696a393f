"""Small files that amplify (`tests.amplifiers`), ingested by the CLI beside a canary file:
the ingest exits 0, each one is refused, or read in part, in one clear line, and the canary
is indexed. Their time and peak memory are measured apart (`scripts/measure_amplifiers.py`,
docs/formats.md "Files that amplify"), never asserted here."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crag_edge.ingest.formats.archive import MAX_XML_DEPTH
from tests.amplifiers import CANARY, repeated_slide_pptx, write
from tests.test_formats import with_member
from tests.test_hostile_input import ingest_json, stored_sources
from tests.test_mail_parts import stored_text

REFUSED = {
    "empty-paragraphs.docx": "its XML holds over 1,250,000 elements (one per 8 bytes of "
    "max_document_bytes); refused (markup that amplifies)",
    "space-run.odt": "its text has over 400,000,000 bytes, over max_document_bytes "
    "(10,000,000); raise that setting to index it",
    "shared-strings.xlsx": "its shared strings hold over 10,001,000 bytes, over "
    "max_document_bytes (10,000,000); raise that setting to index it",
    "repeated-slide.pptx": "its text has over ",
    "repeated-chapter.epub": "its text has over ",
}
OCR = shutil.which("tesseract") is not None


def test_containers_that_amplify_are_each_refused_in_one_line(tmp_path: Path) -> None:
    docs = write(tmp_path.resolve() / "docs", *REFUSED)
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert code == 0
    reasons = {Path(source).name: reason for source, reason in report["errors"]}
    assert set(reasons) == set(REFUSED)
    for name, reason in reasons.items():
        assert reason.startswith(REFUSED[name]) and "\n" not in reason, (name, reason)
    assert stored_sources(tmp_path / "c.db") == [str(docs / "canary.txt")]
    assert report["added"] == 1


def test_a_repeated_slide_within_the_budget_is_read_once_and_written_each_time(
    tmp_path: Path,
) -> None:
    docs = tmp_path.resolve() / "docs"
    docs.mkdir()
    (docs / "deck.pptx").write_bytes(repeated_slide_pptx(times=3, slide_bytes=200))
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert (code, report["errors"], report["added"]) == (0, [], 1)


@pytest.mark.skipif(not OCR, reason="Tesseract is not installed")
def test_ocr_reads_within_its_page_caps_and_says_what_it_left(tmp_path: Path) -> None:
    docs = write(tmp_path.resolve() / "docs", "huge-page.pdf", "many-pages.pdf")
    code, report = ingest_json(tmp_path / "c.db", docs, env={"CRAG_EDGE_OCR_MAX_PAGES": "3"})
    assert (code, report["errors"]) == (0, [])
    warnings = {(Path(source).name, reason) for source, reason in report["warnings"]}
    assert warnings == {
        ("huge-page.pdf", "page 1 is 83 inches on a side, over ocr_max_page_inches (50); not "
         "read by OCR"),
        ("many-pages.pdf", "57 scanned pages after the first 3 not read by OCR (ocr_max_pages)"),
        ("many-pages.pdf", "3 of 60 pages have no text, even by OCR"),
    }  # fmt: skip
    assert str(docs / "canary.txt") in stored_sources(tmp_path / "c.db")


def test_an_attachment_or_part_nested_past_the_limit_is_named_by_the_limit(
    tmp_path: Path,
) -> None:
    deep = "<w:ins>" * (MAX_XML_DEPTH + 1) + "</w:ins>" * (MAX_XML_DEPTH + 1)
    xml = (
        '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
        f"<w:body><w:p>{deep}</w:p></w:body></w:document>"
    )
    docs = write(tmp_path.resolve() / "docs")
    (docs / "deep.docx").write_bytes(with_member("plan.docx", "word/document.xml", xml.encode()))
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert code == 0
    assert report["errors"] == [
        [
            str(docs / "deep.docx"),
            f"its XML nests over {MAX_XML_DEPTH} levels deep in word/document.xml; refused "
            "(a parser bomb?)",
        ]
    ]
    assert report["added"] == 1
    assert CANARY in stored_text(tmp_path / "c.db", str(docs / "canary.txt"))
