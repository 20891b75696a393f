"""Every document format through ingest and retrieval end to end (real MiniLM, real SQLite,
the real CLI): each question answered only by one format's text finds that chunk, cited where
a reader opens it; hostile files fail alone; watching and re-ingesting treat every format
alike; a folder of which nothing could be read exits 1."""

from __future__ import annotations

import json
import shutil
import sys
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest

from crag_edge.citations import locate, locator
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.types import Chunk
from tests.test_cli import invoke
from tests.test_formats import FIXTURES, OCR, mail, with_member, write_mbox

DOCUMENTS = [
    "handbook.docx", "handbook.odt", "deck.pptx", "suppliers.xlsx", "crew.ods", "book.epub",
    "tables.pdf", "scan.pdf", "numeric-types.docx", "boolean-type.docx", "money-type.odt",
    "values.xlsx",
]  # fmt: skip
SETTINGS = Settings.load(chunk_tokens=64, chunk_overlap=8)


def user_folder(root: Path) -> Path:
    """The fixtures, a mailbox (a Word file attached to a message) and a saved message, as a
    user's folder holds them (also the corpus of `scripts/formats_folder.py`, for asking the
    default LLM these questions)."""
    docs = root.resolve() / "docs"
    docs.mkdir()
    for name in DOCUMENTS:
        shutil.copy(FIXTURES / name, docs / name)
    write_mbox(
        docs / "thread.mbox",
        [
            mail("migration plan", "We move the customer database to the new cluster.", 1),
            mail(
                "Re: migration plan",
                "The rollback window for the migration is two hours.",
                2,
                ("plan.docx", (FIXTURES / "plan.docx").read_bytes()),
            ),
        ],
    )
    (docs / "invoice.eml").write_bytes(
        bytes(mail("Invoice 311", "Invoice 311 for the crane repair is due on 30 April.", 5))
    )
    return docs


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return user_folder(tmp_path)


# (question, the words that answer it, where the answer's citation must point)
QUESTIONS = [
    ("What fuel does the emergency generator run on?", "runs on biodiesel", "§ Power"),
    ("Why did the offline installer slip?", "certificate expired", "deck.pptx slide 2 § Roadmap"),
    (
        "What is the lead time for anchor chain from Baltic Steel?",
        "Anchor chain; Supplier: Baltic Steel; Lead time: 3 weeks",
        "suppliers.xlsx row 3 § suppliers",
    ),
    (
        "Which crew member is the engineer on the night watch?",
        "Name: Tom Reyes; Role: Engineer",
        "crew.ods row 3 § crew",
    ),
    ("What sound signal does a vessel make in fog?", "one prolonged blast", "book.epub § Fog"),
    (
        "How long is the rollback window of the migration?",
        "rollback window for the migration is two hours",
        "thread.mbox § Re: migration plan (2026-03-02)",
    ),
    (
        "At what time does the database cutover start?",
        "cutover starts at 02:00 on Saturday 14 March",
        "thread.mbox \u203a Re: migration plan (2026-03-02) \u203a plan.docx § Cutover",
    ),
    (
        "When is the invoice for the crane repair due?",
        "due on 30 April",
        "invoice.eml § Invoice 311 (2026-03-05)",
    ),
    (
        "What is the crane lift limit?",
        "Crane lift; Default: 2 tonnes; Limit: 5 tonnes",
        "tables.pdf p. 2",
    ),
    # A table row of a document, read alone with its table's caption and column names.
    (
        "How many bytes does the money type take?",
        "Monetary Types \u2014 Name: money; Storage Size: 8 bytes",
        "money-type.odt row 1 § 8.2. Monetary Types",
    ),
    (
        "How much storage does a boolean use?",
        "Boolean Data Type \u2014 Name: boolean; Storage Size: 1 byte",
        "boolean-type.docx row 1 § 8.6. Boolean Type",
    ),
    (
        "How many bytes does a bigint take?",
        "Numeric Types \u2014 Name: bigint; Storage Size: 8 bytes",
        "numeric-types.docx row 3 § 8.1. Numeric Types",
    ),
    # Values as the sheet shows them: not 0.125, 1234.5 or the day number 46082.
    ("What discount did Harbour Cafe get?", "Discount: 12.5%", "values.xlsx row 2 § Orders"),
    (
        "What was the total of the Harbour Cafe order?",
        "Total: $1,234.50",
        "values.xlsx row 2 § Orders",
    ),
    ("When did Harbour Cafe order?", "Ordered on: 2026-03-01", "values.xlsx row 2 § Orders"),
]
SCANNED = (
    "How often is the lighthouse lamp replaced?",
    "four thousand hours",
    "scan.pdf p. 2 (OCR)",
)


def cited(chunk: Chunk, words: str) -> str:
    """The citation of `words` inside a retrieved chunk, as an answer's evidence is cited."""
    start = chunk.start + chunk.text.index(words)
    where = locate(chunk.places, start, start + len(words))
    return locator(replace(chunk, pages=where.pages, section=where.section))


def test_a_question_each_format_alone_answers_finds_it_cited_by_place(
    folder: Path, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    with Engine.open(tmp_path / "kb.db", SETTINGS, create=True, embedder=embedder) as engine:
        report = engine.ingest([folder])
        assert report.errors == [] and report.skipped == []
        assert report.added == len(DOCUMENTS) + 3  # the mailbox, its attachment, the message
        for question, words, expected in QUESTIONS + ([SCANNED] if OCR else []):
            [best] = engine.search(question, top_k=1)
            assert words in best.chunk.text, (question, locator(best.chunk))
            assert cited(best.chunk, words).endswith(expected)


def test_json_output_carries_the_locator(folder: Path, tmp_path: Path) -> None:
    db = str(tmp_path / "kb.db")
    assert invoke("ingest", "--db", db, str(folder / "deck.pptx")).exit_code == 0
    result = invoke("query", "--db", db, "--json", "--top-k", "1", "Why did the installer slip?")
    [hit] = json.loads(result.stdout)["hits"]
    # The small deck is one chunk: it spans the slides, and most of it is the Roadmap slide.
    assert (hit["locator"], hit["pages"], hit["section"]) == (
        "deck.pptx slides 1\u20134 § Roadmap",
        [1, 4],
        "Roadmap",
    )


def test_hostile_files_each_fail_alone_with_one_line(tmp_path: Path) -> None:
    docs = tmp_path.resolve() / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("Photosynthesis makes sugar from light.")
    max_bytes = 10_000_000
    bomb = with_member("handbook.docx", "word/document.xml", b" " * (20 * max_bytes + 1))
    (docs / "bomb.docx").write_bytes(bomb)
    laughs = b'<!DOCTYPE d [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]><d>&b;</d>'
    (docs / "laughs.epub").write_bytes(with_member("book.epub", "EPUB/text/ch001.xhtml", laughs))
    (docs / "laughs.docx").write_bytes(with_member("handbook.docx", "word/document.xml", laughs))
    shutil.copy(FIXTURES / "locked.docx", docs / "locked.docx")
    (docs / "cut.xlsx").write_bytes((FIXTURES / "suppliers.xlsx").read_bytes()[:2000])
    shutil.copy(FIXTURES / "scan.pdf", docs / "report.docx")
    messages = "".join(
        f"From a@b Mon Mar  2 09:30:00 2026\nSubject: Ticket {i}\n\nBerth {i} needs a seal.\n\n"
        for i in range(100_000)
    )
    (docs / "tickets.mbox").write_text(messages * 2)
    result = invoke("ingest", "--db", str(tmp_path / "c.db"), str(docs))
    assert result.exit_code == 0, result.output
    assert "added 1," in result.stdout and "errors 7" in result.stdout
    failed = {
        line.split(": ", 1)[0].removeprefix("failed "): line.split(": ", 1)[1]
        for line in result.stderr.splitlines()
        if line.startswith("failed ")
    }
    assert sorted(Path(name).name for name in failed) == sorted(
        ["bomb.docx", "laughs.epub", "laughs.docx", "locked.docx", "cut.xlsx", "report.docx",
         "tickets.mbox"]
    )  # fmt: skip
    reasons = {Path(name).name: reason for name, reason in failed.items()}
    assert "zip bomb" in reasons["bomb.docx"]
    assert "XML bomb or XXE" in reasons["laughs.epub"] and "XXE" in reasons["laughs.docx"]
    assert "password-protected" in reasons["locked.docx"]
    assert "damaged or truncated" in reasons["cut.xlsx"]
    assert "its content is a PDF" in reasons["report.docx"]
    assert "over max_document_bytes" in reasons["tickets.mbox"]


def test_a_folder_of_which_nothing_could_be_read_exits_1_saying_why(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name in ("a.doc", "b.doc", "slides.ppt"):
        (docs / name).write_bytes(b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1 legacy")
    (docs / "cut.docx").write_bytes((FIXTURES / "handbook.docx").read_bytes()[:500])
    result = invoke("ingest", "--db", str(tmp_path / "c.db"), str(docs))
    assert result.exit_code == 1
    lines = result.stderr.splitlines()
    assert "skipped 2 files: unsupported file type .doc; save it as .docx" in "\n".join(lines)
    assert lines[-1] == (
        "error: nothing was indexed: 3 skipped as unsupported and 1 could not be read "
        "(each named above)"
    )


def test_reingest_and_watch_treat_new_formats_as_the_old(
    folder: Path, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    """What the watcher runs on every change: unchanged files cost nothing, an edited one is
    indexed again, a deleted one is pruned."""
    with Engine.open(tmp_path / "kb.db", SETTINGS, create=True, embedder=embedder) as engine:
        first = engine.ingest([folder], prune=True)
        again = engine.ingest([folder], prune=True)
        assert (again.added, again.updated, again.unchanged) == (0, 0, first.added)
        sheet = "xl/sharedStrings.xml"
        with zipfile.ZipFile(folder / "suppliers.xlsx") as workbook:
            edited = workbook.read(sheet).replace(b"Baltic Steel", b"Nordic Chain")
        (folder / "suppliers.xlsx").write_bytes(with_member("suppliers.xlsx", sheet, edited))
        (folder / "deck.pptx").unlink()
        last = engine.ingest([folder], prune=True)
        assert (last.updated, last.pruned, last.unchanged) == (1, 1, first.added - 2)
        [hit] = engine.search("lead time for anchor chain", top_k=1)
        assert "Nordic Chain" in hit.chunk.text


def test_a_corpus_keeps_its_reading_until_asked_to_read_it_again(
    embedder: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A PDF ingested while its tables could not be laid out (the office extra missing), the
    extra installed since: ingesting again keeps what the corpus holds, cited as before, until
    `ingest --reread` reads the file anew; its access groups stay."""
    pdf = tmp_path.resolve() / "tables.pdf"
    shutil.copy(FIXTURES / "tables.pdf", pdf)
    db, row = tmp_path / "kb.db", "Service: Crane lift; Default: 2 tonnes; Limit: 5 tonnes"
    with monkeypatch.context() as without_extra:
        without_extra.setitem(sys.modules, "pdfplumber", None)  # its import fails
        with Engine.open(db, SETTINGS, create=True, embedder=embedder) as engine:
            engine.ingest([pdf], groups=frozenset({"crew"}))
            [old] = engine.search("crane lift limit", top_k=1)
    assert row not in old.chunk.text and "Crane lift" in old.chunk.text
    with Engine.open(db, SETTINGS, embedder=embedder) as engine:
        again = engine.ingest([pdf])
        assert (again.unchanged, again.updated) == (1, 0)
        [hit] = engine.search("crane lift limit", top_k=1)
        assert (hit.chunk, locator(hit.chunk)) == (old.chunk, locator(old.chunk))
    sized = {"CRAG_EDGE_CHUNK_TOKENS": "64", "CRAG_EDGE_CHUNK_OVERLAP": "8"}  # as SETTINGS
    result = invoke("ingest", "--db", str(db), "--reread", str(pdf), env=sized)
    assert result.exit_code == 0, result.output
    assert "updated 1," in result.stdout
    with Engine.open(db, SETTINGS, embedder=embedder) as engine:
        [hit] = engine.search("crane lift limit", top_k=1)
        assert row in hit.chunk.text and cited(hit.chunk, row) == "tables.pdf p. 2"
        assert engine.corpus.document(str(pdf)).groups == frozenset({"crew"})  # type: ignore[union-attr]
        assert engine.ingest([pdf], reread=True).unchanged == 1  # read again, the same: kept
    watching = invoke("ingest", "--db", str(db), "--reread", "--watch", str(tmp_path))
    assert watching.exit_code == 2 and "--watch" in watching.output


def test_a_scan_without_ocr_is_one_warning_saying_how_to_read_it(
    embedder: OnnxEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", "")  # no tesseract to be found
    scan = tmp_path.resolve() / "scan.pdf"
    shutil.copy(FIXTURES / "scan.pdf", scan)
    with Engine.open(tmp_path / "kb.db", SETTINGS, create=True, embedder=embedder) as engine:
        report = engine.ingest([scan])
    [(source, warning)] = report.warnings
    assert source == str(scan) and warning.startswith("2 of 2 pages have no text layer")
    assert "apt-get install tesseract-ocr" in warning
