"""The names of documents carried inside a file: an e-mail's attachments.

An attachment is a document of its own, named by the mail file it came in, its message and
its own file name: `/docs/thread.mbox > Re: migration plan (2026-03-02) > plan.docx`. The
name ends in the attachment's file name, so its suffix says what its places are (a sheet's
rows, a deck's slides), and it begins with the mail file's path, so everything that goes by
files (pruning a folder, telling whether a file is gone) finds the file it came from
(`file_of`), and a citation names the message a reader opens (`shown_name`). (">" stands
for the single angle quotation mark of `SEPARATOR`.)
"""

from __future__ import annotations

import re
from pathlib import Path, PureWindowsPath

# Between the mail file, the message and the attachment ("A > B" with a single angle quotation
# mark), as between the headings of a path.
SEPARATOR = " \u203a "
# Files whose attachments are documents of their own.
CONTAINERS = (".eml", ".mbox")
_CONTAINER = re.compile(
    "|".join(re.escape(suffix + SEPARATOR) for suffix in CONTAINERS), re.IGNORECASE
)


def attached_source(file: str, message: str, name: str) -> str:
    """The name of the attachment `name` of the message titled `message` in `file`."""
    return SEPARATOR.join((file, message, file_name(name)))


def file_name(name: str) -> str:
    """An attachment's file name without any folders: a sender may call it `../../x` or
    `C:\\x`, and the name must end in the file name its type is told by."""
    return PureWindowsPath(name).name


def is_container(path: Path) -> bool:
    return path.suffix.lower() in CONTAINERS


def _split(source: str) -> tuple[str, str] | None:
    """(the mail file, the rest) of an attachment's name; None for any other source."""
    found = _CONTAINER.search(source)
    if found is None:
        return None
    cut = found.end() - len(SEPARATOR)
    return source[:cut], source[found.end() :]


def file_of(source: str) -> str:
    """The file a document was read from: its own path, or the mail file of an attachment."""
    parts = _split(source)
    return source if parts is None else parts[0]


def shown_name(source: str) -> str:
    """How a citation names a document: its file name, or for an attachment the mail file's
    name, the message and the attachment (`thread.mbox > Re: plan (2026-03-02) > plan.docx`)."""
    parts = _split(source)
    if parts is None:
        return Path(source).name or source
    file, rest = parts
    return f"{Path(file).name}{SEPARATOR}{rest}"


def posing_as_attached(path: str) -> str | None:
    """Why a file cannot be indexed under its own path: the path reads as an attachment's
    name (a file named `q.eml > Hello (2026-01-01) > n.txt` beside `q.eml`), so the
    mail file could carry a document of that very name, and pruning and access groups would
    take it for one of the mail file's. None for any other path."""
    file = file_of(path)
    if file == path:
        return None
    return (
        f"its path reads as the name of an attachment of {Path(file).name}; rename it "
        f"('{SEPARATOR.strip()}' after .eml or .mbox is how attachments are named)"
    )
