"""E-mail attachments as documents of their own, on mail written by Python's `mailbox` and
`email` around files made by pandoc and LibreOffice: read by their type's loader, one error
each when they cannot be, and kept, retagged, re-indexed and pruned with their mail file."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.ingest import LoadError, load_file
from crag_edge.ingest.formats import attachments
from crag_edge.ingest.formats.archive import EXPANSION
from crag_edge.ingest.loaders import LoadedDocument
from crag_edge.models.embedder import OnnxEmbedder
from tests.test_cli import invoke
from tests.test_formats import FIXTURES, cite, mail, with_member, write_mbox

SETTINGS = Settings.load(chunk_tokens=64, chunk_overlap=8)
PLAN = (FIXTURES / "plan.docx").read_bytes()
SUPPLIERS = (FIXTURES / "suppliers.xlsx").read_bytes()
SCAN = (FIXTURES / "scan.pdf").read_bytes()


def thread(path: Path, plan: bytes = PLAN) -> Path:
    """A mailbox of two messages, the reply carrying the plan and the suppliers sheet."""
    reply = mail("Re: migration plan", "The plan and the suppliers are attached.", 2)
    reply.add_attachment(plan, maintype="application", subtype="octet-stream", filename="plan.docx")
    reply.add_attachment(SUPPLIERS, maintype="application", subtype="octet-stream",
                         filename="suppliers.xlsx")  # fmt: skip
    return write_mbox(path, [mail("migration plan", "We move the database.", 1), reply])


def attached(doc: LoadedDocument) -> dict[str, LoadedDocument | LoadError]:
    """The attachments of `doc` by file name."""
    return {item.source.rsplit(" \u203a ", 1)[-1]: item for item in doc.attached}


def test_each_attachment_is_read_as_its_type_and_cited_by_its_message(tmp_path: Path) -> None:
    path = thread(tmp_path / "thread.mbox")
    doc = load_file(path, path.read_bytes(), 10_000_000)
    assert "Attachments: plan.docx, suppliers.xlsx" in doc.text and "cutover" not in doc.text
    plan, sheet = doc.attached
    assert isinstance(plan, LoadedDocument) and isinstance(sheet, LoadedDocument)
    assert (plan.title, plan.metadata["from"]) == ("Migration Plan", "Ana <ana@example.org>")
    assert sheet.source == f"{path} \u203a Re: migration plan (2026-03-02) \u203a suppliers.xlsx"
    assert "Supplier: Baltic Steel" in sheet.text  # read as a workbook: rows as records
    message = "thread.mbox \u203a Re: migration plan (2026-03-02)"
    # the sheet whole, as a chunk spanning it is cited
    assert cite(sheet, sheet.text) == f"{message} \u203a suppliers.xlsx rows 1\u20135 § suppliers"


def test_an_attachment_that_cannot_be_read_is_its_own_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lying extension, a zip bomb, a mail file inside a mail file, text past the mail
    file's budget and attachments past its count: each one error, the others read."""
    monkeypatch.setattr(attachments, "MAX_ATTACHMENTS", 6)
    max_bytes = 100_000
    bomb = with_member("handbook.docx", "word/document.xml", b" " * (EXPANSION * max_bytes + 1))
    message = mail("Files", "Files for the audit.", 4)
    files = [
        ("scan.docx", SCAN),  # a PDF named .docx
        ("bomb.docx", bomb),
        ("inner.eml", bytes(mail("Inner", "A forwarded message.", 3))),
        ("notes.txt", b"Berth 4 needs a seal."),
        ("notes.txt", b"Berth 5 needs paint."),  # the same name again: numbered
        ("long.txt", b"word " * 19_995),  # alone within 100,000 bytes, with the notes over
        ("late1.txt", b"one"),
        ("late2.txt", b"two"),
        ("logo.png", b"\x89PNG\r\n"),  # of no type that is read: no error either
    ]
    for name, data in files:
        message.add_attachment(data, maintype="application", subtype="octet-stream",
                               filename=name)  # fmt: skip
    path = tmp_path / "audit.eml"
    path.write_bytes(bytes(message))
    doc = load_file(path, path.read_bytes(), max_bytes)
    assert "Files for the audit." in doc.text
    items = attached(doc)
    reasons = {name: item.reason for name, item in items.items() if isinstance(item, LoadError)}
    assert reasons["scan.docx"] == "its content is a PDF, not what .docx says; rename it to .pdf"
    assert "zip bomb" in reasons["bomb.docx"]
    assert reasons["inner.eml"] == attachments.NESTED
    assert "over max_document_bytes (100,000)" in reasons["long.txt"]
    assert reasons["late1.txt"] == (
        "not read, nor the 1 after it: a mail file's first 6 attachments are read"
    )
    assert set(items) == {*reasons, "notes.txt"}
    notes = [item for item in doc.attached if not isinstance(item, LoadError)]
    assert [(Path(n.source).name, n.text) for n in notes] == [
        ("audit.eml \u203a Files (2026-03-04) \u203a notes.txt", "Berth 4 needs a seal."),
        ("audit.eml \u203a Files (2026-03-04) #2 \u203a notes.txt", "Berth 5 needs paint."),
    ]


def test_the_report_names_the_attachment_that_failed(tmp_path: Path) -> None:
    docs = tmp_path.resolve() / "docs"
    docs.mkdir()
    message = mail("Scans", "The plan, and a scan saved under the wrong name.", 6)
    message.add_attachment(PLAN, maintype="application", subtype="octet-stream",
                           filename="plan.docx")  # fmt: skip
    message.add_attachment(SCAN, maintype="application", subtype="octet-stream",
                           filename="scan.docx")  # fmt: skip
    (docs / "scans.eml").write_bytes(bytes(message))
    result = invoke("ingest", "--db", str(tmp_path / "c.db"), str(docs))
    assert result.exit_code == 0, result.output
    assert "added 2," in result.stdout and "errors 1" in result.stdout
    [failed] = [line for line in result.stderr.splitlines() if line.startswith("failed ")]
    assert failed == (
        f"failed {docs}/scans.eml \u203a Scans (2026-03-06) \u203a scan.docx: its content is a "
        "PDF, not what .docx says; rename it to .pdf"
    )


def test_attachments_are_kept_reindexed_and_pruned_with_their_mail_file(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    docs = tmp_path.resolve() / "docs"
    docs.mkdir()
    box = thread(docs / "thread.mbox")
    plan = f"{box} \u203a Re: migration plan (2026-03-02) \u203a plan.docx"
    with Engine.open(tmp_path / "kb.db", SETTINGS, create=True, embedder=embedder) as engine:
        first = engine.ingest([docs], prune=True)
        assert (first.added, first.errors) == (3, [])
        again = engine.ingest([docs], prune=True)  # not read: same size and mtime
        assert (again.unchanged, again.added, again.pruned, again.chunks_written) == (3, 0, 0, 0)
        [hit] = engine.search("When does the database cutover start?", top_k=1)
        assert hit.chunk.source == plan
        box.unlink()
        thread(box, with_member("plan.docx", "word/document.xml", _edited_plan()))
        edited = engine.ingest([docs], prune=True)
        assert (edited.updated, edited.unchanged, edited.pruned) == (1, 2, 0)
        [hit] = engine.search("When does the database cutover start?", top_k=1)
        assert "03:00 on Sunday" in hit.chunk.text and hit.chunk.source == plan
        box.write_bytes(b"Not a mailbox any more")  # unreadable: it and its attachments stay
        broken = engine.ingest([docs], prune=True)
        assert (len(broken.errors), broken.pruned, len(engine.corpus.list_sources())) == (1, 0, 3)
        box.unlink()
        write_mbox(box, [mail("migration plan", "We move the database.", 1)])
        dropped = engine.ingest([docs], prune=True)  # the reply and its attachments are gone
        assert (dropped.updated, dropped.pruned) == (1, 2)
        box.unlink()
        thread(box)
        back = engine.ingest([docs], prune=True)
        assert (back.added, back.updated) == (2, 1)
        write_mbox(box.with_name("other.mbox"), [mail("Other", "Nothing attached.", 7)])
        box.unlink()
        gone = engine.ingest([docs], prune=True)  # the mailbox and its two attachments
        assert (gone.added, gone.pruned) == (1, 3)
        assert engine.corpus.list_sources() == [str(docs / "other.mbox")]


def _edited_plan() -> bytes:
    """The plan's Word XML with the cutover moved."""
    with zipfile.ZipFile(FIXTURES / "plan.docx") as docx:
        return docx.read("word/document.xml").replace(b"02:00 on Saturday", b"03:00 on Sunday")


def test_attachments_have_their_mail_files_groups(embedder: OnnxEmbedder, tmp_path: Path) -> None:
    docs = tmp_path.resolve() / "docs"
    docs.mkdir()
    box = thread(docs / "thread.mbox")
    with Engine.open(tmp_path / "kb.db", SETTINGS, create=True, embedder=embedder) as engine:
        engine.ingest([docs], default_groups={docs: frozenset({"ops"})})
        groups = {s: engine.corpus.document(s).groups for s in engine.corpus.list_sources()}
        assert len(groups) == 3 and set(groups.values()) == {frozenset({"ops"})}
        retagged = engine.ingest([box], groups=frozenset({"finance"}))
        assert (retagged.retagged, retagged.chunks_written) == (3, 0)
        for source in engine.corpus.list_sources():
            assert engine.corpus.document(source).groups == {"finance"}
        assert engine.search("database cutover", top_k=3, groups=frozenset({"ops"})) == []
