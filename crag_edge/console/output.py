"""What the command line prints, and how: text as written, never read as markup.

Document titles, file names, model answers and error messages are text from outside. Read
as rich markup, a `[/]` in one raised mid-print and `[link=...]` became a link; an escape
sequence stored in a chunk reached the terminal. So both consoles take text as written (no
markup, emoji codes or highlighting), and `line` is the one way to style a word: each part
is text or (text, style), and every part passes `text_boundary.repair`. JSON (`--json`)
goes to stdout as plain text, progress bars to stderr.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Sequence
from types import TracebackType
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from crag_edge.text_boundary import repair

Part = str | tuple[str, str]
MARK_STYLE = "bold yellow"  # words a search matched

out = Console(soft_wrap=True, markup=False, emoji=False, highlight=False)
err = Console(stderr=True, soft_wrap=True, markup=False, emoji=False, highlight=False)


def line(*parts: Part) -> Text:
    """The parts joined into one styled text: a `str` part as written, a (text, style) part
    in that rich style (`"bold red"`, `"dim"`)."""
    text = Text()
    for part in parts:
        words, style = (part, "") if isinstance(part, str) else part
        text.append(repair(words), style=style)
    return text


def marked(text: str, marks: Sequence[tuple[int, int]]) -> list[Part]:
    """`text` as parts, the (start, end) spans `marks` in `MARK_STYLE`: a search snippet's
    words of the question (`retrieval.passages`), in the CLI and the TUI alike."""
    parts: list[Part] = []
    at = 0
    for start, end in marks:
        parts += [text[at:start], (text[start:end], MARK_STYLE)]
        at = end
    return [*parts, text[at:]]


def say(*parts: Part, end: str = "\n") -> None:
    """`line(*parts)` on stdout: what the command was asked for."""
    out.print(line(*parts), end=end)


def tell(*parts: Part) -> None:
    """`line(*parts)` on stderr: errors, notes and progress, apart from the output."""
    err.print(line(*parts))


def print_json(data: Any) -> None:
    """Plain JSON on stdout, one document, never wrapped or coloured (machines read it); a
    number that is not finite (an AUC over one class is NaN) is `null`, as JSON has no NaN."""
    sys.stdout.write(json.dumps(_finite(data), ensure_ascii=False, indent=2) + "\n")


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(value) for value in data]
    return data


def stderr_bar(*columns: ProgressColumn, quiet: bool, transient: bool = True) -> Progress:
    """A progress bar of `columns` on stderr, so stdout stays the command's output; silent
    under --json (`quiet`)."""
    return Progress(*columns, console=err, disable=quiet, transient=transient)


def counting_bar(label: str, quiet: bool) -> Progress:
    """A progress bar on stderr counting items (files, queries)."""
    columns = (TextColumn(label, markup=False), BarColumn(), MofNCompleteColumn())
    return stderr_bar(*columns, TimeRemainingColumn(), quiet=quiet)


class _KeptWhenDone(Progress):
    """A bar that stays once its work is done, and vanishes when the work fails: then the
    error's one line is all the run leaves on stderr."""

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        if exc_type is not None:
            self.live.transient = True
        super().__exit__(exc_type, exc_val, exc_tb)


def stage_bar(quiet: bool) -> Progress:
    """A bar and the line beside it (the task's description) on stderr, that stays once the
    work is done: a long run's last frame says what it did (`ingest.rate.Frame`)."""
    columns = (BarColumn(bar_width=30), TextColumn("{task.description}", markup=False))
    return _KeptWhenDone(*columns, console=err, disable=quiet, transient=False)


def print_report(report: dict[str, Any], as_json: bool) -> None:
    """An evaluation report: JSON, or one aligned `key: value` line per entry."""
    if as_json:
        print_json(report)
        return
    width = max(map(len, report), default=0)
    for key, value in report.items():
        say(f"{key:>{width}}: {value}")


def fmt_number(value: float | None) -> str:
    """A score in a table or a hit line: three decimals, or `-` where there is none."""
    return "-" if value is None else f"{value:.3f}"
