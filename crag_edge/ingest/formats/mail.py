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
from dataclasses import dataclass, replace
from email.header import decode_header, make_header
from email.message import Message
from email.parser import BytesHeaderParser
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
# Multipart and attached-message parts nested deeper than this are refused: real mail nests a
# few levels (a forward of a forward of a reply: two per forward), and Python's parser
# recurses once per level.
MAX_MIME_DEPTH = 100
_CONTAINER_TYPE = re.compile(rb"(?im)^content-type:\s*(multipart|message)/")
_BOUNDARY = re.compile(rb'(?i)boundary\s*=\s*(?:"([^"\r\n]+)"|([^\s;"]+))')


def load_eml(path: Path, raw: bytes, max_bytes: int, *, attachments: LoaderFor) -> LoadedDocument:
    if (depth := mime_depth(raw)) > MAX_MIME_DEPTH:
        raise LoadError(str(path), too_deep(depth))
    message = _read(_parse(raw))
    text = DocumentText(str(path), max_bytes)
    attached = Attachments(str(path), max_bytes, attachments)
    write_message(text, message, attached)
    document = text.document(message.headers.get("subject") or path.stem, message.headers)
    return replace(document, attached=attached.documents())


def load_mbox(path: Path, raw: bytes, max_bytes: int, *, attachments: LoaderFor) -> LoadedDocument:
    if not raw.startswith(b"From "):
        raise LoadError(str(path), "not an mbox mailbox: it does not start with a 'From ' line")
    text = DocumentText(str(path), max_bytes)
    attached = Attachments(str(path), max_bytes, attachments)
    count = 0
    for count, data in enumerate(_mbox_messages(raw), start=1):  # noqa: B007
        message = _mbox_message(data)
        if isinstance(message, _Message):
            write_message(text, message, attached)
        else:  # this message alone is lost
            attached.refuse(*message)
    document = text.document(path.stem, {"message_count": count})
    return replace(document, attached=attached.documents())


def _mbox_messages(raw: bytes) -> Iterator[bytes]:
    """Each message's bytes, without its `From ` line, unescaping `>From ` lines."""
    starts = [(m.start(), m.end()) for m in _MBOX_SEPARATOR.finditer(raw)]
    for (_, body_start), (next_start, _) in zip(starts, [*starts[1:], (len(raw), 0)], strict=True):
        yield re.sub(rb"(?m)^>(>*From )", rb"\1", raw[body_start:next_start])


@dataclass(frozen=True)
class _Message:
    """A message read whole before any of it is written, so one that cannot be read leaves
    nothing of it behind: its section title, headers, body, the names of its attachments and
    the payloads of those that have one."""

    title: str
    headers: dict[str, str]
    body: str
    names: list[str]
    files: list[tuple[str, bytes]]


def _read(message: Message) -> _Message:
    body, parts = _parts(message)
    named = [(name, part) for part in parts if (name := _file_name(part))]
    files = [
        (name, payload)
        for name, part in named
        if isinstance(payload := part.get_payload(decode=True), bytes)
    ]
    names = [name for name, _ in named]
    return _Message(_title(message), _headers(message), body, names, files)


def _mbox_message(raw: bytes) -> _Message | tuple[str, str]:
    """A mailbox's message, or (its title, why it cannot be read)."""
    if (depth := mime_depth(raw)) > MAX_MIME_DEPTH:
        return _title(_parse_headers(raw)), too_deep(depth)
    try:
        return _read(_parse(raw))
    except Exception as exc:  # a parser bug on one odd message loses that message alone
        return _title(_parse_headers(raw)), f"unexpected {type(exc).__name__}: {exc}"


def write_message(text: DocumentText, message: _Message, attached: Attachments) -> None:
    """A message's section: its headers, its body, the names of its attachments; those of a
    supported type go to `attached`, to be documents of their own."""
    text.section(1, message.title)
    text.block("\n".join(f"{name.title()}: {value}" for name, value in message.headers.items()))
    text.block(message.body)
    text.block("Attachments: " + ", ".join(message.names) if message.names else "")
    for name, payload in message.files:
        attached.add(message.title, message.headers, name, payload)


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
    compat32 policy: the default policy's header objects made a mailbox many times slower to
    read (docs/formats.md, "Files that amplify")."""
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


def _parse_headers(raw: bytes) -> Message:
    """The message's headers alone (its parts are not parsed, so they cannot nest)."""
    return BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)


def too_deep(depth: int) -> str:
    return (
        f"its MIME parts nest {depth:,} levels deep, over {MAX_MIME_DEPTH}; refused "
        "(a parser bomb?)"
    )


def mime_depth(raw: bytes) -> int:
    """How deep a message's multipart and attached-message parts nest, told from its lines
    without parsing it (Python's parser recurses once per level and fails past ~250), up to
    one level past `MAX_MIME_DEPTH`. A part's headers follow its boundary line; a boundary
    line of an enclosing part closes every part inside it."""
    open_parts: list[bytes] = []  # the boundaries of the parts open; b"" an attached message
    deepest, lines = 0, iter(raw.splitlines())
    in_headers = True
    for line in lines:
        if in_headers:
            kind, boundary = _part_kind(line, lines)
            in_headers = kind == "message"  # an attached message's own headers follow
            if kind:
                open_parts.append(boundary)
                deepest = max(deepest, len(open_parts))
                if deepest > MAX_MIME_DEPTH:
                    break
        elif line.startswith(b"--"):
            in_headers = _close_parts(open_parts, line.rstrip())
    return deepest


def _part_kind(first: bytes, lines: Iterator[bytes]) -> tuple[str, bytes]:
    """("multipart", its boundary), ("message", b"") or ("", b"") of the part whose header
    block starts at `first` (the block is read up to its blank line)."""
    block = [first]
    while block[-1].strip():
        block.append(next(lines, b""))
    headers = b"\n".join(block)
    found = _CONTAINER_TYPE.search(headers)
    if found is None:
        return "", b""
    kind = found.group(1).decode().lower()
    if kind == "message":
        return kind, b""
    boundary = _BOUNDARY.search(headers, found.end())
    return (kind, boundary.group(1) or boundary.group(2)) if boundary else ("", b"")


def _close_parts(open_parts: list[bytes], line: bytes) -> bool:
    """Apply a `--boundary` or `--boundary--` line; whether a part's headers follow."""
    for index in range(len(open_parts) - 1, -1, -1):
        boundary = open_parts[index]
        if boundary and line == b"--" + boundary + b"--":
            del open_parts[index:]
            return False
        if boundary and line == b"--" + boundary:
            del open_parts[index + 1 :]
            return True
    return False


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
