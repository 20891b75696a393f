"""Text entering crag-edge from outside: the one place that decides what may pass.

Python strings can hold what no encoder accepts: lone surrogates from JSON escapes
(`"\\ud800"`), from PDF text, or from bytes that were not UTF-8 (command-line arguments,
file names and environment values carry those as `\\udc80`-`\\udcff`). The tokenizers,
SQLite and JSON output all refuse them, deep inside, with a traceback. Control characters
are never text either, and printed to a terminal they start escape sequences (`ESC [2J`
clears the screen; `ESC ]0;` retitles the window). So questions and document text are
repaired here, on the way in, and file names, which must still name the file on disk, are
shown with their odd bytes escaped.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

REPLACEMENT = "\ufffd"
# A letter or digit of any script (Python's `str.isalnum`); schemas that take a question use
# the same pattern (with Python's regex engine), so both ends agree on what has words.
WORD_PATTERN = r"[^\W_]"
_WORD = re.compile(WORD_PATTERN)
# C0 and C1 control characters and DEL, except tab and the line ends a loader normalises.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")
# Of those, the ones that break a line (vertical tab, form feed between pages, NEL).
_LINE_BREAKS = frozenset("\x0b\x0c\x85")
# In a name, or a line drawn on a terminal, every control character is out of place, tab and
# line ends included.
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def repair(text: str) -> str:
    """`text` with surrogate pairs joined into their character, lone surrogates replaced by
    U+FFFD and control characters dropped (a vertical tab, a form feed or NEL becomes a
    newline, so pages and lines stay apart). Valid text comes back unchanged, and cheaply:
    the common case is two scans in C."""
    if not is_valid(text):
        text = text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(_without_control, text)


def has_no_controls(text: str) -> bool:
    """True when `text` holds no control character, tab and line ends included: a newline
    or an escape sequence in a file name would break or take over every line that shows it."""
    return _ANY_CONTROL.search(text) is None


def without_controls(text: str) -> str:
    """`text` with every control character removed, tab and line ends included (for one
    line drawn on a terminal, where they take no cells)."""
    return _ANY_CONTROL.sub("", text)


def one_line(text: str) -> str:
    """`text` as one line of a message: runs of blanks and line breaks become one space and
    control characters go (a server's error page quoted in an error must not break it up)."""
    return without_controls(" ".join(text.split()))


def _without_control(match: re.Match[str]) -> str:
    return "\n" if match.group() in _LINE_BREAKS else ""


class QuestionError(ValueError):
    """A question with nothing to search for: empty, or without a letter or digit."""


def asked_question(text: str) -> str:
    """The question as the engine works with it: repaired, without surrounding blanks.
    Blank text, or text of only punctuation, symbols or control characters (a NUL, `\"\"`),
    is refused: retrieval would rank chunks by nothing, and a fast-path rule could still
    call what it found CORRECT. Every entry point (Python, CLI, HTTP, MCP) refuses the same
    questions with the same reason."""
    if not text.strip():
        raise QuestionError("the question is empty")
    question = repair(text).strip()
    if _WORD.search(question) is None:
        raise QuestionError("the question has no words (not one letter or digit)")
    return question


def is_valid(text: str) -> bool:
    """True when `text` can be encoded as UTF-8 (holds no surrogate code point)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable_path(path: Path | str) -> str:
    """`path` as text a terminal, a log and JSON accept: bytes that were not UTF-8 appear as
    `\\xNN`, and so do control characters (a name can hold an escape sequence), so a user
    can still tell which file is meant."""
    shown = os.fsencode(path).decode("utf-8", "backslashreplace")
    return _ANY_CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", shown)
