"""The corpus picker (F3): the corpus files nearby with their stats, and a path to open or
create another. Stats come from `Corpus.open(readonly=True)`, so no model loads until one
is picked; opening it is the app's job (the screen is dismissed with a `CorpusChoice`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.reactive import var
from textual.widgets import Footer, Header, Input, OptionList
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from crag_edge.groups import CorpusView
from crag_edge.locations import absolute_location, is_database_url, parse_location
from crag_edge.store import (
    Corpus,
    CorpusBackend,
    CorpusError,
    CorpusStats,
    CorruptCorpusError,
    NotACorpusError,
    SchemaTooNewError,
)
from crag_edge.tui.screens import (
    CragScreen,
    PathSuggester,
    current_stats,
    relative_name,
    typed_path,
    when,
)
from crag_edge.tui.widgets import BoundText, Plain

NOT_A_CORPUS = "not a crag-edge corpus"


@dataclass(frozen=True)
class CorpusEntry:
    """One file in the picker: its stats, or why it cannot be opened (`problem`)."""

    path: Path | str  # a file, or the open corpus's database URL
    stats: CorpusStats | None = None
    problem: str | None = None
    openable: bool = True
    is_open: bool = False


@dataclass(frozen=True)
class CorpusChoice:
    """What the picker is dismissed with: the corpus to switch to, `create`d if new."""

    path: Path | str
    create: bool


def open_error(exc: Exception) -> str:
    """Why a file could not be opened, in the picker's words (the path is shown beside it)."""
    if isinstance(exc, NotACorpusError | CorruptCorpusError):
        return f"{NOT_A_CORPUS}: {exc.reason}"
    return exc.reason if isinstance(exc, CorpusError) else f"{type(exc).__name__}: {exc}"


def read_entry(path: Path) -> CorpusEntry:
    """Stats of the corpus at `path`, read-only; any file that is not one becomes a reason."""
    try:
        with Corpus.open(path, readonly=True) as corpus:
            return CorpusEntry(path, corpus.stats(view=CorpusView.everything()))
    except (NotACorpusError, CorruptCorpusError) as exc:
        return CorpusEntry(path, problem=open_error(exc), openable=False)
    except SchemaTooNewError as exc:
        return CorpusEntry(path, problem=f"cannot open: {exc.reason}", openable=False)
    except CorpusError as exc:  # an older schema: opening it read-write upgrades it
        return CorpusEntry(path, problem=f"stats unavailable: {exc.reason}")
    except Exception as exc:  # a file we do not own may fail in any way: report, never crash
        return CorpusEntry(path, problem=f"cannot read: {open_error(exc)}", openable=False)


def find_corpora(folders: Iterable[Path], skip: Path | str | None = None) -> list[CorpusEntry]:
    """Every `*.db` file directly in `folders` (each once), except `skip` (the open one);
    the ones that can be opened first."""
    seen = {skip} if skip is not None else set()
    entries = []
    for folder in folders:
        try:
            files = sorted(path.resolve() for path in folder.glob("*.db") if path.is_file())
        except OSError:
            continue
        for path in files:
            if path not in seen:
                seen.add(path)
                entries.append(read_entry(path))
    return sorted(entries, key=lambda entry: not entry.openable)


def size_text(n_bytes: int) -> str:
    return f"{n_bytes / 1e6:.1f} MB" if n_bytes >= 100_000 else f"{n_bytes / 1e3:.0f} kB"


def entry_prompt(entry: CorpusEntry, cwd: Path) -> Text:
    """Two lines: the name (with "open" and the embedder), then the counts or the reason the
    file cannot be used. Short enough for 80 columns."""
    text = Text(relative_name(entry.path, cwd), style="bold" if entry.openable else "dim")
    if entry.is_open:
        text.append("  open", style="bold green")
    stats = entry.stats
    if stats is not None:
        text.append(f"  · {stats.embedder_id}", style="dim")
        text.append(
            f"\n  {stats.documents:,} documents · {stats.chunks:,} chunks · "
            f"{size_text(stats.db_bytes)} · last ingest {when(stats.last_ingest_at)}"
        )
    else:
        text.append(f"\n  {entry.problem}", style="yellow" if entry.openable else "red")
    return text


class CorpusScreen(CragScreen[CorpusChoice]):
    """Pick a corpus to switch to, or type a path to open or create one. The screen is
    dismissed with the choice once it is known to be a corpus (or a new file); one that is
    not, or a pick while the app is `busy`, is refused here with the reason."""

    DEFAULT_CSS = """
    CorpusScreen #corpora-intro { height: auto; padding: 0 1; color: $text-muted; }
    CorpusScreen #corpora { height: 1fr; border: round $primary; }
    CorpusScreen #corpora-status { height: auto; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+n", "new_path", "Path"),
        Binding("f5", "rescan", "Rescan"),
    ]

    AUTO_FOCUS = "#corpora"
    entries: var[list[CorpusEntry]] = var(list, init=False)
    status: var[RenderableType] = var[RenderableType]("")

    def __init__(
        self,
        *,
        db: Path | str | None,
        open_corpus: CorpusBackend | None,
        busy: Callable[[], str | None],
    ) -> None:
        """`db` is the app's corpus file (its folder is searched too); `open_corpus` the
        corpus the app has open, listed first with its live stats; `busy` says what work
        running in the app a switch would pull the corpus out from under."""
        super().__init__()
        self.db = db
        self.open_corpus = open_corpus
        self.busy = busy

    def compose(self) -> ComposeResult:
        yield Header()
        yield Plain("", id="corpora-intro")
        corpora = OptionList(id="corpora")
        corpora.border_title = "Corpora"
        yield corpora
        yield Input(
            placeholder="Path of a corpus to open, or of a new one to create (→ completes)",
            id="corpus-path",
            suggester=PathSuggester(),
        )
        yield BoundText(id="corpora-status").data_bind(shown=CorpusScreen.status)
        yield Footer()

    def on_mount(self) -> None:
        self.action_rescan()

    def folders(self) -> list[Path]:
        """Where to look: the working directory and the open corpus's folder."""
        folders = [Path.cwd()]
        db = self.db
        if isinstance(db, Path) and db.resolve().parent not in folders:
            folders.append(db.resolve().parent)
        return folders

    def action_rescan(self) -> None:
        folders = self.folders()
        cwd = folders[0]
        names = " and ".join(relative_name(folder, cwd) for folder in folders)
        self.query_one("#corpora-intro", Plain).update(
            f"Corpus files (*.db) in {names}: Enter switches; ctrl+n opens or creates another."
        )
        current = None
        if self.open_corpus is not None:  # the open one's stats come from its own connection
            location = absolute_location(parse_location(self.open_corpus.location))
            stats = current_stats(self.open_corpus)
            if isinstance(stats, str):
                current = CorpusEntry(location, problem=stats, is_open=True)
            else:
                current = CorpusEntry(location, stats, is_open=True)
        self.status = "Reading the corpus files…"
        self.scan(folders, current)

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def scan(self, folders: list[Path], current: CorpusEntry | None) -> None:
        found = find_corpora(folders, skip=current.path if current is not None else None)
        entries = ([current] if current is not None else []) + found
        if not get_current_worker().is_cancelled:  # else the screen has gone
            self.app.call_from_thread(setattr, self, "entries", entries)

    def watch_entries(self, entries: list[CorpusEntry]) -> None:
        cwd = Path.cwd()
        corpora = self.query_one(OptionList)
        corpora.clear_options()
        corpora.add_options(
            Option(entry_prompt(entry, cwd), id=str(i), disabled=not entry.openable)
            for i, entry in enumerate(entries)
        )
        usable = sum(entry.openable for entry in entries)
        corpora.border_title = f"Corpora · {usable} of {len(entries)} files"
        if usable and corpora.highlighted is None:
            corpora.action_first()
        self.status = "" if entries else "No *.db files here: type a path below to create a corpus."

    @on(OptionList.OptionSelected, "#corpora")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            self.choose(self.entries[int(event.option.id)].path, create=False)

    @on(Input.Submitted, "#corpus-path")
    def _typed(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        if not value:
            return
        if is_database_url(value):  # opened, or created when it holds no corpus yet
            self.choose(value, create=True)
            return
        try:
            path = typed_path(value)
        except ValueError as exc:
            self.status = Text(str(exc), style="red")
            return
        if not path.exists():
            self.choose(path, create=True)
        elif self.refused() is None:
            self.status = f"Reading {relative_name(path)}…"
            self.check(path)

    @work(thread=True, exclusive=True, group="check", exit_on_error=False)
    def check(self, path: Path) -> None:
        """Choose the typed file if it is a corpus; else say why it cannot be opened."""
        entry = read_entry(path)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._checked, entry)

    def _checked(self, entry: CorpusEntry) -> None:
        if entry.openable:
            self.choose(entry.path, create=False)
            return
        self.status = Text(str(entry.problem), style="red")
        name = relative_name(entry.path)
        self.notify(f"Cannot open {name}: {entry.problem}", severity="error", timeout=10)

    def refused(self) -> str | None:
        """Why no switch can start now (said in the status line), or None."""
        reason = self.busy()
        if reason is not None:
            busy = f"Busy: {reason[0].lower()}{reason[1:]}; switch once it has finished."
            self.status = Text(busy, "yellow")
        return reason

    def choose(self, path: Path | str, *, create: bool) -> None:
        """Leave with `path` for the app to open, unless the app is busy."""
        if self.refused() is None:
            self.dismiss(CorpusChoice(path, create))

    def action_new_path(self) -> None:
        self.query_one("#corpus-path", Input).focus()
