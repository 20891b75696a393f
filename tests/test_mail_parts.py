"""One bad part of a mail file is one error: its body, each attachment and each message of a
mailbox are indexed or refused on their own, by the CLI on real mail files made here, with a
canary file beside them that is always indexed. A real file named like an attachment is
refused, so the report counts what is stored."""

from __future__ import annotations

from pathlib import Path

from crag_edge.attached import SEPARATOR
from crag_edge.ingest.formats.archive import MAX_XML_DEPTH
from crag_edge.ingest.formats.mail import MAX_MIME_DEPTH, mime_depth
from crag_edge.store import Corpus
from tests.test_formats import mail, with_member
from tests.test_hostile_input import ingest_json, stored_sources

W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
CANARY = "Canary: the lighthouse keeper logs the tide at dawn."


def folder_with_canary(tmp_path: Path) -> Path:
    docs = tmp_path.resolve() / "docs"
    docs.mkdir()
    (docs / "canary.txt").write_text(CANARY, encoding="utf-8")
    return docs


def deep_docx(depth: int) -> bytes:
    """plan.docx with one paragraph whose run sits inside `depth` nested insertions."""
    run = "<w:r><w:t>Deep inside.</w:t></w:r>"
    body = "<w:ins>" * depth + run + "</w:ins>" * depth
    xml = f'<w:document xmlns:w="{W}"><w:body><w:p>{body}</w:p></w:body></w:document>'
    return with_member("plan.docx", "word/document.xml", xml.encode())


def test_an_attachment_nested_too_deep_is_its_own_error(tmp_path: Path) -> None:
    docs = folder_with_canary(tmp_path)
    message = mail("Audit files", "The audit files are attached.", 7)
    for name, data in (("deep.docx", deep_docx(5000)), ("fine.txt", b"Berth 4 needs a seal.")):
        message.add_attachment(data, maintype="application", subtype="octet-stream",
                               filename=name)  # fmt: skip
    (docs / "audit.eml").write_bytes(bytes(message))
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert code == 0
    deep = f"{docs / 'audit.eml'}{SEPARATOR}Audit files (2026-03-07){SEPARATOR}deep.docx"
    [(source, reason)] = report["errors"]
    assert source == deep
    assert reason == (
        f"its XML nests over {MAX_XML_DEPTH} levels deep in word/document.xml; refused "
        "(a parser bomb?)"
    )
    fine = deep.replace("deep.docx", "fine.txt")
    assert set(stored_sources(tmp_path / "c.db")) == {
        str(docs / "canary.txt"),
        str(docs / "audit.eml"),
        fine,
    }
    assert report["added"] == 3


def nested_multipart(subject: str, depth: int) -> bytes:
    """A message whose text sits inside `depth` nested multipart parts."""
    head = f"From: ana@example.org\nSubject: {subject}\nDate: Mon, 09 Mar 2026 09:30:00 +0000\n"
    opening = "".join(
        f'Content-Type: multipart/mixed; boundary="b{level}"\n\n--b{level}\n'
        for level in range(depth)
    )
    closing = "".join(f"--b{level}--\n" for level in reversed(range(depth)))
    return f"{head}{opening}Content-Type: text/plain\n\nDeep inside the nest.\n{closing}".encode()


def mbox(path: Path, messages: list[bytes]) -> Path:
    """A mailbox of these messages (none holds a line starting `From `)."""
    path.write_bytes(b"".join(b"From ana@example.org Mon Mar  2 09:30:00 2026\n" + m + b"\n\n"
                              for m in messages))  # fmt: skip
    return path


def test_a_mailbox_message_nested_too_deep_loses_that_message_alone(tmp_path: Path) -> None:
    docs = folder_with_canary(tmp_path)
    deep = nested_multipart("Nest", 3000)
    assert mime_depth(deep) == MAX_MIME_DEPTH + 1  # counted up to just past the limit
    messages = [
        bytes(mail("Tide tables", "High tide is at 06:12 on Monday.", 8)),
        deep,
        bytes(mail("Harbour dues", "Harbour dues rise to 40 euros in April.", 10)),
    ]
    box = mbox(docs / "harbour.mbox", messages)
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert code == 0
    assert report["errors"] == [
        [
            f"{box}{SEPARATOR}Nest (2026-03-09)",
            f"its MIME parts nest {MAX_MIME_DEPTH + 1:,} levels deep, over {MAX_MIME_DEPTH}; "
            "refused (a parser bomb?)",
        ]
    ]
    assert report["added"] == 2
    code, found = ingest_json(tmp_path / "c.db", docs)  # unchanged: nothing read again
    assert (found["unchanged"], found["errors"]) == (2, [])
    text = stored_text(tmp_path / "c.db", str(box))
    assert "06:12 on Monday" in text and "40 euros in April" in text
    assert "Deep inside" not in text


def test_a_forward_of_forwards_within_the_limit_is_read(tmp_path: Path) -> None:
    message = mail("Forward 0", "The first word of the chain.", 1)
    for level in range(1, 40):
        outer = mail(f"Forward {level}", f"Forwarding, level {level}.", 1)
        outer.add_attachment(message)
        message = outer
    assert mime_depth(bytes(message)) < MAX_MIME_DEPTH
    docs = folder_with_canary(tmp_path)
    (docs / "chain.eml").write_bytes(bytes(message))
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert (code, report["errors"], report["added"]) == (0, [], 2)


def test_a_real_file_named_like_an_attachment_is_refused_and_the_report_counts_what_is_stored(
    tmp_path: Path,
) -> None:
    docs = folder_with_canary(tmp_path)
    message = mail("Hello", "Notes attached.", 1, ("n.txt", b"The notes of the mail."))
    (docs / "q.eml").write_bytes(bytes(message))
    posing = docs / f"q.eml{SEPARATOR}Hello (2026-03-01){SEPARATOR}n.txt"
    posing.write_text("A real file named like the attachment.", encoding="utf-8")
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert code == 0
    assert report["errors"] == [
        [
            str(posing),
            f"its path reads as the name of an attachment of q.eml; rename it "
            f"('{SEPARATOR.strip()}' after .eml or .mbox is how attachments are named)",
        ]
    ]
    stored = stored_sources(tmp_path / "c.db")
    assert report["added"] == len(stored) == 3
    assert stored_text(tmp_path / "c.db", str(posing)) == "The notes of the mail."


def stored_text(db: Path, source: str) -> str:
    with Corpus.open(db, readonly=True) as corpus:
        stored = corpus.document(source)
        assert stored is not None, source
        return corpus.document_text(stored.id)
