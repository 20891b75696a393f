"""What the command line prints, and how: text as written, never read as markup.

Document titles, file names, model answers and error messages are text from outside. Read
as rich markup, a `[/]` in one raised mid-print and `[link=...]` became a link; an escape
sequence stored in a chunk reached the terminal. So both consoles take text as written (no
markup, emoji codes or highlighting), and `line` is the one way to style a word: each part
is text or (text, style), and every part passes `text_boundary.repair`.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from crag_edge.text_boundary import repair

Part = str | tuple[str, str]

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


def say(*parts: Part, end: str = "\n") -> None:
    """`line(*parts)` on stdout: what the command was asked for."""
    out.print(line(*parts), end=end)


def tell(*parts: Part) -> None:
    """`line(*parts)` on stderr: errors, notes and progress, apart from the output."""
    err.print(line(*parts))
