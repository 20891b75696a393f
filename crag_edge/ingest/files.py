"""Opening source files: the one place ingest touches a file on disk.

A file is opened without blocking (a FIFO would hang the whole batch), must be a regular file
on the opened descriptor, and is described (size, mtime) from that same descriptor, so what
is indexed is what was checked. With `roots` (the service's ingest roots), the path is opened
one component at a time from its root, never following a link: a file or folder swapped for a
link after the request was checked is refused at read time instead of read from elsewhere.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from crag_edge.ingest.loaders import LoadError, too_large
from crag_edge.text_boundary import has_no_controls, is_valid, printable_path


class NotAFileError(LoadError):
    """The path holds no regular file (a link where links are not followed, a pipe, a folder):
    whatever was indexed under it is no longer there, so a pruning ingest removes it."""


_FILE_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
_DIR_FLAGS = os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECTORY


@dataclass(frozen=True)
class SourceFile:
    """An opened regular file: read it through `file` or `read_capped`."""

    path: Path
    file: BinaryIO
    size: int
    mtime: float

    def read_capped(self, max_bytes: int) -> bytes:
        """The whole file, refused when it holds more than `max_bytes` (even if it grew)."""
        data = b"" if self.size > max_bytes else self.file.read(max_bytes + 1)
        if self.size > max_bytes or len(data) > max_bytes:
            raise LoadError(str(self.path), too_large(max(self.size, len(data)), max_bytes))
        return data


def within(path: Path, folder: Path, roots: Sequence[Path] | None) -> Path:
    """`path`, found by walking `folder`, by the name ingest gives it (`canonical`); a link
    leading out of `folder` is refused: what it reaches is nobody's to hand to this folder,
    and no sync of the folder would ever see it go."""
    found = canonical(path, roots)
    if roots is None and not found.is_relative_to(folder):
        shown = printable_path(found)
        raise LoadError(str(path), f"a symbolic link out of the folder (to {shown}); not followed")
    return found


def canonical(path: Path, roots: Sequence[Path] | None) -> Path:
    """The path ingest names a file by: its real path, or (confined to `roots`) its absolute
    path as given, since the caller resolved it already and a link is refused at open time."""
    if not is_valid(str(path)):
        raise LoadError(printable_path(path), "file name is not valid UTF-8; rename the file")
    if not has_no_controls(str(path)):  # it would be stored and printed as the document's source
        raise LoadError(printable_path(path), "file name holds control characters; rename it")
    if roots is not None:
        return Path(os.path.abspath(path))
    try:
        resolved = path.expanduser().resolve()
    except RuntimeError:  # Python < 3.13 reports a symlink loop this way, later ones as OSError
        raise LoadError(str(path), "symbolic link loop") from None
    except OSError as exc:
        raise LoadError(str(path), _reason(exc, roots)) from None
    if not resolved.exists() and path.is_symlink():
        raise LoadError(str(path), f"a broken symbolic link (to {printable_path(resolved)})")
    return resolved


@contextmanager
def open_source(path: Path, roots: Sequence[Path] | None = None) -> Iterator[SourceFile]:
    """Open `path` for reading as described in the module docstring; LoadError otherwise."""
    try:
        fd = _open_beneath(path, roots) if roots is not None else os.open(path, _FILE_FLAGS)
    except OSError as exc:
        failed = NotAFileError if exc.errno == errno.ELOOP and roots is not None else LoadError
        raise failed(str(path), _reason(exc, roots)) from None
    with open(fd, "rb") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotAFileError(str(path), "not a regular file (a pipe, device or socket)")
        yield SourceFile(path, file, info.st_size, info.st_mtime)


def _open_beneath(path: Path, roots: Sequence[Path]) -> int:
    """Walk from the root holding `path` down to the file with O_NOFOLLOW at every step."""
    root = next((r for r in roots if path.is_relative_to(r)), None)
    parts = path.relative_to(root).parts if root is not None else ()
    if root is None or not parts:
        raise LoadError(str(path), "outside the allowed ingest roots")
    folder = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=folder)
            os.close(folder)
            folder = inner
        return os.open(parts[-1], _FILE_FLAGS | os.O_NOFOLLOW, dir_fd=folder)
    finally:
        os.close(folder)


def _reason(exc: OSError, roots: Sequence[Path] | None) -> str:
    if exc.errno == errno.ELOOP:
        if roots is not None:
            return "a symbolic link; links are not followed inside the ingest roots"
        return "symbolic link loop"
    return exc.strerror or str(exc)
