"""A mail file's attachments, each read as a document of its own, within bounds.

An attachment of a supported type is read by the loader its file name calls for (a `.docx`
as a Word file, checked against its content like any file) and named by its mail file,
message and file name (`crag_edge.attached`). A mail file can hold many of them, each one
unpacking to as much text as a file: so a mail file's attachments are read up to
`MAX_ATTACHMENTS` and up to one `max_document_bytes` of text together, and a 10 MB mailbox
never becomes thousands of documents or gigabytes of text. An attachment that cannot be read
(a lying extension, a zip bomb, a mail file inside a mail file, one past those bounds) is an
error of its own, named by the attachment; the message and the other attachments are read.
So is a message of a mailbox that cannot be read (`refuse`), named by its title.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from crag_edge.attached import SEPARATOR, attached_source, file_name, is_container
from crag_edge.ingest.loaders import LoadedDocument, LoadError, too_large

# Attachments of supported types read per mail file; the rest are one error.
MAX_ATTACHMENTS = 1000
# The loader for an attachment of this file name: it reads (bytes, max_bytes); None for a type
# that is not read.
LoaderFor = Callable[[Path], Callable[[bytes, int], LoadedDocument] | None]
NESTED = "a mail file attached to a mail file; save it and ingest it on its own"


class Attachments:
    """The attachments of one mail file (`file`), read as they come, message by message."""

    def __init__(self, file: str, max_bytes: int, loader_for: LoaderFor) -> None:
        self.file = file
        self.max_bytes = max_bytes
        self._loader_for = loader_for
        self._read: list[LoadedDocument | LoadError] = []
        self._names: Counter[tuple[str, str]] = Counter()
        self._text_bytes = 0
        self._over: list[str] = []  # the attachments past MAX_ATTACHMENTS

    def add(self, message: str, headers: dict[str, Any], name: str, payload: bytes) -> None:
        """The attachment `name` of the message titled `message` (with `headers`, kept as its
        document's metadata); nothing for a type that is not read."""
        path = Path(file_name(name))
        load = self._loader_for(path)
        if load is None:
            return
        source = self._source(message, path.name)
        if len(self._read) >= MAX_ATTACHMENTS:
            self._over.append(source)
        elif is_container(path):
            self._read.append(LoadError(source, NESTED))
        else:
            self._read.append(self._load(source, load, payload, headers))

    def refuse(self, message: str, reason: str) -> None:
        """A message of the mail file that cannot be read, named by its title: its error
        stands beside the attachments, and the file's other messages are read."""
        self._read.append(LoadError(SEPARATOR.join((self.file, message)), reason))

    def documents(self) -> tuple[LoadedDocument | LoadError, ...]:
        """Each attachment read, or why it was not; one error stands for all those past the
        count, so a flood of attachments is one line of the report."""
        if not self._over:
            return tuple(self._read)
        more = f", nor the {len(self._over) - 1:,} after it" if len(self._over) > 1 else ""
        reason = f"not read{more}: a mail file's first {MAX_ATTACHMENTS:,} attachments are read"
        return (*self._read, LoadError(self._over[0], reason))

    def _load(
        self,
        source: str,
        load: Callable[[bytes, int], LoadedDocument],
        payload: bytes,
        headers: dict[str, Any],
    ) -> LoadedDocument | LoadError:
        try:
            loaded = load(payload, self.max_bytes)
        except LoadError as exc:
            return LoadError(source, exc.reason)
        except Exception as exc:  # a loader bug on one odd attachment loses it alone
            return LoadError(source, f"unexpected {type(exc).__name__}: {exc}")
        total = self._text_bytes + len(loaded.text.encode("utf-8"))
        if total > self.max_bytes:
            reason = "with it, this mail file's attachments would hold "
            return LoadError(source, reason + too_large(total, self.max_bytes) + " of text")
        self._text_bytes = total
        return replace(loaded, source=source, metadata={**loaded.metadata, **headers})

    def _source(self, message: str, name: str) -> str:
        """The attachment's document name; for the second attachment of that name under a
        message of that title and day, the message numbered (`Re: plan (2026-03-02) #2`), so
        every name is one document's and reading the file again names each the same."""
        self._names[(message, name)] += 1
        count = self._names[(message, name)]
        return attached_source(self.file, message if count == 1 else f"{message} #{count}", name)
