"""E-mail: single messages (.eml) and mailboxes (.mbox).

Each message is a section titled by its subject and date (`thread.mbox § Re: migration plan
(2026-03-02)`), opening with its From, To, Date and Subject lines, then its text body (the
HTML one read as a page when there is no plain one), then the names of its attachments.
Each attachment of a supported type is a document of its own (`attachments`), carried
beside the mail file's in `LoadedDocument.attached`. A mailbox is split at its `From ` lines
and each message parsed and written in turn: a mailbox of 100,000 messages costs the file
and its text, never 100,000 parsed messages, and stops at the text budget like any document.
"""

from __future__ import annotations

import email
import email.policy
import re
from collections.abc import Iterator
from dataclasses import replace
from email.header import decode_header, make_header
from email.message import Message
from email.utils import parsedate_to_datetime
from pathlib import Path

from crag_edge.ingest.formats.attachments import Attachments, LoaderFor
from crag_edge.ingest.formats.builder import DocumentText
from crag_edge.ingest.formats.html import read_html
from crag_edge.ingest.loaders import LoadedDocument, LoadError, clean_text
from crag_edge.ingest.outline import short_title

_HEADERS = ("From", "To", "Date", "Subject")
# A message starts at a line "From " at the start of the file or after a blank line (mboxo,
# mboxrd; a "From " inside a body is escaped as ">From ").
_MBOX_SEPARATOR = re.compile(rb"(?:\A|\n\n|\r\n\r\n)From [^\n]*\n")


def load_eml(path: Path, raw: bytes, max_bytes: int, *, attachments: LoaderFor) -> LoadedDocument:
    message = _parse(raw)
    text = DocumentText(str(path), max_bytes)
    attached = Attachments(str(path), max_bytes, attachments)
    write_message(text, message, attached)
    headers = _headers(message)
    document = text.document(headers.get("subject") or path.stem, headers)
    return replace(document, attached=attached.documents())


def load_mbox(path: Path, raw: bytes, max_bytes: int, *, attachments: LoaderFor) -> LoadedDocument:
    if not raw.startswith(b"From "):
        raise LoadError(str(path), "not an mbox mailbox: it does not start with a 'From ' line")
    text = DocumentText(str(path), max_bytes)
    attached = Attachments(str(path), max_bytes, attachments)
    count = 0
    for count, message in enumerate(_mbox_messages(raw), start=1):  # noqa: B007
        write_message(text, _parse(message), attached)
    document = text.document(path.stem, {"message_count": count})
    return replace(document, attached=attached.documents())


def _mbox_messages(raw: bytes) -> Iterator[bytes]:
    """Each message's bytes, without its `From ` line, unescaping `>From ` lines."""
    starts = [(m.start(), m.end()) for m in _MBOX_SEPARATOR.finditer(raw)]
    for (_, body_start), (next_start, _) in zip(starts, [*starts[1:], (len(raw), 0)], strict=True):
        yield re.sub(rb"(?m)^>(>*From )", rb"\1", raw[body_start:next_start])


def write_message(text: DocumentText, message: Message, attached: Attachments) -> None:
    """A message's section: its headers, its body, the names of its attachments; those of a
    supported type go to `attached`, to be documents of their own."""
    title, headers = _title(message), _headers(message)
    text.section(1, title)
    text.block("\n".join(f"{name.title()}: {value}" for name, value in headers.items()))
    body, parts = _parts(message)
    text.block(body)
    named = [(name, part) for part in parts if (name := _file_name(part))]
    text.block("Attachments: " + ", ".join(name for name, _ in named) if named else "")
    for name, part in named:
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            attached.add(title, headers, name, payload)


def _title(message: Message) -> str:
    """The message's section title, which its attachments' names hold too: `Subject (day)`."""
    subject = _header(message, "Subject") or "(no subject)"
    day = _day(message)
    return short_title(clean_text(f"{subject} ({day})" if day else subject))


def _headers(message: Message) -> dict[str, str]:
    """From, To, Date and Subject, as metadata (`from`, ...), those the message has."""
    return {name.lower(): v for name in _HEADERS if (v := _header(message, name))}


def _parts(message: Message) -> tuple[str, list[Message]]:
    """(the plain-text body, else the HTML one as text; the attachments), read with the
    compat32 policy: the default policy's header objects made a mailbox 20x slower."""
    plain = html = None
    attachments = []
    for part in message.walk():
        if part.is_multipart():
            continue
        if part.get_filename() or part.get_content_disposition() == "attachment":
            attachments.append(part)
        elif part.get_content_type() == "text/plain" and plain is None:
            plain = _decoded(part)
        elif part.get_content_type() == "text/html" and html is None:
            html = _decoded(part)
    if plain is None and html is not None:
        plain = read_html(html).text
    return plain or "", attachments


def _decoded(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    try:
        return payload.decode(part.get_content_charset() or "utf-8", "replace")
    except LookupError:  # a charset Python does not know
        return payload.decode("utf-8", "replace")


def _file_name(part: Message) -> str:
    """An attachment's file name as text (its encoded words decoded); "" if it has none."""
    return " ".join(clean_text(_decode_words(part.get_filename() or "")).split())


def _parse(raw: bytes) -> Message:
    return email.message_from_bytes(raw, policy=email.policy.compat32)


def _header(message: Message, name: str) -> str:
    """A header as text, its encoded words (`=?utf-8?q?...?=`) decoded."""
    return " ".join(_decode_words(str(message.get(name) or "")).split())


def _decode_words(value: str) -> str:
    try:
        return str(make_header(decode_header(value)))
    except (LookupError, ValueError, UnicodeDecodeError):  # a bad charset or encoding
        return value


def _day(message: Message) -> str:
    try:
        return parsedate_to_datetime(_header(message, "Date")).date().isoformat()
    except (TypeError, ValueError, IndexError):
        return ""
