"""How a command joins a command line: its docstring is its help, each paragraph one flowing
line that the terminal wraps at its own width.

A docstring is wrapped at the source's line length; Typer's rich help keeps those line
breaks (the commands table and every paragraph after the first), so a help text broke
mid-sentence wherever the source did. Registering through `command` reflows it once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

import typer

F = TypeVar("F", bound=Callable[..., Any])


def flowing(text: str) -> str:
    """`text` with the line breaks inside each paragraph made spaces (paragraphs, separated
    by a blank line, stay apart)."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(" ".join(paragraph.split()) for paragraph in paragraphs)


def command(app: typer.Typer, name: str | None = None) -> Callable[[F], F]:
    """`app.command(name)` with the function's docstring as flowing help."""

    def register(function: F) -> F:
        app.command(name, help=flowing(inspect.getdoc(function) or ""))(function)
        return function

    return register
