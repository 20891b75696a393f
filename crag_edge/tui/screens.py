"""The help screen, the base of the app's full screens, and the ingest screen (add files or
folders, with progress and cancel)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen, Screen
from textual.suggester import Suggester
from textual.widgets import (
    Button,
    DirectoryTree,
    Footer,
    Header,
    Input,
    Log,
    Markdown,
    ProgressBar,
    Static,
)
from textual.worker import get_current_worker

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.ingest import IngestReport, ProgressEvent
from crag_edge.locations import is_database_url, parse_location, shown_location
from crag_edge.store import CorpusBackend
from crag_edge.store.records import CorpusStats
from crag_edge.tui.widgets import Plain

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


class PathTree(DirectoryTree):
    """A directory tree without hidden entries (as `PathSuggester` completes them)."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [path for path in paths if not path.name.startswith(".")]


class IngestCancelled(Exception):
    """Raised from the progress callback to stop an ingest between documents."""


def when(ts: float | None) -> str:
    """A unix time in local time, to the minute ("never" for none)."""
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "never"


def current_stats(corpus: CorpusBackend) -> CorpusStats | str:
    """The open corpus's stats, or why they cannot be read. Another program can truncate or
    overwrite the file, or its disk fail, while the app has it open: the screens then say
    so where the stats would be, instead of the app ending on the store's exception."""
    try:
        return corpus.stats()
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


class CragScreen(Screen[None]):
    """A full screen of the crag-edge app, over the main one. It is given what it shows when
    it is made and reports what the user did with messages, which bubble up to the app: the
    app's state changes in the app alone, and the screens need not know the app."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "back", "Back")]

    def action_back(self) -> None:
        self.dismiss()


class IngestScreen(CragScreen):
    """Add files or folders to the corpus; the work runs in a thread and can be cancelled.

    ctrl+d shows a directory tree (mounted on first use: its loader is a worker that never
    ends, which would keep `app.workers` busy for no reason); on short terminals it takes the
    place of the corpus stats and the log while it is shown.
    """

    DEFAULT_CSS = """
    IngestScreen #form { height: auto; padding: 0 1; }
    IngestScreen .row { height: auto; }
    IngestScreen Input { width: 1fr; }
    IngestScreen Button { margin: 0 1; }
    IngestScreen #stats { height: auto; border: round $primary; padding: 0 1; }
    IngestScreen #progress-row { height: 1; padding: 0 1; }
    IngestScreen #ingest-status { height: auto; padding: 0 1; }
    IngestScreen #ingest-log { height: 1fr; border: round $secondary; }
    IngestScreen #browse { display: none; border: round $accent; }
    IngestScreen.-browsing #browse { display: block; height: 2fr; }
    IngestScreen.-browsing.-short #stats { display: none; }
    IngestScreen.-browsing.-short #ingest-log { display: none; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+g", "cancel_ingest", "Cancel ingest"),
        # priority: the path box would take ctrl+d as "delete right" (the Delete key still does)
        Binding("ctrl+d", "browse", "Browse", priority=True),
        Binding("ctrl+q", "app.quit", "Quit", priority=True),
    ]

    class Created(Message):
        """The screen created the corpus at the database path and opened it (the app had
        none open): the app may adopt `engine`."""

        def __init__(self, engine: Engine) -> None:
            super().__init__()
            self.engine = engine

    class Ingested(Message):
        """An ingest run ended (done, cancelled or failed): the corpus may have changed."""

    def __init__(self, *, db: Path | str | None, engine: Engine | None, settings: Settings) -> None:
        """`engine` is the open corpus to add to; without one, ingesting creates the corpus at
        the path in the form (`db` by default) with `settings`."""
        super().__init__()
        self.db = db
        self.engine = engine
        self.settings = settings
        self.report: IngestReport | None = None
        self.running = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="form"):
            with Horizontal(classes="row"):
                yield Input(
                    str(self.db or "corpus.db"),
                    placeholder="Corpus database file, or postgresql://user@host/dbname",
                    id="db",
                    disabled=self.engine is not None,
                )
            with Horizontal(classes="row"):
                yield Input(
                    placeholder="File or folder to add (→ completes), e.g. sample_corpus",
                    id="path",
                    suggester=PathSuggester(),
                )
                yield Button("Ingest", id="start", variant="primary")
                yield Button("Cancel", id="cancel", variant="error", disabled=True)
        yield Plain("", id="stats")
        with Horizontal(id="progress-row"):
            yield ProgressBar(total=1, id="progress", show_eta=False)
        yield Plain("", id="ingest-status")
        yield Log(id="ingest-log", highlight=False)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#stats").border_title = "Corpus"
        self.query_one("#ingest-log").border_title = "Files"
        self.query_one("#path", Input).focus()
        self._show_stats()

    def _show_stats(self) -> None:
        engine = self.engine
        stats = self.query_one("#stats", Static)
        if engine is None:
            stats.update("No corpus open: ingesting creates the database file above.")
        elif isinstance(current := current_stats(engine.corpus), str):
            stats.update(Text(current, style="red"))
        else:
            stats.update(describe_stats(current))

    @on(Input.Submitted, "#path")
    @on(Button.Pressed, "#start")
    def _start(self, _: Any) -> None:
        value = self.query_one("#path", Input).value.strip()
        if self.running or not value:
            return
        try:
            path = typed_path(value)
        except ValueError as exc:
            self.query_one("#ingest-status", Static).update(Text(str(exc), style="red"))
            return
        if not path.exists():
            missing = Text(f"No such file or folder: {path}", style="red")
            self.query_one("#ingest-status", Static).update(missing)
            return
        try:
            db = parse_location(self.query_one("#db", Input).value.strip() or "corpus.db")
        except ValueError as exc:
            self.query_one("#ingest-status", Static).update(Text(str(exc), style="red"))
            return
        self.running = True
        self.remove_class("-browsing")  # the log shows the progress
        self.query_one("#start", Button).disabled = True
        self.query_one("#cancel", Button).disabled = False
        self.query_one("#progress", ProgressBar).update(total=None, progress=0)
        self.query_one("#ingest-status", Static).update(f"Ingesting {path}…")
        self.run_ingest(path, db)

    @work(thread=True, exclusive=True, group="ingest", exit_on_error=False)
    def run_ingest(self, path: Path, db: Path | str) -> None:
        worker = get_current_worker()
        app = self.app
        try:
            engine = self.engine
            if engine is None:
                engine = Engine.open(db, self.settings, create=True)
                app.call_from_thread(self._created, engine)

            def progress(event: ProgressEvent) -> None:
                app.call_from_thread(self._progress, event)
                if worker.is_cancelled:
                    raise IngestCancelled

            report = engine.ingest([path], progress=progress)
        except IngestCancelled:
            done = "Cancelled: every document written is complete."
            app.call_from_thread(self._finished, None, done)
        except Exception as exc:
            failed = Text(f"Failed: {type(exc).__name__}: {exc}", style="red")
            app.call_from_thread(self._finished, None, failed)
        else:
            app.call_from_thread(self._finished, report, "")

    def _created(self, engine: Engine) -> None:
        self.engine = engine
        self.post_message(self.Created(engine))

    def corpus_opened(self, engine: Engine) -> None:
        """The app opened `engine`: later runs add to it (a running one keeps its own)."""
        self.engine = engine
        if self.is_mounted and not self.running:
            self.query_one("#db", Input).disabled = True
            self._show_stats()

    def _progress(self, event: ProgressEvent) -> None:
        self.query_one("#progress", ProgressBar).update(total=event.total, progress=event.done)
        if event.stage == "passages":
            line = f"evaluator {event.source} read {event.done}/{event.total} passages"
            self.query_one("#ingest-status", Static).update(line)
            return
        self.query_one("#ingest-log", Log).write_line(f"{event.status:<9} {event.source}")
        self.query_one("#ingest-status", Static).update(
            f"{event.done}/{event.total} · {event.source}"
        )

    def _finished(self, report: IngestReport | None, message: Text | str) -> None:
        self.running = False
        self.report = report
        self.query_one("#start", Button).disabled = False
        self.query_one("#cancel", Button).disabled = True
        self.query_one("#db", Input).disabled = self.engine is not None
        log = self.query_one("#ingest-log", Log)
        if report is not None:
            for source, reason in report.errors:
                log.write_line(f"ERROR     {source}: {reason}")
            for source, reason in report.skipped:
                log.write_line(f"skipped   {source}: {reason}")
            message = (
                f"Done in {report.seconds:.1f}s: {report.added} added, {report.updated} updated, "
                f"{report.unchanged} unchanged, {len(report.errors)} errors, "
                f"{report.chunks_written} chunks written."
            )
        self.query_one("#ingest-status", Static).update(message)
        self._show_stats()
        self.post_message(self.Ingested())

    @on(Button.Pressed, "#cancel")
    def action_cancel_ingest(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "ingest")
            self.query_one("#ingest-status", Static).update("Cancelling after the current batch…")

    def action_browse(self) -> None:
        """Show and focus the directory tree; from the tree, hide it and return to the path."""
        trees = self.query(PathTree)
        if not trees:
            tree = PathTree(Path.cwd(), id="browse")
            tree.border_title = "Browse · Enter fills the path · ctrl+d back"
            self.mount(tree, before=self.query_one("#ingest-log"))
        else:
            tree = trees.first()
            if self.has_class("-browsing") and tree.has_focus:
                self.remove_class("-browsing")
                self.query_one("#path", Input).focus()
                return
        self.add_class("-browsing")
        tree.focus()

    @on(DirectoryTree.FileSelected, "#browse")
    @on(DirectoryTree.DirectorySelected, "#browse")
    def _browsed(self, event: DirectoryTree.FileSelected | DirectoryTree.DirectorySelected) -> None:
        box = self.query_one("#path", Input)
        box.value = relative_name(event.path)
        box.cursor_position = len(box.value)
        if isinstance(event, DirectoryTree.FileSelected):
            box.focus()  # a file is a leaf: Enter in the box ingests it
            hint = "Enter ingests it"
        else:
            hint = "Enter on a file picks it; ctrl+d goes back to the path box"
        self.query_one("#ingest-status", Static).update(f"Selected {box.value}: {hint}.")

    def action_back(self) -> None:
        if self.running:
            self.notify("An ingest is running: cancel it (ctrl+g) first.", severity="warning")
            return
        super().action_back()
