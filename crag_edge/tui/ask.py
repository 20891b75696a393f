"""`AskScreen`, the app's main screen: ask a question, watch each stage of the CRAG loop, read
the evidence and the answer.

The screen's state is a handful of reactive attributes (the result, the answer as streamed,
its refusal, failure and support report); each `watch_` method redraws the panels that show
one of them, so the worker that runs a question only sets attributes. The engine is the
app's: it is passed down as `engine`, and the screen never opens or closes one.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.reactive import var
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, OptionList
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from crag_edge.answer.checked import SupportReport
from crag_edge.answer.finished import Answer
from crag_edge.answer.refusal import Refusal
from crag_edge.cancellation import Cancellation, Cancelled
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.models.llm import Message
from crag_edge.progress import StageEvent
from crag_edge.result import CragResult
from crag_edge.tui.widgets import (
    AnswerPanel,
    DecisionPanel,
    EvidenceTable,
    Plain,
    QuestionInput,
    StageLine,
    chunk_view,
    citation_label,
)

ANSWER_REFRESH_S = 0.05  # the answer panel is redrawn at most this often while it streams
IDLE = "Type a question and press Enter."

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


def boxed(widget: Any, title: str) -> Any:
    """`widget` with its border's title, set where it is composed."""
    widget.border_title = title
    return widget


class AskScreen(Screen[None]):
    """The question box, the stage line, the evidence and chunk on the left, the decision,
    answer and citations on the right."""

    DEFAULT_CSS = """
    AskScreen #question { margin: 0 1; }
    AskScreen #stages { height: auto; max-height: 2; padding: 0 2; }
    AskScreen #body { height: 1fr; }
    AskScreen #left, AskScreen #right { width: 1fr; }
    AskScreen #evidence { height: 1fr; border: round $primary; }
    AskScreen #chunk-scroll { height: 1fr; border: round $secondary; padding: 0 1; }
    AskScreen #decision { height: auto; max-height: 14; border: round $accent; padding: 0 1; }
    AskScreen #answer-scroll { height: 1fr; min-height: 5; border: round $success;
                               padding: 0 1; }
    /* min-width: an auto-height option list given no width to wrap in raises (Textual). */
    AskScreen #citations { height: auto; max-height: 5; min-width: 8;
                           border: round $success-darken-2; }
    AskScreen #citations.-empty { display: none; }
    AskScreen #answer-scroll.insufficient { border: heavy $warning; }
    AskScreen #answer-scroll.insufficient #answer { color: $warning; text-style: bold; }
    AskScreen #answer-scroll.failed { border: heavy $error; }
    AskScreen #answer-scroll.incomplete { border: heavy $warning; }
    AskScreen.-short #question { border: none; height: 1; padding: 0 1; background: $boost; }
    AskScreen.-short #decision { max-height: 8; }
    AskScreen.-short #citations { max-height: 3; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+l", "focus_question", "Question"),
        Binding("ctrl+r", "focus_evidence", "Evidence"),
        Binding("ctrl+y", "copy_answer", "Copy answer"),
        Binding("ctrl+n", "new_conversation", "New chat"),
        Binding("escape", "cancel", "Cancel", show=False),
    ]

    AUTO_FOCUS = "#question"
    engine: var[Engine | None] = var(None, init=False)
    """The app's open engine; None until a corpus is open (a question waits for it)."""
    notice: var[str] = var(IDLE, init=False, always_update=True)
    """What the stage line says while no question runs (set by the app as the corpus opens)."""
    result: var[CragResult | None] = var(None, init=False)
    answer_text: var[str] = var("", init=False)
    refusal: var[Refusal | None] = var(None, init=False)
    """Why there is no whole answer, and what to do next (`answer.refusal`)."""
    failure: var[str | None] = var(None, init=False)
    support: var[SupportReport | None] = var(None, init=False)

    def __init__(
        self,
        engine: Engine | None = None,
        notice: str = IDLE,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """`engine` and `notice` as the app starts (shown as composed; the watchers show
        what changes later)."""
        super().__init__()
        self.set_reactive(AskScreen.engine, engine)
        self.set_reactive(AskScreen.notice, notice)
        self.clock = clock
        # The questions and answers so far: a follow-up is made standalone from them, until
        # ctrl+n (or another corpus) starts a new conversation.
        self.conversation: list[Message] = []
        self._pending: str | None = None
        self._run = 0
        # Questions whose thread is still inside the engine: a cancelled worker counts as
        # finished at once, but its thread runs on until its next stage or token, where
        # the question's cancellation stops it.
        self._asking: set[int] = set()
        self._cancel = Cancellation()

    def compose(self) -> ComposeResult:
        yield Header()
        yield QuestionInput(placeholder="Ask a question and press Enter…", id="question")
        yield StageLine(clock=self.clock, idle=self.notice, id="stages")
        with Horizontal(id="body"):
            with Vertical(id="left"):
                yield EvidenceTable(id="evidence").data_bind(AskScreen.result)
                with boxed(VerticalScroll(id="chunk-scroll"), "Chunk"):
                    yield Plain("Select a row to read its chunk.", id="chunk")
            with Vertical(id="right"):
                yield DecisionPanel(id="decision")
                yield AnswerPanel(id="answer-scroll").data_bind(
                    AskScreen.result,
                    AskScreen.answer_text,
                    AskScreen.refusal,
                    AskScreen.failure,
                    AskScreen.support,
                )
                citations = OptionList(id="citations", classes="-empty", markup=False)
                yield boxed(citations, "Citations")
        yield Footer()

    @property
    def stages(self) -> StageLine:
        return self.query_one(StageLine)

    @property
    def busy(self) -> bool:
        """A question runs, or its thread has yet to leave the engine."""
        return self.stages.running or bool(self._asking)

    def on_unmount(self) -> None:
        """The app is closing: a question still running stops at its next stage or token."""
        self._cancel.cancel()

    # -- watchers: each attribute redraws what shows it ---------------------------------------

    def watch_notice(self, notice: str) -> None:
        self.stages.idle(notice)

    def watch_engine(self, old: Engine | None, engine: Engine | None) -> None:
        """Another corpus starts a new conversation; a question asked before any corpus was
        open runs now."""
        if engine is None:
            return
        if old is not None and old.corpus is not engine.corpus:
            self.conversation = []  # the earlier turns do not apply
            self.reset_view("No question asked of this corpus yet.")
        self.notice = IDLE
        if self._pending is not None:
            question, self._pending = self._pending, None
            self.ask(question)

    def watch_result(self, result: CragResult | None) -> None:
        if result is not None:
            assert self.engine is not None, "a result comes from the open engine"
            self.query_one(DecisionPanel).show(result, self.engine.settings)

    def watch_failure(self, failure: str | None) -> None:
        if failure is not None:
            self.stages.fail(failure)

    def reset_view(self, decision: str) -> None:
        """Empty the result panels (a new question, or another corpus)."""
        self.result = self.refusal = self.failure = self.support = None
        self.answer_text = ""
        self.query_one(DecisionPanel).clear(decision)
        self.query_one("#chunk", Plain).update("")
        self._show_citations([])

    def _show_citations(self, options: list[Option]) -> None:
        citations = self.query_one("#citations", OptionList)
        citations.clear_options()
        citations.add_options(options)
        citations.set_class(not options, "-empty")

    # -- asking -------------------------------------------------------------------------------

    @on(QuestionInput.Asked)
    def _asked(self, event: QuestionInput.Asked) -> None:
        self.ask(event.question)

    def ask(self, question: str) -> None:
        """Start the pipeline for `question` in a worker (a running one is cancelled)."""
        self._run += 1
        self.stages.reset()
        self.reset_view(f"Working on: {question}")
        if self.engine is None:
            self._pending = question
            self.notice = f"Queued until the corpus is open: {question}"
            return
        self._cancel.cancel()  # the question before, if it still runs
        self._cancel = Cancellation()
        self.run_question(self.engine, question, self._run, self._cancel)

    @work(thread=True, exclusive=True, group="ask", exit_on_error=False)
    def run_question(self, engine: Engine, question: str, run: int, cancel: Cancellation) -> None:
        worker = get_current_worker()

        def ui(name: str, value: Any) -> None:
            if not worker.is_cancelled:
                self.app.call_from_thread(self._guarded, run, name, value)

        def on_stage(event: StageEvent) -> None:
            name = STAGE_NAMES.get(event.stage, event.stage)
            if name is not None and not worker.is_cancelled:
                self.app.call_from_thread(self._stage, run, event, name)

        history = list(self.conversation)
        self._asking.add(run)
        try:
            result, stream = engine.answer(
                question,
                history=history,
                progress=on_stage,
                view=CorpusView.everything(),
                cancel=cancel,
            )
            if worker.is_cancelled:
                return
            ui("result", result)
            text = ""
            for piece in batched(stream):
                if worker.is_cancelled:
                    return
                text += piece
                ui("answer_text", text)
            finished = stream.answer
            self.app.call_from_thread(self._finish_answer, run, finished)
            refused, support = finished.refusal, finished.support
            stopped = refused is not None and refused.kind == "stopped"
            if not stopped and support.sentences:
                ui("support", support)
        except Cancelled:
            return  # Esc, another question or another corpus: the stage line says so
        except Exception as exc:
            ui("failure", f"{type(exc).__name__}: {exc}")
        finally:
            self._asking.discard(run)

    def _guarded(self, run: int, name: str, value: Any) -> None:
        """Set an attribute from a worker only if it belongs to the latest question."""
        if run == self._run:
            setattr(self, name, value)

    def _stage(self, run: int, event: StageEvent, name: str) -> None:
        if run != self._run:
            return
        if event.status == "start":
            self.stages.start(name)
        elif event.status == "end":
            self.stages.finish(name, event.detail or None)
        else:
            self.stages.done(name, event.detail)

    def _finish_answer(self, run: int, answer: Answer) -> None:
        """Citations under the answer, each by the rows, slides or pages of it its sentences
        were found in, and the refusal (why there is no whole answer, what to do next). An
        answer joins the conversation under its standalone question."""
        if run != self._run:
            return
        if self.answer_text.strip():
            self.conversation += [
                {"role": "user", "content": answer.result.question},
                {"role": "assistant", "content": self.answer_text},
            ]
        options = [
            Option(citation_label(c.item, [p.locator for p in c.places]), id=str(c.item.n))
            for c in answer.citations
        ]
        self._show_citations(options)
        self.refusal = refused = answer.refusal
        if refused is not None and refused.kind == "stopped":
            self.stages.stopped("answer", refused.reason)  # as the answer panel says

    # -- evidence ----------------------------------------------------------------------------

    @on(DataTable.RowHighlighted, "#evidence")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = self.query_one(EvidenceTable)
        if self.result is None or event.cursor_row >= len(table.entries):
            return
        hit, grade = table.entries[event.cursor_row]
        self.query_one("#chunk", Plain).update(chunk_view(hit, grade, self.result.context))
        title = f"Chunk · #{event.cursor_row + 1} · rank {hit.rank} in its search"
        self.query_one("#chunk-scroll").border_title = title

    @on(OptionList.OptionSelected, "#citations")
    def _citation_selected(self, event: OptionList.OptionSelected) -> None:
        if self.result is None or event.option.id is None:
            return
        n = int(event.option.id)
        item = next((item for item in self.result.context if item.n == n), None)
        table = self.query_one(EvidenceTable)
        if item is not None and table.select_chunk(item.chunk_id):
            table.focus()

    # -- actions -----------------------------------------------------------------------------

    def action_focus_question(self) -> None:
        self.query_one(QuestionInput).focus()

    def action_focus_evidence(self) -> None:
        self.query_one(EvidenceTable).focus()

    def action_copy_answer(self) -> None:
        if self.answer_text:
            self.app.copy_to_clipboard(self.answer_text)
            self.notify("Answer copied to the clipboard.")

    def action_cancel(self) -> None:
        if self.stages.running:
            self._cancel.cancel()
            self.workers.cancel_group(self, "ask")
            self._run += 1
            self.stages.fail("cancelled")

    def action_new_conversation(self) -> None:
        """Forget the conversation: the next question is read on its own."""
        self.action_cancel()
        self.conversation = []
        self.reset_view("New conversation: ask a question.")
        self.notice = "New conversation."
