"""The help screen, the base of the app's full screens, and what the screens that name files
share: typed paths, their completion, a directory tree, the corpus stats."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import ClassVar, TypeVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen, Screen
from textual.suggester import Suggester
from textual.widgets import Markdown

from crag_edge.groups import CorpusView
from crag_edge.locations import is_database_url, shown_location
from crag_edge.store import CorpusBackend
from crag_edge.store.records import CorpusStats

ResultType = TypeVar("ResultType")

HELP = """\
# crag-edge — keys

| key | does |
| --- | --- |
| **Enter** | ask (in the question box): retrieve → grade → decide → correct → answer |
| **↑ / ↓** | previous / next question (in the question box) |
| **Esc** | cancel the running question |
| **ctrl+l** | focus the question box |
| **ctrl+r** | focus the evidence table (↑/↓ shows each chunk) |
| **Tab / shift+Tab** | move between panels; Enter on a citation jumps to its evidence |
| **ctrl+y** | copy the answer |
| **ctrl+f** | search: passages and their places, no model (↑/↓ shows each whole) |
| **ctrl+o** | ingest files or folders into the corpus (there ctrl+d: directory tree) |
| **F2** | settings: thresholds, tiers, fallback, LLM (Enter applies, ctrl+s also saves) |
| **F3** | corpora: switch to another corpus file, or create one |
| **ctrl+t** | light / dark theme |
| **F1** or **?** | this help |
| **ctrl+q** | quit |

**Decision** — CORRECT: the evidence is trusted and refined into the context;
AMBIGUOUS: kept evidence is corrected (query rewrite, fallback);
INCORRECT: the evidence is discarded, the fallback (if configured) is asked.
With no trustworthy context the answer says *insufficient evidence* and no model is called.

Press **Esc** to close.
"""


class HelpScreen(ModalScreen[None]):
    """Keys and what the decision words mean."""

    DEFAULT_CSS = """
    HelpScreen { align: center middle; }
    #help { width: 90%; max-width: 100; height: 90%; border: round $accent;
            background: $surface; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "dismiss", "Close"),
        Binding("f1", "dismiss", "Close", show=False),
        Binding("q", "dismiss", "Close", show=False),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Markdown(HELP)


def typed_path(value: str) -> Path:
    """The path a user typed, `~` expanded; a ValueError, in words, for text no file can be
    named by: `~name` of no user (where `Path.expanduser` raises RuntimeError), a NUL (where
    every file call raises) or a symlink loop (where `Path.resolve` raises), which would
    otherwise end the app from a handler."""
    if "\x00" in value:
        raise ValueError("Cannot use the path: it holds a NUL character")
    try:
        path = Path(value).expanduser()
    except RuntimeError:
        user = value.split("/", 1)[0]
        raise ValueError(f"Cannot use the path: {user} is no user with a home folder") from None
    try:
        path.resolve()
    except (RuntimeError, OSError) as exc:  # a loop: RuntimeError before Python 3.13
        raise ValueError(f"Cannot use the path: {exc}") from None
    return path


class PathSuggester(Suggester):
    """Completes file and folder names (accept with →)."""

    def __init__(self) -> None:
        super().__init__(use_cache=False, case_sensitive=True)

    async def get_suggestion(self, value: str) -> str | None:
        if not value:
            return None
        try:
            path = typed_path(value)
        except ValueError:
            return None
        parent, prefix = (path, "") if value.endswith("/") else (path.parent, path.name)
        try:
            names = sorted(
                child.name + ("/" if child.is_dir() else "")
                for child in parent.iterdir()
                if child.name.startswith(prefix) and not child.name.startswith(".")
            )
        except OSError:
            return None
        return value + names[0][len(prefix) :] if names else None


def relative_name(path: Path | str, cwd: Path | None = None) -> str:
    """`path` relative to the working directory when it lies inside: shorter to read and edit.
    A database URL is shown without its password."""
    if is_database_url(path):
        return shown_location(path)
    path = Path(path)
    try:
        return str(path.relative_to(cwd or Path.cwd()))
    except ValueError:
        return str(path)


def when(ts: float | None) -> str:
    """A unix time in local time, to the minute ("never" for none)."""
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "never"


def current_stats(corpus: CorpusBackend) -> CorpusStats | str:
    """The open corpus's stats, or why they cannot be read. Another program can truncate or
    overwrite the file, or its disk fail, while the app has it open: the screens then say
    so where the stats would be, instead of the app ending on the store's exception."""
    try:
        return corpus.stats(view=CorpusView.everything())
    except Exception as exc:  # SQLite or a database server: any failure is reported alike
        return f"cannot read the corpus: {type(exc).__name__}: {exc}"


def describe_stats(stats: CorpusStats) -> Text:
    chunking = (
        f"{stats.chunk_tokens} tokens, overlap {stats.chunk_overlap}"
        if stats.chunk_tokens
        else "not yet"
    )
    return Text.assemble(
        (str(stats.path), "bold"),
        f"\ndocuments {stats.documents} · chunks {stats.chunks} · "
        f"{stats.db_bytes / 1e6:.1f} MB\n"
        f"embedder {stats.embedder_id} ({stats.dim}d) · chunking {chunking}\n"
        f"created {when(stats.created_at)} · last ingest {when(stats.last_ingest_at)}",
    )


class CragScreen(Screen[ResultType]):
    """A full screen of the crag-edge app, over the main one. It is given what it shows when
    it is made (and what changes later, as attributes), and reports what the user did with
    messages, which bubble up to the app, or with the result it is dismissed with: the app's
    state changes in the app alone, and the screens need not know the app."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def action_back(self) -> None:
        self.dismiss()
