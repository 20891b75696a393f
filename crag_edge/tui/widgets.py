"""The panels of the ask screen: stage line, decision, evidence table, chunk view, answer."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.segment import Segment
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.containers import VerticalScroll
from textual.filter import LineFilter
from textual.message import Message
from textual.reactive import var
from textual.widgets import DataTable, Input, Static

from crag_edge.answer.checked import SupportReport
from crag_edge.answer.refusal import Refusal
from crag_edge.answer.views import describe_corrections
from crag_edge.citations import locator, place_label
from crag_edge.config import TIERS, Settings
from crag_edge.grading import ItemGrade
from crag_edge.result import ContextItem, CragResult
from crag_edge.text_boundary import QuestionError, asked_question, has_no_controls, without_controls
from crag_edge.types import Hit

DECISION_STYLE = {
    "CORRECT": "bold black on green",
    "AMBIGUOUS": "bold black on yellow",
    "INCORRECT": "bold white on red",
}
INSUFFICIENT_TITLE = "Answer — insufficient evidence"
INCOMPLETE_TITLE = "Answer — incomplete"
EMPTY_TITLE = "No answer"
# The title of each refusal (`answer.refusal`) that is not a stop.
REFUSAL_TITLES = {
    "nothing_found": "No answer — nothing found",
    "not_stated": "No answer — not stated",
}
# The stage line's height: a corrective loop's later rounds push its first stages off it.
STAGE_LINES = 2
ARROW = " → "
MORE = "… "
TIER_LABELS = {"signals": "signals", "cross_encoder": "x-enc", "llm": "llm"}
_STRIP_SPLIT = re.compile(r"(?<=[.!?])\s+|\n+")


class Plain(Static):
    """A Static that shows a string as written, never as markup. What the TUI shows comes
    from documents, file names, typed paths, the model and error messages: read as markup,
    `[@click=app.quit]` in any of them would run an action when clicked, and a stray `[/]`
    would raise and end the app. Styled text is passed as a `Text`."""

    def __init__(self, content: RenderableType = "", **kwargs: str) -> None:
        super().__init__(content, markup=False, **kwargs)  # type: ignore[arg-type]


class BoundText(Plain):
    """Text that shows one of its screen's attributes, bound as `shown` with `data_bind`:
    the screen says a thing (a status, the corpus stats) by setting its attribute."""

    shown: var[RenderableType] = var[RenderableType]("")

    def watch_shown(self, shown: RenderableType) -> None:
        self.update(shown)


class NoControlCodes(LineFilter):
    """Drops C0 and C1 control characters (ESC, NUL, DEL, 8-bit CSI, ...) from every line the
    app draws. Textual writes text to the terminal as it is, and documents, file names and
    model output may carry escape sequences: set the clipboard (OSC 52), retitle the window,
    clear the screen. They take no cells, so the layout is the same without them."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if all(has_no_controls(segment.text) for segment in segments):
            return segments
        return [
            Segment(without_controls(text), style, control) for text, style, control in segments
        ]


class QuestionInput(Input):
    """The question box, with a history on up/down. Enter posts `Asked` with the question
    as checked at the boundary, and the question stays in the box, selected: there to read
    and edit, replaced by whatever is typed next. Text with nothing to search for is refused
    where it was typed."""

    class Asked(Message):
        def __init__(self, question: str) -> None:
            super().__init__()
            self.question = question

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "Previous", show=False),
        Binding("down", "history(1)", "Next", show=False),
    ]

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.history: list[str] = []
        self._position = 0

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if not event.value.strip():
            return
        try:
            question = asked_question(event.value)
        except QuestionError as exc:  # "???": nothing to search for
            self.notify(f"{exc}; ask in words.", severity="warning")
            return
        if not self.history or self.history[-1] != question:
            self.history.append(question)
        self._position = len(self.history)
        self.select_all()  # the question stays to read and edit; typing replaces it
        self.post_message(self.Asked(question))

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        self._position = max(0, min(len(self.history), self._position + step))
        self.value = self.history[self._position] if self._position < len(self.history) else ""
        self.cursor_position = len(self.value)


@dataclass
class Stage:
    name: str
    started: float
    detail: str = ""
    ms: float | None = None
    failed: bool = False


class StageLine(Plain):
    """retrieve → grade → decision → actions → answer, each with its time as it happens."""

    def __init__(
        self, clock: Callable[[], float] = time.perf_counter, idle: str = "", **kwargs: str
    ) -> None:
        super().__init__("", **kwargs)
        self.clock = clock
        self.stages: list[Stage] = []
        self.idle_text = idle

    def on_mount(self) -> None:
        self.set_interval(0.2, self._tick)
        self._render_stages()

    def reset(self) -> None:
        self.stages = []
        self._render_stages()

    def idle(self, message: str) -> None:
        self.idle_text = message
        self.stages = []
        self._render_stages()

    def start(self, name: str, detail: str = "") -> None:
        self.stages.append(Stage(name, self.clock(), detail))
        self._render_stages()

    def finish(self, name: str, detail: str | None = None, ms: float | None = None) -> None:
        for stage in reversed(self.stages):
            if stage.name == name and stage.ms is None:
                stage.ms = ms if ms is not None else (self.clock() - stage.started) * 1000
                if detail is not None:
                    stage.detail = detail
                break
        self._render_stages()

    def done(self, name: str, detail: str) -> None:
        """A stage that has no duration of its own (the decision); inside a running stage of
        the same name (refine reporting its strips) it becomes that stage's detail."""
        running = [stage for stage in self.stages if stage.name == name and stage.ms is None]
        if running:
            running[-1].detail = detail
        else:
            self.stages.append(Stage(name, self.clock(), detail, ms=0.0))
        self._render_stages()

    def fail(self, message: str) -> None:
        for stage in self.stages:
            if stage.ms is None:
                stage.failed = True
                stage.ms = (self.clock() - stage.started) * 1000
        self.stages.append(Stage("error", self.clock(), message, ms=0.0, failed=True))
        self._render_stages()

    def stopped(self, name: str, reason: str) -> None:
        """The stage `name` ended without its work done (an answer stopped): a cross and
        the reason in place of its time, as the panel that shows its result says."""
        for stage in reversed(self.stages):
            if stage.name == name:
                stage.failed, stage.detail = True, reason
                break
        self._render_stages()

    @property
    def running(self) -> bool:
        return any(stage.ms is None for stage in self.stages)

    def _tick(self) -> None:
        if self.running:
            self._render_stages()

    def on_resize(self) -> None:
        self._render_stages()

    def _render_stages(self) -> None:
        if not self.stages:
            self.update(Text(self.idle_text, style="dim"))
            return
        pieces = [self._piece(stage) for stage in self.stages]
        self.update(fitted(pieces, self.content_size.width, STAGE_LINES))

    def _piece(self, stage: Stage) -> Text:
        """One stage: its mark, name, detail and time."""
        piece = Text()
        if stage.failed:
            piece.append(f"✗ {stage.name}", style="bold red")
        elif stage.ms is None:
            elapsed = self.clock() - stage.started
            piece.append(f"⋯ {stage.name}… {elapsed:.1f}s", style="bold yellow")
        else:
            piece.append(f"✓ {stage.name}", style="green")
        if stage.detail:
            style = "red" if stage.failed else DECISION_STYLE.get(stage.detail.split(" ")[0], "")
            piece.append(" ")
            piece.append(stage.detail, style=style)
        if stage.ms is not None and stage.ms > 0 and not stage.failed:
            piece.append(f" {stage_time(stage.ms)}", style="dim")
        return piece


def stage_time(ms: float) -> str:
    """A finished stage's time as a person reads it: milliseconds while under a second,
    seconds beyond (as a running stage counts them), never `84633ms`."""
    return f"{ms:.0f}ms" if ms < 999.5 else f"{ms / 1000:.1f}s"


def fitted(pieces: Sequence[Text], width: int, lines: int) -> Text:
    """The newest pieces that fit `lines` lines of `width` cells, joined by arrows, each line
    broken between pieces, never inside one; the older ones left out behind "… ", a piece
    wider than a line cut short with "…". Without a width yet (not laid out), all of them."""
    if width <= 0:
        return Text(" → ").join(pieces)
    room = width - len(MORE)  # every line opens with "… " or a continuing "→ "
    rows: list[list[Text]] = [[]]
    used = 0
    for piece in reversed(pieces):
        if piece.cell_len > room:
            piece = piece.copy()
            piece.truncate(room, overflow="ellipsis")
        need = piece.cell_len + (len(ARROW) if rows[-1] else 0)
        if rows[-1] and used + need > room:
            if len(rows) == lines:
                break
            rows.append([])
            used, need = 0, piece.cell_len
        rows[-1].insert(0, piece)
        used += need
    shown = sum(len(row) for row in rows)
    text = Text(MORE if shown < len(pieces) else "", style="dim")
    for i, row in enumerate(reversed(rows)):
        if i:
            text.append("\n" + ARROW.lstrip(), style="dim")
        text.append_text(Text(ARROW, style="dim").join(row))
    return text


class DecisionPanel(Plain):
    """The verdict: decision word, score, rule, thresholds, corrections, iterations, fallback."""

    BORDER_TITLE = "Decision"

    def __init__(self, **kwargs: str) -> None:
        super().__init__(Text("No question asked yet.", style="dim"), **kwargs)
        self.decision: str | None = None

    def clear(self, message: str = "…") -> None:
        self.decision = None
        self.update(Text(message, style="dim"))

    def show(self, result: CragResult, settings: Settings) -> None:
        self.decision = str(result.decision)
        head = Text()
        head.append(f" {result.decision} ", style=DECISION_STYLE.get(str(result.decision), "bold"))
        head.append(f"  score {result.score:.2f}", style="bold")
        head.append(f"  action {result.action}", style="dim")
        lines: list[RenderableType] = [head]

        def row(label: str, value: str, style: str = "") -> None:
            line = Text()
            line.append(f"{label:<12}", style="bold dim")
            line.append(value, style=style)
            lines.append(line)

        row("rule", result.rule or "none fired (graded)")
        grading = settings.grading
        row(
            "thresholds",
            f"correct ≥ {grading.correct_threshold:.2f} · incorrect < "
            f"{grading.incorrect_threshold:.2f} · discard < {grading.discard_below:.2f}",
        )
        iterations = f"{result.iterations} of max {settings.correction.max_iterations}"
        if result.max_iterations_reached:
            iterations += " (limit reached)"
        row("iterations", iterations)
        for r in result.rounds:
            row(
                f"  round {r.iteration}",
                f"{r.strategy}: {r.query!r} → {r.decision} {r.score:.2f} (kept {r.kept}/{r.hits})",
                "dim",
            )
        row("corrections", describe_corrections(result) or "none")
        row("fallback", describe_fallback(result))
        if result.tiers:
            row("tiers", ", ".join(f"{k}: {v}" for k, v in result.tiers.items()), "dim")
        if result.reason:
            row("reason", result.reason, "italic")
        for warning in result.warnings:
            row("warning", warning, "yellow")
        self.update(Group(*lines))


def describe_fallback(result: CragResult) -> str:
    fb = result.fallback
    used = fb.get("used") or []
    if not used and not fb.get("reason"):
        return "not needed"
    text = f"used {', '.join(map(str, used))}" if used else "none available"
    if fb.get("reason"):
        text += f" — {fb['reason']}"
    if fb.get("failures"):
        text += f" · failures: {fb['failures']}"
    return text


class AnswerPanel(VerticalScroll):
    """The answer as it streams; after it, what to do next when there is no whole answer
    (the passages to read, or the note on why it is empty or cut off), or the failure in its
    place. Its title and classes (`insufficient`, `incomplete`, `failed`) say which, its
    subtitle what the support check found. The attributes are the ask screen's, bound with
    `data_bind`."""

    BORDER_TITLE = "Answer"
    result: var[CragResult | None] = var(None)
    answer_text: var[str] = var("")
    refusal: var[Refusal | None] = var(None)
    failure: var[str | None] = var(None)
    support: var[SupportReport | None] = var(None)

    def compose(self) -> ComposeResult:
        yield Plain("", id="answer")

    def _show_state(self) -> None:
        """The classes and title: what became of the answer. The bound attributes may arrive
        in any order, so each of them redraws all of it."""
        result, refused = self.result, self.refusal
        stopped = refused is not None and refused.kind == "stopped"
        insufficient = (refused is not None and not stopped) or (
            result is not None and (result.insufficient_evidence or not result.context)
        )
        self.set_class(insufficient, "insufficient")
        self.set_class(stopped, "incomplete")
        self.set_class(self.failure is not None, "failed")
        if refused is not None and stopped:
            title = INCOMPLETE_TITLE if self.answer_text.strip() else EMPTY_TITLE
        elif refused is not None:
            title = REFUSAL_TITLES[refused.kind]
        else:
            title = INSUFFICIENT_TITLE if insufficient else self.BORDER_TITLE
        if title != self.border_title:  # setting a title redraws the whole panel
            self.border_title = title
        self._show_text()

    watch_result = watch_refusal = watch_failure = _show_state

    def watch_answer_text(self) -> None:
        self._show_state()
        self.scroll_end(animate=False)

    def _show_text(self) -> None:
        """The answer as streamed and what to do next after it, or the failure in its place."""
        refused, empty = self.refusal, not self.answer_text.strip()
        shown: RenderableType = self.answer_text
        if self.failure is not None:
            shown = self.failure
        elif refused is not None and refused.kind == "stopped":
            shown = Text() if empty else Text(self.answer_text + "\n\n")
            shown.append(f"{'No answer' if empty else 'Note'}: {refused.note}", style="bold yellow")
        elif refused is not None:
            shown = Text(self.answer_text + "\n\n")
            step, *passages = refused.lines()
            shown.append(step, style="bold")
            for line in passages:
                shown.append("\n" + line, style="cyan")
        self.query_one(Plain).update(shown)

    def watch_support(self, report: SupportReport | None) -> None:
        """How many sentences the passages state, and each one kept from the reader with
        why (a flagged one is marked in the text)."""
        summary = ""
        if report is not None:
            removed = "".join(f" · removed: {s.text} ({s.reason})" for s in report.removed)
            summary = report.summary() + removed
        self.border_subtitle = summary


class EvidenceTable(DataTable[Text | str]):
    """Every graded hit of every round: rank, source, score per tier, kept or dropped and why.
    `result` is the ask screen's, bound with `data_bind`."""

    BORDER_TITLE = "Evidence"
    result: var[CragResult | None] = var(None)

    def __init__(self, **kwargs: str) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kwargs)  # type: ignore[arg-type]
        self.entries: list[tuple[Hit, ItemGrade]] = []

    def watch_result(self, result: CragResult | None) -> None:
        if result is None:
            self.clear(columns=True)
            self.border_title = self.BORDER_TITLE
            return
        self.load(result)
        self.border_title = (
            f"{self.BORDER_TITLE} · {len(result.hits)} hits · {len(result.context)} in context"
        )

    def load(self, result: CragResult) -> None:
        self.clear(columns=True)
        self.entries = list(result.hits)
        present = {t for _, grade in self.entries for t in grade.tiers}
        tiers = [t for t in TIERS if t in present] + sorted(present - set(TIERS))
        self.add_column("#", key="rank")
        self.add_column("source", key="source")
        self.add_column("fused", key="fused")
        for tier in tiers:
            self.add_column(TIER_LABELS.get(tier, tier), key=f"tier:{tier}")
        self.add_column("grade", key="grade")
        self.add_column("kept", key="kept")
        self.add_column("why", key="why")
        for i, (hit, grade) in enumerate(self.entries):
            kept = Text("kept", style="bold green") if grade.kept else Text("dropped", style="red")
            cells: list[Text | str] = [
                str(i + 1),  # the row's own number: ranks restart in every round
                Text(clipped(locator(hit.chunk), 36)),  # a str cell would be read as markup
                f"{hit.score:.3f}",
                *[_score(grade.tiers.get(t)) for t in tiers],
                _score(grade.score),
                kept,
                Text(grade.reason or grade.decided_by),
            ]
            self.add_row(*cells, key=str(i))

    def select_chunk(self, chunk_id: int) -> bool:
        """Move the cursor to the (first kept) row of this chunk; False if absent."""
        rows = [i for i, (hit, _) in enumerate(self.entries) if hit.chunk.chunk_id == chunk_id]
        if not rows:
            return False
        kept = [i for i in rows if self.entries[i][1].kept]
        self.move_cursor(row=(kept or rows)[0])
        return True


def _score(value: float | None) -> Text:
    if value is None:
        return Text("—", style="dim")
    style = "green" if value >= 0.7 else "yellow" if value >= 0.3 else "red"
    return Text(f"{value:.2f}", style=style)


def clipped(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def chunk_view(hit: Hit, grade: ItemGrade, context: Sequence[ContextItem]) -> Text:
    """The chunk's text with the strips that made it into the final context highlighted."""
    chunk = hit.chunk
    text = Text()
    text.append(f"{chunk.source}", style="bold")
    if place := place_label(chunk, whole_path=True):
        text.append(f"  {place}", style="bold cyan")
    text.append(f"  chars {chunk.start}-{chunk.end}  rank {hit.rank}  ", style="dim")
    text.append("kept" if grade.kept else "dropped", style="green" if grade.kept else "red")
    if grade.reason:
        text.append(f" ({grade.reason})", style="dim")
    text.append("\n")
    if grade.signals:
        signals = " ".join(
            f"{k}={v:.2f}" for k, v in grade.signals.items() if isinstance(v, int | float)
        )
        text.append(f"signals: {signals}\n", style="dim italic")
    body = Text(chunk.text)
    for item in context:
        if item.chunk_id != chunk.chunk_id:
            continue
        pieces = [item.text] if item.text in chunk.text else _STRIP_SPLIT.split(item.text)
        for piece in pieces:
            piece = piece.strip()
            if len(piece) >= 12:
                body.highlight_regex(re.escape(piece), style="bold on dark_green")
    text.append_text(body)
    return text


def citation_label(item: ContextItem, places: Sequence[str] = ()) -> str:
    """A cited passage as the citation list shows it: by the rows, slides or pages of it
    the answer's sentences were found in (`places`), else by its own place."""
    where = "; ".join(dict.fromkeys(places)) or locator(item)
    return f"[{item.n}] {clipped(where, 56)}  chars {item.start}-{item.end}"
