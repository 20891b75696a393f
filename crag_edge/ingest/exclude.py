"""Files an ingest leaves out by name: `--exclude GLOB` (the language pickers, tables of
contents and print versions a folder of HTML pages holds).

A glob is matched against the end of each file's path, part by part: `*.fr.html` and
`index.html` match a file name, `toc/*` and `print/*.html` the files of a folder of that name
at any depth (`drafts/` is `drafts/*`). The rule reads only the file's own path, so it is
the same whether the file was found by walking a folder, named alone, synced by a watcher or
expanded by the service.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from fnmatch import fnmatchcase
from pathlib import Path

MAX_GLOB_CHARS = 1000


def checked_globs(globs: Iterable[str]) -> tuple[str, ...]:
    """The globs, or a ValueError naming the first that cannot match a path's end: empty,
    absolute (a path's end never starts at the root), holding a NUL, or too long."""
    checked = []
    for glob in globs:
        if not glob.strip() or "\x00" in glob:
            raise ValueError(f"exclude glob {glob!r} is empty or holds a NUL character")
        if glob.startswith("/"):
            raise ValueError(f"exclude glob {glob!r} is absolute: it matches a path's end")
        if len(glob) > MAX_GLOB_CHARS:
            raise ValueError(f"exclude glob is longer than {MAX_GLOB_CHARS} characters")
        checked.append(glob + "*" if glob.endswith("/") else glob)  # a folder: its files
    return tuple(checked)


def is_excluded(path: Path, globs: Sequence[str]) -> bool:
    """Whether a glob matches the file's name, or its name with one or more of the folders
    above it (`toc/*` matches `/docs/manual/toc/index.html`)."""
    if not globs:
        return False
    parts = path.parts
    ends = ["/".join(parts[start:]) for start in range(len(parts) - 1, 0, -1)]
    return any(fnmatchcase(end, glob) for glob in globs for end in ends)
