"""The ingest screen (ctrl+o): add files or folders to the open corpus, with progress and
cancel. With no corpus open it asks the app for one (`CorpusWanted`) and starts once the
app passes the new engine down."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import ClassVar

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import var
from textual.widgets import Button, DirectoryTree, Footer, Header, Input, Log, ProgressBar
from textual.worker import get_current_worker

from crag_edge.engine import Engine
from crag_edge.ingest import IngestReport, ProgressEvent
from crag_edge.ingest.rate import IngestMeter
from crag_edge.locations import parse_location
from crag_edge.tui.screens import (
    CragScreen,
    PathSuggester,
    current_stats,
    describe_stats,
    relative_name,
    typed_path,
)
from crag_edge.tui.widgets import BoundText


class PathTree(DirectoryTree):
    """A directory tree without hidden entries (as `PathSuggester` completes them)."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [path for path in paths if not path.name.startswith(".")]


class IngestCancelled(Exception):
    """Raised from the progress callback to stop an ingest between documents."""


def report_lines(report: IngestReport) -> tuple[list[str], str]:
    """The log lines of a finished run's errors and skips, and its one-line summary."""
    lines = [f"ERROR     {source}: {reason}" for source, reason in report.errors]
    lines += [f"skipped   {source}: {reason}" for source, reason in report.skipped]
    summary = (
        f"Done in {report.seconds:.1f}s: {report.added} added, {report.updated} updated, "
        f"{report.unchanged} unchanged, {len(report.errors)} errors, "
        f"{report.chunks_written} chunks written."
    )
    return lines, summary


class IngestScreen(CragScreen[None]):
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

    AUTO_FOCUS = "#path"
    engine: var[Engine | None] = var(None, init=False)
    """The app's open corpus, passed down; ingests add to it."""
    running: var[bool] = var(False, init=False)
    status: var[RenderableType] = var[RenderableType]("")
    stats: var[RenderableType] = var[RenderableType]("")
    """What the corpus holds, or why that cannot be read."""
    done: var[float] = var(0.0)
    total: var[float | None] = var[float | None](1.0)
    """The progress bar's: None while the number of files is not yet known."""

    class CorpusWanted(Message):
        """No corpus is open: the app is to create (or open) the one at `db` and pass it
        down, or answer with `open_failed`."""

        def __init__(self, db: Path | str) -> None:
            super().__init__()
            self.db = db

    class Ingested(Message):
        """An ingest run ended (done, cancelled or failed): the corpus may have changed."""

    def __init__(self, *, db: Path | str | None, engine: Engine | None) -> None:
        """`engine` is the open corpus to add to; without one, ingesting asks the app for
        the corpus at the path in the form (`db` by default)."""
        super().__init__()
        self.db = db
        self.set_reactive(IngestScreen.engine, engine)
        self.set_reactive(IngestScreen.stats, self._stats())
        self.report: IngestReport | None = None
        self._waiting: Path | None = None  # a file or folder to ingest once the corpus opens
        self._meter = IngestMeter()  # the run's rate and ETA; a new one for each run

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
        stats = BoundText(id="stats").data_bind(shown=IngestScreen.stats)
        stats.border_title = "Corpus"
        yield stats
        with Horizontal(id="progress-row"):
            progress = ProgressBar(id="progress", show_eta=False)
            yield progress.data_bind(progress=IngestScreen.done, total=IngestScreen.total)
        yield BoundText(id="ingest-status").data_bind(shown=IngestScreen.status)
        log = Log(id="ingest-log", highlight=False)
        log.border_title = "Files"
        yield log
        yield Footer()

    def watch_engine(self, engine: Engine | None) -> None:
        """The corpus stats, and the run that waited for the corpus to open."""
        self.query_one("#db", Input).disabled = engine is not None or self.running
        self.stats = self._stats()
        if engine is not None and self._waiting is not None:
            path, self._waiting = self._waiting, None
            self._ingest(engine, path)

    def _stats(self) -> RenderableType:
        """What the open corpus holds, or why that cannot be read."""
        if self.engine is None:
            return "No corpus open: ingesting creates the database file above."
        if isinstance(current := current_stats(self.engine.corpus), str):
            return Text(current, style="red")
        return describe_stats(current)

    def watch_running(self, running: bool) -> None:
        self.query_one("#start", Button).disabled = running
        self.query_one("#cancel", Button).disabled = not running
        self.query_one("#db", Input).disabled = running or self.engine is not None

    @on(Input.Submitted, "#path")
    @on(Button.Pressed, "#start")
    def _start(self) -> None:
        value = self.query_one("#path", Input).value.strip()
        if self.running or not value:
            return
        try:
            path = typed_path(value)
            if not path.exists():
                raise ValueError(f"No such file or folder: {path}")
            db = parse_location(self.query_one("#db", Input).value.strip() or "corpus.db")
        except ValueError as exc:
            self.status = Text(str(exc), style="red")
            return
        self.running = True
        self.remove_class("-browsing")  # the log shows the progress
        self.total, self.done = None, 0
        self._meter = IngestMeter()
        if self.engine is None:
            self._waiting = path
            self.status = f"Creating {relative_name(db)}…"
            self.post_message(self.CorpusWanted(db))
        else:
            self._ingest(self.engine, path)

    def _ingest(self, engine: Engine, path: Path) -> None:
        self.status = f"Ingesting {path}…"
        self.run_ingest(engine, path)

    def open_failed(self, message: str) -> None:
        """The app could not open the corpus to ingest into."""
        if self._waiting is not None:
            self._waiting = None
            self._finished(None, Text(f"Failed: {message}", style="red"))

    @work(thread=True, exclusive=True, group="ingest", exit_on_error=False)
    def run_ingest(self, engine: Engine, path: Path) -> None:
        worker = get_current_worker()
        app = self.app

        def progress(event: ProgressEvent) -> None:
            app.call_from_thread(self._progress, event)
            if worker.is_cancelled:
                raise IngestCancelled

        try:
            report = engine.ingest([path], progress=progress)
        except IngestCancelled:
            done = "Cancelled: every document written is complete."
            app.call_from_thread(self._finished, None, done)
        except Exception as exc:
            failed = Text(f"Failed: {type(exc).__name__}: {exc}", style="red")
            app.call_from_thread(self._finished, None, failed)
        else:
            app.call_from_thread(self._finished, report, "")

    def _progress(self, event: ProgressEvent) -> None:
        """The bar counts files (passages in the evaluator's stage), the status line chunks
        with their rate and ETA (`ingest.rate`), the log each finished file."""
        self.total, self.done = event.total, event.done
        self.status = self._meter.update(event).describe()
        if event.stage == "documents":
            self.query_one(Log).write_line(f"{event.status:<9} {event.source}")

    def _finished(self, report: IngestReport | None, message: RenderableType) -> None:
        self.report = report
        if report is not None:
            lines, message = report_lines(report)
            self.query_one(Log).write_lines(lines)
        self.status = message
        self.running = False
        self.stats = self._stats()
        self.post_message(self.Ingested())

    @on(Button.Pressed, "#cancel")
    def action_cancel_ingest(self) -> None:
        if self.running:
            self.workers.cancel_group(self, "ingest")
            self.status = "Cancelling after the current batch…"

    def action_browse(self) -> None:
        """Show and focus the directory tree; from the tree, hide it and return to the path."""
        trees = self.query(PathTree)
        if not trees:
            tree = PathTree(Path.cwd(), id="browse")
            tree.border_title = "Browse · Enter fills the path · ctrl+d back"
            self.mount(tree, before=self.query_one(Log))
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
        self.status = f"Selected {box.value}: {hint}."

    def action_back(self) -> None:
        if self.running:
            self.notify("An ingest is running: cancel it (ctrl+g) first.", severity="warning")
            return
        super().action_back()
