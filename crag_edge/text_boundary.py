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
import re
from pathlib import Path

REPLACEMENT = "\ufffd"
# A letter or digit of any script (Python's `str.isalnum`); schemas that take a question use
# the same pattern (with Python's regex engine), so both ends agree on what has words.
WORD_PATTERN = r"[^\W_]"
_WORD = re.compile(WORD_PATTERN)


def repair(text: str) -> str:
    """`text` with surrogate pairs joined into their character and lone surrogates replaced
    by U+FFFD; valid text comes back unchanged (and cheaply: the common case is one check)."""
    if is_valid(text):
        return text
    return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


class QuestionError(ValueError):
    """A question with nothing to search for: empty, or without a letter or digit."""


def asked_question(text: str) -> str:
    """The question as the engine works with it: repaired, without surrounding blanks.
    Blank text, or text of only punctuation, symbols or control characters (a NUL, `\"\"`),
    is refused: retrieval would rank chunks by nothing, and a fast-path rule could still
    call what it found CORRECT. Every entry point (Python, CLI, HTTP, MCP) refuses the same
    questions with the same reason."""
    question = repair(text).strip()
    if not question:
        raise QuestionError("the question is empty")
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
    `\\xNN`, so a user can still tell which file is meant."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
