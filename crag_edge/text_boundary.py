"""Text entering crag-edge from outside: the one place that decides what may pass.

Python strings can hold what no encoder accepts: lone surrogates from JSON escapes
(`"\\ud800"`), from PDF text, or from bytes that were not UTF-8 (command-line arguments,
file names and environment values carry those as `\\udc80`-`\\udcff`). The tokenizers,
SQLite and JSON output all refuse them, deep inside, with a traceback. So questions and
document text are repaired here, on the way in, and file names, which must still name the
file on disk, are shown with their odd bytes escaped.
"""

from __future__ import annotations

import os
from pathlib import Path

REPLACEMENT = "\ufffd"


def repair(text: str) -> str:
    """`text` with surrogate pairs joined into their character and lone surrogates replaced
    by U+FFFD; valid text comes back unchanged (and cheaply: the common case is one check)."""
    if is_valid(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def is_valid(text: str) -> bool:
    """True when `text` can be encoded as UTF-8 (holds no surrogate code point)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_path(path: Path | str) -> str:
    """`path` as text a terminal, a log and JSON accept: bytes that were not UTF-8 appear as
    `\\xNN`, so a user can still tell which file is meant."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
