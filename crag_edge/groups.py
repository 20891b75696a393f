"""Access groups: which documents a caller may retrieve.

An ingest given groups (`ingest --groups finance,hr`, the `groups` of an API ingest; an empty
set included) tags every document it touches with exactly those: ingesting a document again
with other groups retags it, without re-embedding it. An ingest given none (a plain `ingest`,
a folder watcher's sync) leaves every stored document's groups as they are, so a sync never
undoes a tagging, and gives a new document the groups of whoever ingests it (`Tagging`), or
the default groups of the innermost watched folder holding it (`serve --watch-root
DIR=GROUPS`, `ingest --watch DIR=GROUPS`, or `--groups` for the folders named without groups
of their own). A new document whose text is that of a tagged document whose file is gone (a
rename or a move, `ingest.moves`) takes that document's groups instead: groups follow the
document, not its path, and a tagged document never reappears untagged: a file moved from one
team's folder into another's keeps its own groups, never the new folder's (handing it over
is the owner's explicit retag, `ingest --groups`). An e-mail attachment gets its mail
file's groups, and a new mail file those of the gone tagged documents any of its parts has
the text of, so an attachment keeps its groups through an edit, a rename or a move of its
mail file (`ingest.pipeline`). An untagged document is visible to everyone.

What a caller may retrieve is a `CorpusView`: `CorpusView.everything()` for the owner (the
local CLI and TUI, an admin token, the evaluations), who sees every document;
`CorpusView.of(groups)` for anyone else, who sees the untagged documents plus those sharing at
least one group with the set (an empty set: the untagged ones only). Names are matched
exactly, case included. Every search, count and listing below the engine (retrieval, the
loop, the local fallback, the support check's corpus lookup, the store) takes a view and has
no default for it, so a call that forgets the caller's view fails (a TypeError, and mypy)
rather than seeing every document; the store refuses anything but a `CorpusView`. The
engine's public methods take `view=` (or, as a shorthand, `groups=`: None or a set) and
build the view once; given neither, they serve the owner, who opened the corpus file.

The filter is applied inside retrieval, before top-k, in both the FTS5 and the vector search
(`store.document_groups`), so a caller's hits are as many and as good as if the documents it
may not see were not in the corpus at all; everything later (grading, context, answers) only
ever sees those hits.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

# Who is asking: None sees everything, a set sees the untagged documents and its groups'.
Groups = frozenset[str] | None
# The default groups of new files by folder (resolved): a new file gets those of the
# innermost folder holding it, none when no folder does.
FolderGroups = Mapping[Path, frozenset[str]]

# The rule for group names and token names (`server.tokens`): safe in a log line, a URL and a
# shell, and a typo cannot become a tag that matches nobody's groups by accident. Anchored for
# JSON Schema (the ingest request's `groups`); Python checks it with `fullmatch`, so a name
# with a trailing newline does not pass.
NAME_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
NAME_RULE = "use 1 to 64 letters, digits, '_', '.' or '-'"
_NAME = re.compile(NAME_PATTERN)


def is_valid_name(name: str) -> bool:
    """Whether `name` follows `NAME_PATTERN`."""
    return _NAME.fullmatch(name) is not None


def checked_groups(names: Iterable[str]) -> frozenset[str]:
    """The group names as a set; ValueError names the first that breaks `NAME_RULE`."""
    groups = frozenset(names)
    for name in sorted(groups):
        if not is_valid_name(name):
            raise ValueError(f"invalid group name {name!r}: {NAME_RULE}")
    return groups


@dataclass(frozen=True)
class CorpusView:
    """The documents one caller may retrieve: `groups` None for every document (the owner),
    a set for the untagged ones and those sharing one of its groups. Build it with
    `everything()` or `of(groups)`, so that the owner's view is always asked for by name."""

    groups: frozenset[str] | None

    def __post_init__(self) -> None:
        """Refuse what is not a set of names: a str would be read as its characters."""
        if self.groups is not None and (
            not isinstance(self.groups, frozenset)
            or not all(isinstance(name, str) for name in self.groups)
        ):
            raise TypeError(f"a view's groups must be a frozenset of names, not {self.groups!r}")

    @classmethod
    def everything(cls) -> CorpusView:
        """The owner's view: every document, whatever its groups."""
        return cls(None)

    @classmethod
    def of(cls, groups: Iterable[str]) -> CorpusView:
        """The view of a caller with `groups` (names checked: `NAME_RULE`)."""
        if isinstance(groups, str):
            raise TypeError(f"groups must be a set of group names, not the str {groups!r}")
        return cls(checked_groups(groups))

    @property
    def limited(self) -> bool:
        """Whether some documents may be hidden from this caller (not the owner's view)."""
        return self.groups is not None


def checked_view(view: object) -> CorpusView:
    """`view` when it is a `CorpusView`; a TypeError otherwise (a set or None where a view is
    expected would otherwise be read with another meaning, None as everything)."""
    if not isinstance(view, CorpusView):
        raise TypeError(
            f"expected a CorpusView (CorpusView.everything() or CorpusView.of(groups)), "
            f"not {view!r}"
        )
    return view


def may_see(caller: Groups, tags: frozenset[str]) -> bool:
    """Whether a caller with `caller` groups sees a document tagged `tags` (the rule
    `store.document_groups` applies in SQL)."""
    return caller is None or not tags or bool(tags & caller)


@dataclass(frozen=True)
class Tagging:
    """Who ingests and how the documents get their groups.

    `caller`: the groups of whoever ingests (None: the owner, who may change every document;
    a set: a non-admin token, whose ingest must not replace, retag or prune a stored document
    it cannot see, since that would pull the document into its own view or destroy it).
    `groups`: when given, exactly the groups of every document the ingest touches (an empty
    set untags); when None, a stored document keeps its groups and a new one gets the
    caller's (the owner's: none), or the `defaults` of the folder holding it (a watched one's)."""

    caller: Groups = None
    groups: frozenset[str] | None = None
    defaults: FolderGroups = field(default_factory=dict)

    def __post_init__(self) -> None:
        """A non-admin caller may only tag with groups it has: any other tag would hand its
        documents to readers it does not speak for."""
        for given in (self.groups, *self.defaults.values()):
            if self.caller is not None and given is not None and not given <= self.caller:
                missing = ", ".join(sorted(given - self.caller))
                raise ValueError(f"this caller may not tag documents with {missing}")

    def may_change(self, tags: frozenset[str]) -> bool:
        """Whether this ingest may replace, retag or prune a document stored with `tags`."""
        return may_see(self.caller, tags)

    def tags_for(
        self,
        stored: frozenset[str] | None,
        *,
        moved: frozenset[str] | None = None,
        origin: Path | None = None,
    ) -> frozenset[str]:
        """The groups a document gets: `stored` is its current groups, None if it is new;
        `moved` those of the gone documents whose text a new one has (`ingest.moves`): they
        win over the `defaults` of the folder holding `origin` (the file it was read from),
        so a document moved into another team's folder stays its own team's."""
        if self.groups is not None:
            return self.groups
        if stored is not None:
            return stored
        if moved is not None:
            return moved
        if origin is not None and (default := default_groups(self.defaults, origin)) is not None:
            return default
        return self.caller or frozenset()


def default_groups(defaults: FolderGroups, path: Path) -> frozenset[str] | None:
    """The groups of the innermost folder of `defaults` holding `path` (folders may nest)."""
    holders = [folder for folder in defaults if path.is_relative_to(folder)]
    if not holders:
        return None
    return defaults[max(holders, key=lambda folder: len(folder.parts))]


def split_folder_groups(text: str) -> tuple[str, frozenset[str] | None]:
    """`DIR=a,b` as (DIR, {a, b}), `DIR=` as (DIR, {}) (new files untagged), `DIR` as
    (DIR, None) (no groups of its own). The last '=' splits, since no group name holds one,
    so a folder whose name holds '=' is written `DIR=` or `DIR=GROUPS`. ValueError says
    what is wrong."""
    folder, equals, names = text.rpartition("=")
    if not equals:
        return text, None
    if not folder:
        raise ValueError(f"{text!r} names no folder before '='; write DIR=GROUPS")
    return folder, parse_groups(names) if names.strip() else frozenset()


def watched_folders(
    given: Iterable[str], shared: frozenset[str] | None
) -> list[tuple[str, frozenset[str] | None]]:
    """Each `DIR[=GROUPS]` (`split_folder_groups`) as (DIR, the groups of its new files):
    its own, else `shared` (the `--groups` of every folder named without), else None."""
    split = [split_folder_groups(text) for text in given]
    return [(folder, shared if own is None else own) for folder, own in split]


def folder_groups(pairs: Iterable[tuple[Path, frozenset[str]]]) -> dict[Path, frozenset[str]]:
    """Each (resolved folder, default groups) pair as a mapping; ValueError when a folder is
    given twice with different groups (which of the two a new file gets would be a guess)."""
    found: dict[Path, frozenset[str]] = {}
    for folder, groups in pairs:
        if found.setdefault(folder, groups) != groups:
            raise ValueError(f"{folder} is given twice with different groups")
    return found


def parse_groups(text: str) -> frozenset[str]:
    """`finance, hr` as {"finance", "hr"} (the `--groups` option); blanks around names are
    ignored, an empty list or an invalid name is refused."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    if not names:
        raise ValueError(f"takes comma-separated group names; got {text!r}")
    return checked_groups(names)


# The owner's ingest (the CLI, a folder watcher): may change every document, and stored
# documents keep their groups.
AS_OWNER = Tagging()
