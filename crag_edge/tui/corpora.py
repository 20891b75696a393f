"""The corpus picker (F3): the corpus files nearby with their stats, and a path to open or
create another. Stats come from `Corpus.open(readonly=True)`, so no model loads until one
is picked; opening it is the app's job (the screen posts `CorpusScreen.Picked`)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import Footer, Header, Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from crag_edge.engine import Engine
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
from crag_edge.tui.widgets import Plain

NOT_A_CORPUS = "not a crag-edge corpus"


@dataclass(frozen=True)
class CorpusEntry:
    """One file in the picker: its stats, or why it cannot be opened (`problem`)."""

    path: Path | str  # a file, or the open corpus's database URL
    stats: CorpusStats | None = None
    problem: str | None = None
    openable: bool = True
    is_open: bool = False


def open_error(exc: Exception) -> str:
    """Why a file could not be opened, in the picker's words (the path is shown beside it)."""
    if isinstance(exc, NotACorpusError | CorruptCorpusError):
        return f"{NOT_A_CORPUS}: {exc.reason}"
    return exc.reason if isinstance(exc, CorpusError) else f"{type(exc).__name__}: {exc}"


def read_entry(path: Path) -> CorpusEntry:
    """Stats of the corpus at `path`, read-only; any file that is not one becomes a reason."""
    try:
        with Corpus.open(path, readonly=True) as corpus:
            return CorpusEntry(path, corpus.stats())
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
            f"\n  {stats.documents} documents · {stats.chunks} chunks · "
            f"{size_text(stats.db_bytes)} · last ingest {when(stats.last_ingest_at)}"
        )
    else:
        text.append(f"\n  {entry.problem}", style="yellow" if entry.openable else "red")
    return text


class CorpusScreen(CragScreen):
    """Pick a corpus to switch to, or type a path to open or create one."""

    DEFAULT_CSS = """
    CorpusScreen #corpora-intro { height: auto; padding: 0 1; color: $text-muted; }
    CorpusScreen #corpora { height: 1fr; border: round $primary; }
    CorpusScreen #corpora-status { height: auto; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+n", "new_path", "Path"),
        Binding("f5", "rescan", "Rescan"),
    ]

    class Picked(Message):
        """Switch to the corpus at `path` (with `create`, a new one). The app answers with
        `switch_refused` or `open_failed`, or closes the picker once it is open."""

        def __init__(self, picker: CorpusScreen, path: Path | str, create: bool) -> None:
            super().__init__()
            self.picker = picker
            self.path = path
            self.create = create

    def __init__(self, *, db: Path | str | None, open_corpus: CorpusBackend | None) -> None:
        """`db` is the app's corpus file (its folder is searched too); `open_corpus` the
        corpus the app has open, listed first with its live stats."""
        super().__init__()
        self.db = db
        self.open_corpus = open_corpus
        self.entries: list[CorpusEntry] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Plain("", id="corpora-intro")
        yield OptionList(id="corpora")
        yield Input(
            placeholder="Path of a corpus to open, or of a new one to create (→ completes)",
            id="corpus-path",
            suggester=PathSuggester(),
        )
        yield Plain("", id="corpora-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#corpora").border_title = "Corpora"
        self.query_one("#corpora", OptionList).focus()
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
        self.query_one("#corpora-intro", Static).update(
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
        self.query_one("#corpora-status", Static).update("Reading the corpus files…")
        self.scan(folders, current)

    @work(thread=True, exclusive=True, group="scan", exit_on_error=False)
    def scan(self, folders: list[Path], current: CorpusEntry | None) -> None:
        found = find_corpora(folders, skip=current.path if current is not None else None)
        entries = ([current] if current is not None else []) + found
        if not get_current_worker().is_cancelled:  # else the screen has gone
            self.app.call_from_thread(self._show, entries)

    def _show(self, entries: list[CorpusEntry]) -> None:
        self.entries = entries
        cwd = Path.cwd()
        corpora = self.query_one("#corpora", OptionList)
        corpora.clear_options()
        corpora.add_options(
            Option(entry_prompt(entry, cwd), id=str(i), disabled=not entry.openable)
            for i, entry in enumerate(entries)
        )
        usable = sum(entry.openable for entry in entries)
        corpora.border_title = f"Corpora · {usable} of {len(entries)} files"
        if usable and corpora.highlighted is None:
            corpora.action_first()
        status = "" if entries else "No *.db files here: type a path below to create a corpus."
        self.query_one("#corpora-status", Static).update(status)

    @on(OptionList.OptionSelected, "#corpora")
    def _picked(self, event: OptionList.OptionSelected) -> None:
        if event.option.id is not None:
            entry = self.entries[int(event.option.id)]
            self.open(entry.path, create=False)

    @on(Input.Submitted, "#corpus-path")
    def _typed(self, event: Input.Submitted) -> None:
        value = event.value.strip()
        if not value:
            return
        if is_database_url(value):  # opened, or created when it holds no corpus yet
            self.open(value, create=True)
            return
        try:
            path = typed_path(value)
        except ValueError as exc:
            self.open_failed(str(exc))
            return
        known = next((e for e in self.entries if e.path == path.resolve()), None)
        if known is not None and not known.openable:
            self.open_failed(f"{relative_name(known.path)}: {known.problem}")
            return
        self.open(path, create=not path.exists())

    def open(self, path: Path | str, *, create: bool) -> None:
        """Ask the app to switch (it answers with one of the two methods below)."""
        status = self.query_one("#corpora-status", Static)
        status.update(f"{'Creating' if create else 'Opening'} {relative_name(path)}…")
        self.post_message(self.Picked(self, path, create))

    def corpus_opened(self, engine: Engine) -> None:
        """The app opened `engine`: the next rescan lists it as the open one."""
        self.db = parse_location(engine.corpus.location)
        self.open_corpus = engine.corpus

    def switch_refused(self) -> None:
        """The app is busy with work that needs the open corpus."""
        status = Text("Busy: switch once the running work has finished.", "yellow")
        self.query_one("#corpora-status", Static).update(status)

    def open_failed(self, message: str) -> None:
        self.query_one("#corpora-status", Static).update(Text(message, style="red"))

    def action_new_path(self) -> None:
        self.query_one("#corpus-path", Input).focus()
