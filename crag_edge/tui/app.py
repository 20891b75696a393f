"""`CragApp`: the one owner of the open `Engine`, and of the settings it runs under.

The app opens, switches and closes the engine (in a thread worker: model and disk work never
runs on the event loop) and passes it down to the screens that use it; the screens report
what the user did with messages, or with the result they are dismissed with. The main
screen, where questions are asked, is `tui.ask.AskScreen`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.widget import AwaitMount
from textual.worker import get_current_worker

from crag_edge.config import Settings, SettingsError
from crag_edge.engine import Engine
from crag_edge.locations import is_database_url, parse_location, same_location, shown_location
from crag_edge.models.llm import SharedLlm
from crag_edge.tui.ask import IDLE, AskScreen
from crag_edge.tui.corpora import CorpusChoice, CorpusScreen, open_error
from crag_edge.tui.ingest import IngestScreen
from crag_edge.tui.screens import HelpScreen, current_stats
from crag_edge.tui.search import SearchScreen
from crag_edge.tui.settings import SettingsScreen, save_settings
from crag_edge.tui.widgets import NoControlCodes
from crag_edge.types import Embedder

NO_CONTROL_CODES = NoControlCodes()


class CragApp(App[None]):
    """The laptop face of crag-edge. Give it an open `engine`, or a `db` to open in a worker."""

    TITLE = "crag-edge"
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012 (as App declares it)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),
        Binding("ctrl+o", "ingest", "Ingest"),
        Binding("ctrl+f", "search", "Search", show=False),
        Binding("f2", "settings", "Settings"),
        Binding("f3", "corpora", "Corpora"),
        Binding("ctrl+t", "toggle_theme", "Theme"),
    ]

    def __init__(
        self,
        *,
        engine: Engine | None = None,
        db: Path | str | None = None,
        settings: Settings | None = None,
        config: Path | None = None,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        super().__init__()
        self.config_path = config
        self.engine = engine
        self.settings = engine.settings if engine is not None else settings or Settings.load()
        # A corpus file, or a `postgresql://` URL (shown without its password).
        self.db = parse_location(engine.corpus.location) if engine is not None else db
        self.main_screen = AskScreen(engine, self._first_notice(), clock)
        self._owns_engine = engine is None

    def get_default_screen(self) -> AskScreen:
        return self.main_screen

    async def on_mount(self) -> None:
        # The main screen composes in its own task: wait for it, so that the app takes keys
        # (a Pilot's, or a paste at launch) only once the question box has focus.
        await AwaitMount(self.main_screen, [self.main_screen])
        if self.engine is not None:
            self.corpus_ready()
            return
        self.sub_title = shown_location(self.db) if self.db else "no corpus"
        if self._can_open():
            assert self.db is not None
            self.open_engine(self.db)

    def _can_open(self) -> bool:
        """A corpus to open at start: a database URL, or a file that exists."""
        return self.db is not None and (is_database_url(self.db) or Path(self.db).exists())

    def _first_notice(self) -> str:
        if self.engine is not None:
            return IDLE
        if self._can_open():
            return f"Opening {shown_location(self.db or '')} and loading the embedder…"
        where = f"No corpus at {self.db}" if self.db else "No corpus given (--db PATH)"
        return f"{where}: press ctrl+o to ingest files into one."

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = False,
    ) -> None:
        """Notify with the message as written, whatever `markup` says (the app's screens
        pass Textual's default, True): a message names paths and quotes errors, whose
        brackets markup would take for tags, and `[@click=...]` for an action."""
        super().notify(message, title=title, severity=severity, timeout=timeout, markup=False)

    def get_line_filters(self) -> Sequence[LineFilter]:
        """Textual's filters, then the one that keeps control characters off the terminal."""
        return [*super().get_line_filters(), NO_CONTROL_CODES]

    def corpus_ready(self) -> None:
        """The title says what the open corpus holds now (or why it cannot be read)."""
        assert self.engine is not None
        stats = current_stats(self.engine.corpus)
        if isinstance(stats, str):
            self.sub_title = f"{shown_location(self.db or '')} · {stats}"
        else:
            held = f"{stats.documents:,} documents · {stats.chunks:,} chunks"
            self.sub_title = f"{stats.path} · {held}"

    # -- the engine --------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="open", exit_on_error=False)
    def open_engine(self, db: Path | str, create: bool = False, switching: bool = False) -> None:
        """Open (with `create`, create) the corpus at `db`; sharing the open engine's models
        when the settings name the same ones, so a switch reloads nothing."""
        embedder, llm = self._shared_embedder(), self._shared_llm()
        try:
            engine = Engine.open(db, self.settings, create=create, embedder=embedder, llm=llm)
        except Exception as exc:
            self.call_from_thread(self._open_failed, db, open_error(exc), switching)
            return
        if get_current_worker().is_cancelled:  # the app is closing: nobody will use it
            engine.close()
            return
        self.call_from_thread(self._set_engine, engine, switching)

    def _set_engine(self, engine: Engine, switching: bool = False) -> None:
        """Make `engine` the app's (the app closes it); a previous one it owned is closed."""
        old, owned = self.engine, self._owns_engine
        self.engine = engine
        self.db = parse_location(engine.corpus.location)
        self._owns_engine = True
        if old is not None and old is not engine and owned:
            old.close()
        self._pass_down(engine)
        if switching:
            self.notify(f"Switched to {shown_location(self.db)}.")

    def _pass_down(self, engine: Engine) -> None:
        """Give `engine` to every screen that uses it."""
        self.main_screen.engine = engine
        for screen in self.screen_stack:
            if isinstance(screen, IngestScreen | SearchScreen):
                screen.engine = engine
        self.corpus_ready()

    def _open_failed(self, db: Path | str, message: str, switching: bool) -> None:
        shown = shown_location(db)
        if not switching:  # opening the corpus the app was started with, or one to ingest into
            self.main_screen.notice = f"Cannot open {shown}: {message}"
            for screen in self.screen_stack:
                if isinstance(screen, IngestScreen):
                    screen.open_failed(message)
            return
        still = f"; still on {shown_location(self.db or '')}" if self.engine is not None else ""
        self.main_screen.notice = f"Cannot open {shown}{still}."
        self.notify(f"Cannot open {shown}: {message}", severity="error", timeout=10)

    def _shared_embedder(self) -> Embedder | None:
        """The open engine's embedder when the settings name the same model: it is what
        `Engine.open` would load, so a switch costs no model load (a corpus built by another
        model is still refused)."""
        engine = self.engine
        if engine is not None and engine.embedder.model_id == self.settings.models.embedder:
            return engine.embedder
        return None

    def _shared_llm(self) -> SharedLlm | None:
        """The open engine's LLM (loaded on first use, ~1 GB) when it was opened with the
        app's current settings: a corpus switch then reloads nothing."""
        engine = self.engine
        if engine is not None and engine.settings == self.settings:
            return engine.llm_factory
        return None

    def busy(self) -> str | None:
        """What is running that a corpus switch would pull the corpus out from under."""
        running = {w.group for w in self.workers if not w.is_finished}
        if self.main_screen.busy or "ask" in running:
            return "A question is running"
        ingesting = any(isinstance(s, IngestScreen) and s.running for s in self.screen_stack)
        if "ingest" in running or ingesting:
            return "An ingest is running"
        if "open" in running:
            return "A corpus is being opened"
        return None

    def on_unmount(self) -> None:
        if self._owns_engine and self.engine is not None:
            self.engine.close()

    # -- screens -----------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_search(self) -> None:
        if not isinstance(self.screen, SearchScreen):
            self.push_screen(SearchScreen(self.engine))

    def action_ingest(self) -> None:
        if not isinstance(self.screen, IngestScreen):
            self.push_screen(IngestScreen(db=self.db, engine=self.engine))

    @on(IngestScreen.Ingested)
    def _ingested(self) -> None:
        if self.engine is not None:
            self.corpus_ready()

    @on(IngestScreen.CorpusWanted)
    def _corpus_wanted(self, event: IngestScreen.CorpusWanted) -> None:
        """Create the corpus the ingest screen is to add to (none was open)."""
        self.open_engine(event.db, create=True)

    def action_corpora(self) -> None:
        if not isinstance(self.screen, CorpusScreen):
            corpus = self.engine.corpus if self.engine is not None else None
            picker = CorpusScreen(db=self.db, open_corpus=corpus, busy=self.busy)
            self.push_screen(picker, self._corpus_chosen)

    def _corpus_chosen(self, choice: CorpusChoice | None) -> None:
        """Open the corpus the picker was dismissed with (with `create`, create it)."""
        if choice is None:
            return
        if self.engine is not None and same_location(choice.path, self.engine.corpus.location):
            self.notify(f"{shown_location(choice.path)} is already open.")
            return
        verb = "Creating" if choice.create else "Opening"
        self.main_screen.notice = f"{verb} {shown_location(choice.path)}…"
        self.open_engine(choice.path, choice.create, switching=True)

    def action_settings(self) -> None:
        if not isinstance(self.screen, SettingsScreen):
            self.push_screen(SettingsScreen(self.settings, self.config_path))

    @on(SettingsScreen.Applied)
    def _settings_applied(self, event: SettingsScreen.Applied) -> None:
        """Apply the settings form's values and, when asked, save them as the config file. A
        save that fails after they were applied is said as such, not as a refusal."""
        try:
            self.apply_settings(event.settings)
        except Exception as exc:  # a refusal, or the open corpus failing to read its calibration
            event.form.refused(exc)
            return
        if event.save_to is not None:
            try:
                save_settings(event.save_to, event.settings)
            except (SettingsError, OSError) as exc:
                event.form.not_saved(event.settings, exc)
                return
            self.config_path = event.save_to
        event.form.applied(event.settings, event.save_to)

    def apply_settings(self, settings: Settings) -> None:
        """Use `settings` from the next question on (the open corpus and embedder are kept).
        The new engine reads the corpus's calibration, so it fails as the store can."""
        if self.main_screen.busy:
            raise RuntimeError("a question is running: apply once it has finished")
        old = self.engine
        if old is not None:
            self.engine = Engine(old.corpus, old.embedder, settings)
            for provider in old.fallbacks:
                provider.close()
            self.main_screen.engine = self.engine
        self.settings = settings

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"
