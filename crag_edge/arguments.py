"""What a caller of the Python API passes to `Engine`, checked where it enters: a wrong
type or value is a TypeError or ValueError naming the argument, never an error from deep
inside (a str read as a list of paths would ingest each of its characters; `top_k=-1`
would cut the hits from their end). The service, the CLI and MCP check their own input
before it gets here.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from crag_edge.config import Settings, field_range
from crag_edge.groups import (
    CorpusView,
    FolderGroups,
    Groups,
    checked_groups,
    checked_view,
    folder_groups,
)
from crag_edge.ingest.exclude import checked_globs
from crag_edge.models.llm import Message
from crag_edge.retrieval import Mode


class Lookup(TypedDict, total=False):
    """How a question is looked up, and for whom: the keyword arguments `Engine.search`,
    `search_passages`, `query` and `answer` share, written once so that the four cannot
    drift apart. `mode` and `top_k` None (or left out) take the settings' values; `view` (a
    `CorpusView`) is whose question it is, `groups` (a set of names) short for
    `CorpusView.of(groups)`; neither: the owner's view, every document."""

    mode: Mode | None
    top_k: int | None
    view: CorpusView | None
    groups: Groups


@dataclass(frozen=True)
class CheckedLookup:
    """A `Lookup` checked where it enters, its view resolved once (`view`)."""

    mode: Mode | None
    top_k: int | None
    view: CorpusView


def lookup(given: Lookup) -> CheckedLookup:
    """`given` checked: a keyword no `Lookup` names is a TypeError, as it would be in a
    signature that spelled them out; `top_k` and the view as `top_k` and `view` check them."""
    unknown = sorted(given.keys() - Lookup.__optional_keys__)
    if unknown:
        raise TypeError(f"unexpected keyword argument {unknown[0]!r}")
    return CheckedLookup(
        given.get("mode"), top_k(given.get("top_k")), view(given.get("view"), given.get("groups"))
    )


def paths(inputs: Iterable[Path | str]) -> list[Path | str]:
    """The inputs as a list of paths, or a TypeError naming what is not one."""
    if isinstance(inputs, str | bytes | os.PathLike) or not isinstance(inputs, Iterable):
        raise TypeError(f"inputs must be a list of paths, not {inputs!r}: pass [path]")
    paths = list(inputs)
    for path in paths:
        if not isinstance(path, str | os.PathLike) or isinstance(os.fspath(path), bytes):
            raise TypeError(f"input {path!r} is not a path (a str or pathlib.Path)")
    return paths


def globs(globs: Iterable[str]) -> tuple[str, ...]:
    """Exclude globs as a tuple (`ingest.exclude.checked_globs`); a str is a TypeError, not
    the globs of its characters."""
    if isinstance(globs, str | bytes) or not isinstance(globs, Iterable):
        raise TypeError(f"exclude must be a list of globs, not {globs!r}: pass [glob]")
    given = list(globs)
    if not all(isinstance(glob, str) for glob in given):
        raise TypeError(f"exclude must be a list of globs (str), not {given!r}")
    return checked_globs(given)


def top_k(top_k: int | None) -> int | None:
    """`top_k` if it is in the `top_k` setting's range (None: the setting's value); else the
    error, before retrieval would slice by it."""
    return None if top_k is None else count("top_k", top_k, *field_range("top_k"))


def count(name: str, value: int, low: int, high: int | None = None) -> int:
    """`value` if it is an int (not a bool) from `low` to `high`; else a TypeError or
    ValueError naming the argument."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{name} must be an int, not {value!r}")
    if value < low or (high is not None and value > high):
        allowed = f"at least {low}" if high is None else f"from {low} to {high}"
        raise ValueError(f"{name} must be {allowed}, not {value}")
    return value


def groups(groups: Groups) -> Groups:
    """Groups as a set of names that follow `groups.NAME_RULE` (None: the owner); a str is a
    TypeError, not the set of its letters, and a bad name a ValueError, not a silent miss."""
    if groups is None:
        return None
    if not isinstance(groups, Set) or not all(isinstance(name, str) for name in groups):
        raise TypeError(f"groups must be a set of group names (str), not {groups!r}")
    return checked_groups(groups)


def view(view: CorpusView | None, names: Groups) -> CorpusView:
    """The caller's view, built once where it enters: `view` (a `CorpusView`) when given,
    else that of the `groups` shorthand (a set of names, checked as `groups`), else the
    owner's, who opened the corpus and sees every document. Both given is a TypeError: which
    of the two would win is a guess."""
    if view is not None:
        if names is not None:
            raise TypeError("pass view= or groups=, not both")
        return checked_view(view)
    checked = groups(names)
    return CorpusView.everything() if checked is None else CorpusView.of(checked)


def default_groups(defaults: FolderGroups | None) -> FolderGroups | None:
    """Default groups by folder, keyed by the resolved folder (as ingest names files), each
    set checked as `groups`; a folder named twice (once through a link, say) with different
    groups is a ValueError."""
    if defaults is None:
        return None
    if not isinstance(defaults, Mapping):
        raise TypeError(f"default_groups must map folders to sets of groups, not {defaults!r}")
    pairs = []
    for folder, names in defaults.items():
        checked = groups(names)
        if not isinstance(folder, str | os.PathLike) or checked is None:
            raise TypeError(f"default_groups: {folder!r}: {names!r} is not a folder's groups")
        pairs.append((Path(folder).expanduser().resolve(), checked))
    return folder_groups(pairs)


def question(question: str) -> str:
    """The question, if it is text: bytes or None would fail deep inside the text repair."""
    if not isinstance(question, str):
        raise TypeError(f"the question must be a str, not {type(question).__name__}")
    return question


def history(history: Sequence[Message]) -> Sequence[Message]:
    """The turns, if each is a dict of a `role` and a `content`, both text; else the error,
    not one from inside the text repair."""
    if isinstance(history, str) or not isinstance(history, Sequence):
        raise TypeError(f"history must be a list of turns, not {type(history).__name__}")
    for turn in history:
        if not isinstance(turn, Mapping):
            raise TypeError(f"history turn {turn!r} is not a dict with role and content")
        if set(turn) != {"role", "content"}:
            raise ValueError(f"history turn {turn!r} needs exactly a role and a content")
        if not all(isinstance(text, str) for text in turn.values()):
            raise TypeError(f"history turn {turn!r} has a role or content that is not a str")
    return history


def settings(settings: Settings | None) -> Settings:
    """`settings`, or the loaded ones for None; a dict of settings is a TypeError that says
    how to make them, not an AttributeError from the first section read."""
    if settings is None:
        return Settings.load()
    if not isinstance(settings, Settings):
        raise TypeError(f"settings must be a Settings (Settings.load(...)), not {settings!r}")
    return settings
