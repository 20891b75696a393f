"""E-mail: single messages (.eml) and mailboxes (.mbox).

Each message is a section titled by its subject and date (`thread.mbox § Re: migration plan
(2026-03-02)`), opening with its From, To, Date and Subject lines, then its text body (the
HTML one read as a page when there is no plain one), then each attachment of a supported
type, read by its own loader, under its file name. A mailbox is split at its `From ` lines
as it is read, one message at a time: a mailbox of 100,000 messages costs the memory of one
message beyond its text, and stops at the document's text budget like any other document.
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from email.message import EmailMessage, Message
from email.utils import parsedate_to_datetime
from pathlib import Path

from crag_edge.ingest.formats.builder import DocumentText
from crag_edge.ingest.loaders import LoadedDocument, LoadError, read_html

_HEADERS = ("From", "To", "Date", "Subject")
# A message starts at a line "From " at the start of the file or after a blank line (mboxo,
# mboxrd; a "From " inside a body is escaped as ">From ").
_MBOX_SEPARATOR = re.compile(rb"(?:\A|\n\n|\r\n\r\n)From [^\n]*\n")
# Attachments within attachments (a forwarded message's files) are read this deep.
_MAX_NESTING = 2


def load_eml(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    message = _parse(raw)
    text = DocumentText(str(path), max_bytes)
    write_message(text, message, 0)
    headers = {name.lower(): _header(message, name) for name in _HEADERS}
    return text.document(headers["subject"] or path.stem, {k: v for k, v in headers.items() if v})


def load_mbox(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    if not raw.startswith(b"From "):
        raise LoadError(str(path), "not an mbox mailbox: it does not start with a 'From ' line")
    text = DocumentText(str(path), max_bytes)
    count = 0
    for count, message in enumerate(_mbox_messages(raw), start=1):  # noqa: B007
        write_message(text, _parse(message), 0)
    return text.document(path.stem, {"message_count": count})


def _mbox_messages(raw: bytes) -> Iterator[bytes]:
    """Each message's bytes, without its `From ` line, unescaping `>From ` lines."""
    starts = [(m.start(), m.end()) for m in _MBOX_SEPARATOR.finditer(raw)]
    for (_, body_start), (next_start, _) in zip(starts, [*starts[1:], (len(raw), 0)], strict=True):
        yield re.sub(rb"(?m)^>(>*From )", rb"\1", raw[body_start:next_start])


def write_message(text: DocumentText, message: Message, depth: int) -> None:
    """A message's section: its headers, its body, then its readable attachments."""
    subject = _header(message, "Subject") or "(no subject)"
    day = _day(message)
    text.section(1, f"{subject} ({day})" if day else subject)
    text.block("\n".join(f"{name}: {v}" for name in _HEADERS if (v := _header(message, name))))
    text.block(_body(message))
    if depth < _MAX_NESTING and isinstance(message, EmailMessage):
        for attachment in message.iter_attachments():
            _attachment(text, attachment, depth)


def _attachment(text: DocumentText, part: Message, depth: int) -> None:
    """An attachment read by the loader for its file name; others are named, not read."""
    from crag_edge.ingest.formats import is_supported, load_file  # formats load this module

    name = part.get_filename() or ""
    payload = part.get_payload(decode=True)
    if not name or not isinstance(payload, bytes) or not is_supported(Path(name)):
        return
    try:
        loaded = load_file(Path(name), payload, text.max_bytes)
    except LoadError as exc:
        text.warnings.append(f"attachment {name}: {exc.reason}")
        return
    text.section(2, f"attachment {name}")
    text.block(f"Attachment {name}:\n{loaded.text}")


def _parse(raw: bytes) -> Message:
    return email.message_from_bytes(raw, policy=email.policy.default)


def _header(message: Message, name: str) -> str:
    """A header as text; one that cannot be decoded is read as its raw characters."""
    try:
        value = message.get(name)
    except (ValueError, IndexError, TypeError):  # malformed encoded words or addresses
        value = message.get_all(name, [""])[0] if hasattr(message, "get_all") else ""
    return " ".join(str(value or "").split())


def _day(message: Message) -> str:
    try:
        return parsedate_to_datetime(_header(message, "Date")).date().isoformat()
    except (TypeError, ValueError, IndexError):
        return ""


def _body(message: Message) -> str:
    """The plain-text body, else the HTML one as text, else nothing."""
    if not isinstance(message, EmailMessage):
        return ""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError, AssertionError):  # an unknown charset, a bad encoding
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", "replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    return read_html(content)[1] if part.get_content_type() == "text/html" else content
