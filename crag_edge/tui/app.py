"""`CragApp`: ask a question, watch each stage of the CRAG loop, read the evidence and answer.

Model and disk work never runs on the event loop: opening (or switching) the corpus, every
question and every ingest run in thread workers, which report back with `call_from_thread`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.filter import LineFilter
from textual.notifications import SeverityLevel
from textual.widgets import DataTable, Footer, Header, Input, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from crag_edge.answer.checked import SupportReport
from crag_edge.answer.generation import cited, incomplete_note
from crag_edge.config import Settings, SettingsError
from crag_edge.engine import Engine
from crag_edge.locations import is_database_url, parse_location, same_location, shown_location
from crag_edge.models.llm import Message, SharedLlm
from crag_edge.progress import StageEvent
from crag_edge.result import ContextItem, CragResult
from crag_edge.text_boundary import QuestionError, asked_question
from crag_edge.tui.corpora import CorpusScreen, open_error
from crag_edge.tui.screens import HelpScreen, IngestScreen, current_stats
from crag_edge.tui.settings import SettingsScreen, save_settings
from crag_edge.tui.widgets import (
    DecisionPanel,
    EvidenceTable,
    NoControlCodes,
    Plain,
    QuestionInput,
    StageLine,
    chunk_view,
    citation_label,
)
from crag_edge.types import Embedder

INSUFFICIENT_TITLE = "Answer — insufficient evidence"
INCOMPLETE_TITLE = "Answer — incomplete"
EMPTY_TITLE = "No answer"
ANSWER_REFRESH_S = 0.05  # the answer panel is redrawn at most this often while it streams
NO_CONTROL_CODES = NoControlCodes()


# How the loop's stages read on the stage line; None hides one (the tiers stand for "grade").
STAGE_NAMES: dict[str, str | None] = {
    "embed": None,
    "grade": None,
    "grade:signals": "signals",
    "grade:cross_encoder": "cross-encoder",
    "grade:llm": "llm judge",
}


def batched(tokens: Iterable[str], every_s: float = ANSWER_REFRESH_S) -> Iterator[str]:
    """`tokens` joined into pieces, one at most every `every_s` seconds (the first at once).
    The answer panel re-wraps the whole answer on each update: one update per token made a
    long, fast answer cost the square of its length, and held the model's thread each time."""
    pending, shown_at = "", float("-inf")
    for token in tokens:
        pending += token
        now = time.monotonic()
        if now - shown_at >= every_s:
            yield pending
            pending, shown_at = "", now
    if pending:
        yield pending


class CragApp(App[None]):
    """The laptop face of crag-edge. Give it an open `engine`, or a `db` to open in a worker."""

    TITLE = "crag-edge"
    CSS = """
    #question { margin: 0 1; }
    #stages { height: auto; max-height: 2; padding: 0 2; }
    #body { height: 1fr; }
    #left, #right { width: 1fr; }
    #evidence { height: 1fr; border: round $primary; }
    #chunk-scroll { height: 1fr; border: round $secondary; padding: 0 1; }
    #decision { height: auto; max-height: 14; border: round $accent; padding: 0 1; }
    #answer-scroll { height: 1fr; border: round $success; padding: 0 1; }
    /* min-width: an auto-height option list given no width to wrap in raises (Textual). */
    #citations { height: auto; max-height: 5; min-width: 8; border: round $success-darken-2; }
    #citations.-empty { display: none; }
    #right.insufficient #answer-scroll { border: heavy $warning; }
    #right.insufficient #answer { color: $warning; text-style: bold; }
    #right.failed #answer-scroll { border: heavy $error; }
    #right.incomplete #answer-scroll { border: heavy $warning; }
    #answer-scroll { min-height: 5; }
    Screen.-short #question { border: none; height: 1; padding: 0 1; background: $boost; }
    Screen.-short #decision { max-height: 8; }
    Screen.-short #citations { max-height: 3; }
    """
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]  # noqa: RUF012 (as App declares it)
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+q", "quit", "Quit", priority=True),
        Binding("f1", "help", "Help"),
        Binding("question_mark", "help", "Help", show=False),
        Binding("ctrl+l", "focus_question", "Question"),
        Binding("ctrl+r", "focus_evidence", "Evidence"),
        Binding("ctrl+o", "ingest", "Ingest"),
        Binding("f2", "settings", "Settings"),
        Binding("f3", "corpora", "Corpora"),
        Binding("ctrl+y", "copy_answer", "Copy answer"),
        Binding("ctrl+n", "new_conversation", "New chat"),
        Binding("escape", "cancel", "Cancel", show=False),
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
        self.clock = clock
        self.result: CragResult | None = None
        self.answer_text = ""
        # The questions and answers so far: a follow-up is made standalone from them, until
        # ctrl+n (or another corpus) starts a new conversation.
        self.conversation: list[Message] = []
        self._pending: str | None = None
        self._run = 0
        self._owns_engine = engine is None
        # Questions whose thread is still inside the engine: a cancelled worker counts as
        # finished at once, but its thread runs on until the stage it is in returns.
        self._asking: set[int] = set()

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Header()
        yield QuestionInput(placeholder="Ask a question and press Enter…", id="question")
        yield StageLine(clock=self.clock, id="stages")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield EvidenceTable(id="evidence")
                with VerticalScroll(id="chunk-scroll"):
                    yield Plain("Select a row to read its chunk.", id="chunk")
            with Vertical(id="right"):
                yield DecisionPanel(id="decision")
                with VerticalScroll(id="answer-scroll"):
                    yield Plain("", id="answer")
                yield OptionList(id="citations", classes="-empty", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = shown_location(self.db) if self.db else "no corpus"
        self.query_one("#evidence", EvidenceTable).border_title = "Evidence"
        self.query_one("#chunk-scroll").border_title = "Chunk"
        self.query_one("#decision").border_title = "Decision"
        self.query_one("#answer-scroll").border_title = "Answer"
        self.query_one("#citations").border_title = "Citations"
        self.query_one("#question", QuestionInput).focus()
        if self.engine is not None:
            self.corpus_ready()
        elif self.db is not None and (is_database_url(self.db) or Path(self.db).exists()):
            self.stages.idle(f"Opening {shown_location(self.db)} and loading the embedder…")
            self.open_engine(self.db)
        else:
            where = f"No corpus at {self.db}" if self.db else "No corpus given (--db PATH)"
            self.stages.idle(f"{where}: press ctrl+o to ingest files into one.")

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

    @property
    def stages(self) -> StageLine:
        return self.query_one("#stages", StageLine)

    def corpus_ready(self) -> None:
        assert self.engine is not None
        stats = current_stats(self.engine.corpus)
        if isinstance(stats, str):
            self.sub_title = f"{shown_location(self.db or '')} · {stats}"
        else:
            self.sub_title = f"{stats.path} · {stats.documents} documents · {stats.chunks} chunks"
        self.stages.idle("Type a question and press Enter.")
        if self._pending is not None:
            question, self._pending = self._pending, None
            self.ask(question)

    # -- engine ------------------------------------------------------------------------------

    @work(thread=True, exclusive=True, group="open", exit_on_error=False)
    def open_engine(
        self,
        db: Path | str,
        create: bool = False,
        embedder: Embedder | None = None,
        switching: bool = False,
        llm: SharedLlm | None = None,
    ) -> None:
        try:
            engine = Engine.open(db, self.settings, create=create, embedder=embedder, llm=llm)
        except Exception as exc:
            if switching:
                self.call_from_thread(self._switch_failed, db, open_error(exc))
            else:
                shown = shown_location(db)
                self.call_from_thread(self.stages.idle, f"Cannot open {shown}: {exc}")
            return
        if get_current_worker().is_cancelled:  # the app is closing: nobody will use it
            engine.close()
            return
        self.call_from_thread(self._switched if switching else self._set_engine, engine)

    def _set_engine(self, engine: Engine) -> None:
        """Make `engine` the app's (the app closes it); a previous one it owned is closed."""
        old, owned = self.engine, self._owns_engine
        self.engine = engine
        self.db = parse_location(engine.corpus.location)
        self._owns_engine = True
        if old is not None and old is not engine:
            if owned:
                old.close()
            self.conversation = []  # another corpus: the earlier turns do not apply
            self._reset_view("No question asked of this corpus yet.")
        for screen in self.screen_stack:
            if isinstance(screen, IngestScreen | CorpusScreen):
                screen.corpus_opened(engine)
        self.corpus_ready()

    def busy(self) -> str | None:
        """What is running that a corpus switch would pull the corpus out from under."""
        running = {w.group for w in self.workers if not w.is_finished}
        if self.stages.running or "ask" in running or self._asking:
            return "A question is running"
        ingesting = any(isinstance(s, IngestScreen) and s.running for s in self.screen_stack)
        if "ingest" in running or ingesting:
            return "An ingest is running"
        if "open" in running:
            return "A corpus is being opened"
        return None

    def switch_corpus(self, db: Path | str, create: bool = False) -> bool:
        """Open (with `create`, create) the corpus at `db` in a worker and make it the app's,
        then return to the main screen. False (with a warning) while work is running."""
        reason = self.busy()
        if reason is not None:
            self.notify(f"{reason}: switch corpora once it has finished.", severity="warning")
            return False
        if self.engine is not None and same_location(db, self.engine.corpus.location):
            self.notify(f"{shown_location(db)} is already open.")
            self._return_to_main()
            return True
        verb = "Creating" if create else "Opening"
        self.stages.idle(f"{verb} {shown_location(db)}…")
        self.open_engine(
            db, create, self._shared_embedder(), switching=True, llm=self._shared_llm()
        )
        return True

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

    def _switched(self, engine: Engine) -> None:
        self._set_engine(engine)
        self.notify(f"Switched to {shown_location(self.db or '')}.")
        self._return_to_main()

    def _switch_failed(self, db: Path | str, message: str) -> None:
        still = f"; still on {shown_location(self.db or '')}" if self.engine is not None else ""
        shown = shown_location(db)
        self.stages.idle(f"Cannot open {shown}{still}.")
        self.notify(f"Cannot open {shown}: {message}", severity="error", timeout=10)
        for screen in self.screen_stack:
            if isinstance(screen, CorpusScreen):
                screen.open_failed(message)

    def _return_to_main(self) -> None:
        """Close the corpus picker and the screens above the main one (only if the picker is
        still open: the user may have gone elsewhere while the corpus opened)."""
        if any(isinstance(screen, CorpusScreen) for screen in self.screen_stack):
            while len(self.screen_stack) > 1:
                self.pop_screen()

    @on(CorpusScreen.Picked)
    def _corpus_picked(self, event: CorpusScreen.Picked) -> None:
        if not self.switch_corpus(event.path, create=event.create):
            event.picker.switch_refused()

    @on(IngestScreen.Created)
    def _ingest_created(self, event: IngestScreen.Created) -> None:
        """Adopt the engine of a corpus the ingest screen created while none was open."""
        if self.engine is None:
            self._set_engine(event.engine)

    @on(IngestScreen.Ingested)
    def _ingested(self) -> None:
        if self.engine is not None:
            self.corpus_ready()

    def on_unmount(self) -> None:
        if self._owns_engine and self.engine is not None:
            self.engine.close()

    # -- asking ------------------------------------------------------------------------------

    @on(Input.Submitted, "#question")
    def _submitted(self, event: Input.Submitted) -> None:
        if not event.value.strip():
            return
        try:
            question = asked_question(event.value)
        except QuestionError as exc:  # "???": nothing to search for, said where it was typed
            self.notify(f"{exc}; ask in words.", severity="warning")
            return
        box = self.query_one("#question", QuestionInput)
        box.remember(question)
        box.value = ""
        self.ask(question)

    def ask(self, question: str) -> None:
        """Start the pipeline for `question` in a worker (a running one is cancelled)."""
        self._run += 1
        self.stages.reset()
        self._reset_view(f"Working on: {question}")
        if self.engine is None:
            self._pending = question
            self.stages.idle(f"Queued until the corpus is open: {question}")
            return
        self.run_question(question, self._run)

    def _reset_view(self, decision: str) -> None:
        """Empty the result panels (a new question, or another corpus)."""
        self.result = None
        self.answer_text = ""
        self.query_one("#decision", DecisionPanel).clear(decision)
        self.query_one("#evidence", EvidenceTable).clear(columns=True)
        self.query_one("#chunk", Static).update("")
        self.query_one("#answer", Static).update("")
        citations = self.query_one("#citations", OptionList)
        citations.clear_options()
        citations.add_class("-empty")
        right = self.query_one("#right")
        right.remove_class("insufficient", "failed", "incomplete")
        self.query_one("#answer-scroll").border_title = "Answer"
        self.query_one("#answer-scroll").border_subtitle = ""

    @work(thread=True, exclusive=True, group="ask", exit_on_error=False)
    def run_question(self, question: str, run: int) -> None:
        engine = self.engine
        assert engine is not None
        worker = get_current_worker()

        def ui(fn: Callable[..., Any], *args: Any) -> None:
            if not worker.is_cancelled:
                self.call_from_thread(self._guarded, run, fn, *args)

        def on_stage(event: StageEvent) -> None:
            name = STAGE_NAMES.get(event.stage, event.stage)
            if name is None:
                return
            if event.status == "start":
                ui(self.stages.start, name)
            elif event.status == "end":
                ui(self.stages.finish, name, event.detail or None)
            else:
                ui(self.stages.done, name, event.detail)

        history = list(self.conversation)
        self._asking.add(run)
        try:
            result, stream = engine.answer(question, history=history, progress=on_stage)
            if worker.is_cancelled:
                return
            ui(self._show_result, result)
            for piece in batched(stream):
                if worker.is_cancelled:
                    return
                ui(self._append_answer, piece)
            note = incomplete_note(stream.finish_reason, stream.text, engine.settings.models)
            ui(self._finish_answer, result, note)
            if note is None and stream.support is not None and stream.support.sentences:
                ui(self._show_support, stream.support)
        except Exception as exc:
            ui(self._failed, f"{type(exc).__name__}: {exc}")
        finally:
            self._asking.discard(run)

    def _guarded(self, run: int, fn: Callable[..., Any], *args: Any) -> None:
        """Apply a worker's update only if it belongs to the latest question."""
        if run == self._run:
            fn(*args)

    def _show_result(self, result: CragResult) -> None:
        self.result = result
        self.query_one("#decision", DecisionPanel).show(result, self.settings)
        table = self.query_one("#evidence", EvidenceTable)
        table.load(result)
        table.border_title = (
            f"Evidence · {len(result.hits)} hits · {len(result.context)} in context"
        )
        if result.insufficient_evidence or not result.context:
            self.query_one("#right").add_class("insufficient")
            self.query_one("#answer-scroll").border_title = INSUFFICIENT_TITLE

    def _append_answer(self, token: str) -> None:
        self.answer_text += token
        self.query_one("#answer", Static).update(self.answer_text)
        self.query_one("#answer-scroll", VerticalScroll).scroll_end(animate=False)

    def _finish_answer(self, result: CragResult, note: str | None) -> None:
        """Citations under the answer; `note` (why it is empty or cut off) in the panel. An
        answer joins the conversation under its standalone question."""
        if self.answer_text.strip():
            self.conversation += [
                {"role": "user", "content": result.question},
                {"role": "assistant", "content": self.answer_text},
            ]
        items = cited(self.answer_text, result.context)
        citations = self.query_one("#citations", OptionList)
        citations.clear_options()
        citations.add_options(Option(citation_label(item), id=str(item.n)) for item in items)
        citations.set_class(not items, "-empty")
        if note is None:
            return
        empty = not self.answer_text.strip()
        self.query_one("#right").add_class("incomplete")
        self.query_one("#answer-scroll").border_title = EMPTY_TITLE if empty else INCOMPLETE_TITLE
        shown = Text() if empty else Text(self.answer_text + "\n\n")
        shown.append(f"{'No answer' if empty else 'Note'}: {note}", style="bold yellow")
        self.query_one("#answer", Static).update(shown)

    def _show_support(self, report: SupportReport) -> None:
        """The support check under the answer: how many sentences the passages state, and
        each one kept from the reader with why (a flagged one is marked in the text)."""
        removed = "".join(f" · removed: {s.text} ({s.reason})" for s in report.removed)
        self.query_one("#answer-scroll").border_subtitle = report.summary() + removed

    def _failed(self, message: str) -> None:
        self.stages.fail(message)
        self.query_one("#right").add_class("failed")
        self.query_one("#answer", Static).update(message)

    # -- evidence ----------------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#evidence")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one("#evidence", EvidenceTable)
        if self.result is None or event.cursor_row >= len(table.entries):
            return
        hit, grade = table.entries[event.cursor_row]
        self.query_one("#chunk", Static).update(chunk_view(hit, grade, self.result.context))
        self.query_one("#chunk-scroll").border_title = f"Chunk · rank {hit.rank}"

    @on(OptionList.OptionSelected, "#citations")
    def _citation_selected(self, event: OptionList.OptionSelected) -> None:
        if self.result is None or event.option.id is None:
            return
        item = self._context_item(int(event.option.id))
        table = self.query_one("#evidence", EvidenceTable)
        if item is not None and table.select_chunk(item.chunk_id):
            table.focus()

    def _context_item(self, n: int) -> ContextItem | None:
        assert self.result is not None
        return next((item for item in self.result.context if item.n == n), None)

    # -- actions -----------------------------------------------------------------------------

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_focus_question(self) -> None:
        self.query_one("#question").focus()

    def action_focus_evidence(self) -> None:
        self.query_one("#evidence").focus()

    def action_ingest(self) -> None:
        if not isinstance(self.screen, IngestScreen):
            self.push_screen(IngestScreen(db=self.db, engine=self.engine, settings=self.settings))

    def action_corpora(self) -> None:
        if not isinstance(self.screen, CorpusScreen):
            corpus = self.engine.corpus if self.engine is not None else None
            self.push_screen(CorpusScreen(db=self.db, open_corpus=corpus))

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
        if self.stages.running:
            raise RuntimeError("a question is running: apply once it has finished")
        old = self.engine
        if old is not None:
            self.engine = Engine(old.corpus, old.embedder, settings)
            for provider in old.fallbacks:
                provider.close()
        self.settings = settings

    def action_copy_answer(self) -> None:
        if self.answer_text:
            self.copy_to_clipboard(self.answer_text)
            self.notify("Answer copied to the clipboard.")

    def action_cancel(self) -> None:
        if self.stages.running:
            self.workers.cancel_group(self, "ask")
            self._run += 1
            self.stages.fail("cancelled")

    def action_new_conversation(self) -> None:
        """Forget the conversation: the next question is read on its own."""
        self.action_cancel()
        self.conversation = []
        self._reset_view("New conversation: ask a question.")
        self.stages.idle("New conversation.")

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"
