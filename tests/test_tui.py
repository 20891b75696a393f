"""The terminal UI driven by Textual's Pilot: the real app on a real small corpus and the
small models (signals tier only, for speed), plus snapshots of the main screens from a
canned engine (model output and timings are not deterministic)."""

from __future__ import annotations

import asyncio
import html
import math
import sqlite3
import time
from collections.abc import Awaitable, Callable, Generator, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import apsw
import numpy as np
import pytest
from rich.text import Text

pytest.importorskip("textual")

from textual import events
from textual.pilot import Pilot
from textual.widgets import Checkbox, DirectoryTree, Input, Log, OptionList, ProgressBar, Static

from crag_edge.answer.generation import INSUFFICIENT
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading import ItemGrade
from crag_edge.groups import CorpusView
from crag_edge.ingest.pipeline import ProgressEvent
from crag_edge.loop.state import Request
from crag_edge.models.chat_model import NextTokenLogprobs
from crag_edge.models.llm import FinishReason, TextStream
from crag_edge.progress import StageEvent, StageListener
from crag_edge.result import ContextItem, Correction, CragResult, Round
from crag_edge.store import Corpus
from crag_edge.store.records import ChunkRecord, CorpusStats, DocumentRecord
from crag_edge.tui import CragApp
from crag_edge.tui.corpora import CorpusScreen
from crag_edge.tui.ingest import IngestScreen
from crag_edge.tui.screens import HelpScreen
from crag_edge.tui.widgets import DecisionPanel, EvidenceTable, StageLine, fitted, stage_time
from crag_edge.types import Action, Chunk, Decision, Hit

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SAMPLE = Path(__file__).resolve().parent.parent / "sample_corpus"
QUESTION = "How does reciprocal rank fusion combine rankings?"
DECISIONS = ("CORRECT", "AMBIGUOUS", "INCORRECT")


def tui_settings() -> Settings:
    return Settings.load(grading_tiers=["signals"], llm_max_tokens=24)


def run(
    app: CragApp,
    body: Callable[[Pilot[None]], Awaitable[None]],
    size: tuple[int, int],
    notifications: bool = False,
) -> None:
    async def main() -> None:
        async with app.run_test(size=size, notifications=notifications) as pilot:
            await body(pilot)

    asyncio.run(main())


async def wait_for(pilot: Pilot[None], check: Callable[[], bool], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out waiting for the UI"
        await pilot.pause(0.1)


def busy(app: CragApp) -> bool:
    return any(worker.is_running for worker in app.workers)


async def type_key(box: Input, key: str) -> None:
    """Post one key and wait until the focused box shows it. (Pilot's own `press` waits for
    the whole process to go CPU-idle, so it would wait for the pipeline too.)"""
    before = box.value
    box.app.post_message(events.Key(key, key))
    while box.value == before:
        await asyncio.sleep(0.002)


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    db = tmp_path_factory.mktemp("tui") / "corpus.db"
    with Engine.open(db, tui_settings(), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
    return db


@pytest.fixture
def engine(corpus_db: Path, embedder: Any) -> Iterator[Engine]:
    with Engine.open(corpus_db, tui_settings(), embedder=embedder) as opened:
        yield opened


@pytest.mark.models
@pytest.mark.slow
def test_ask_shows_stages_decision_evidence_and_answer(engine: Engine) -> None:
    app = CragApp(engine=engine)

    async def body(pilot: Pilot[None]) -> None:
        box = app.query_one("#question", Input)
        assert app.focused is box  # launched: the question box has focus
        await pilot.press(*QUESTION)
        # Enter as a posted event: `pilot.press` would wait for the app to go idle, and a
        # fast pipeline could be over before the first key below.
        app.post_message(events.Key("enter", "\r"))
        taken = time.monotonic() + 60
        while not busy(app):  # the question was taken: its worker runs
            assert time.monotonic() < taken, "the question was not taken"
            await asyncio.sleep(0.002)
        stages = app.query_one("#stages", StageLine)
        # Input stays responsive while the pipeline runs in its worker: keys typed during
        # the run show up during the run. (A pipeline on the UI thread would hold every key
        # until it ended, and the loop would stop after one.)
        typed = 0
        while busy(app):
            await type_key(box, "a")
            typed += 1
            await asyncio.sleep(0.05)
        assert box.value == "a" * typed and typed >= 2, typed
        await app.workers.wait_for_complete()
        await pilot.pause()

        names = [stage.name for stage in stages.stages]
        assert names[0] == "retrieve" and names[-1] == "answer"
        assert "signals" in names and names.index("signals") < names.index("decision")
        # Every stage ended; only an answer stopped (cut at 24 tokens) is crossed, as its
        # panel says.
        refused = app.main_screen.refusal
        stopped = refused is not None and refused.kind == "stopped"
        for stage in stages.stages:
            assert stage.ms is not None
            assert stage.failed == (stage.name == "answer" and stopped), stage
        assert app.main_screen.result is not None
        decision = app.query_one("#decision", DecisionPanel)
        assert decision.decision in DECISIONS
        screen_text = app.export_screenshot()
        assert str(app.main_screen.result.decision) in screen_text
        table = app.query_one("#evidence", EvidenceTable)
        assert table.row_count == len(app.main_screen.result.hits) > 0
        assert app.main_screen.answer_text.strip()
        # The first row is highlighted: its chunk is shown; moving down shows the next.
        await pilot.press("ctrl+r", "down")
        hit, _ = table.entries[1]
        shown = str(app.query_one("#chunk", Static).render())
        assert hit.chunk.text[:40] in shown.replace("\n", " ") or hit.chunk.source in shown

    run(app, body, (120, 40))


@pytest.mark.models
@pytest.mark.parametrize(
    ("overrides", "title", "note"),
    [
        # Any elapsed time is a stall at this limit: stopped before the first token.
        (
            {"llm_stall_timeout_s": 1e-9},
            "No answer",
            "No answer: the model made no progress for 1e-09 s",
        ),
        ({"llm_max_tokens": 2}, "Answer — incomplete", "Note: the answer was cut at 2 tokens"),
    ],
    ids=["stalled", "cut-off"],
)
def test_empty_or_cut_off_answer_shows_a_note(
    corpus_db: Path, embedder: Any, overrides: dict[str, Any], title: str, note: str
) -> None:
    settings = tui_settings().replace(**overrides)
    with Engine.open(corpus_db, settings, embedder=embedder) as engine:
        app = CragApp(engine=engine)

        async def body(pilot: Pilot[None]) -> None:
            await pilot.press(*QUESTION, "enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            result = app.main_screen.result
            assert result is not None and result.context  # the model was asked
            assert app.query_one("#answer-scroll").has_class("incomplete")
            assert app.query_one("#answer-scroll").border_title == title
            shown = html.unescape(app.export_screenshot()).replace("\xa0", " ")
            assert title in shown and note in shown

        run(app, body, (120, 40))


@pytest.mark.models
def test_help_screen_and_quit(engine: Engine) -> None:
    app = CragApp(engine=engine)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("ctrl+r", "question_mark")  # "?" outside the question box
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape", "ctrl+l", *"why?")
        assert app.query_one("#question", Input).value == "why?"  # "?" types in the box
        await pilot.press("ctrl+u", *"???", "enter")  # nothing to search for: said, not asked
        await pilot.pause()
        notes = [n.message for n in app._notifications]
        assert any("the question has no words" in note for note in notes), notes
        assert app.main_screen.result is None
        await pilot.press("ctrl+q")
        await pilot.pause()
        assert not app.is_running

    run(app, body, (80, 24))


@pytest.mark.models
@pytest.mark.slow
def test_ingest_with_progress_then_ask(tmp_path: Path, embedder: Any) -> None:
    with Engine.open(tmp_path / "new.db", tui_settings(), create=True, embedder=embedder) as eng:
        app = CragApp(engine=eng)

        async def body(pilot: Pilot[None]) -> None:
            await pilot.press("ctrl+o")
            screen = app.screen
            assert isinstance(screen, IngestScreen)
            await pilot.press(*str(SAMPLE), "enter")
            await wait_for(pilot, lambda: screen.report is not None, timeout=300)
            assert screen.report is not None and screen.report.added == 6
            bar = screen.query_one("#progress", ProgressBar)
            assert bar.total == 6 and bar.progress == 6
            log = screen.query_one("#ingest-log", Log)
            assert sum("added" in line for line in log.lines) == 6
            assert "documents 6" in str(screen.query_one("#stats", Static).render())
            await pilot.press("escape")
            assert not isinstance(app.screen, IngestScreen)
            assert "6 documents" in app.sub_title

        run(app, body, (100, 30))


@pytest.mark.models
@pytest.mark.slow
def test_ingest_cancel_leaves_a_sound_corpus(tmp_path: Path, embedder: Any) -> None:
    db = tmp_path / "cancel.db"
    # Enough distinct documents that embedding them takes seconds: the cancel must land
    # while the ingest runs, not after six small files are already done.
    docs = tmp_path / "docs"
    docs.mkdir()
    base = (SAMPLE / "honeybees.txt").read_text(encoding="utf-8")
    for i in range(200):  # two embedding groups (256 chunks each): the cancel lands between
        (docs / f"doc{i:03d}.txt").write_text(f"Document {i}.\n\n{base}", encoding="utf-8")
    with Engine.open(db, tui_settings(), create=True, embedder=embedder) as eng:
        app = CragApp(engine=eng)

        async def body(pilot: Pilot[None]) -> None:
            await pilot.press("ctrl+o")
            screen = app.screen
            assert isinstance(screen, IngestScreen)
            await pilot.press(*str(docs), "enter", "ctrl+g")
            await app.workers.wait_for_complete()
            # A cancelled worker counts as complete at once, while its thread may still be
            # delivering a progress line: wait for the screen's own end of the run.
            for _ in range(600):
                if not screen.running:
                    break
                await pilot.pause(0.1)
            status = str(screen.query_one("#ingest-status", Static).render())
            assert "Cancelled" in status, status
            assert not screen.running
            await pilot.press("escape")
            assert not isinstance(app.screen, IngestScreen)

        run(app, body, (100, 30))
        # Every document written is whole: ingesting again completes the corpus.
        report = eng.ingest([docs])
        assert report.added + report.updated + report.unchanged == 200 and not report.errors
        assert report.added > 0, "the cancel landed after the whole ingest"
        assert eng.corpus.stats(view=EVERYTHING).documents == 200


# -- snapshots (canned engine: deterministic text, no timings) ------------------------------


class CannedCorpus:
    path = Path("demo.db")
    location = "demo.db"

    def search_terms(self, terms: Any, limit: int, **_: Any) -> list[tuple[int, float]]:
        return []  # no word is anywhere else: the support check's name test reads the context

    def stats(self, *, view: CorpusView) -> CorpusStats:
        return CorpusStats(
            Path("demo.db"), 6, 13, 1_200_000, "all-minilm-l6-v2", 384, 1, 0.0, None, 200, 40
        )


def canned_result(question: str) -> CragResult:
    texts = [
        (
            "reciprocal-rank-fusion.md",
            "Reciprocal rank fusion (RRF) ignores the raw scores and "
            "uses only ranks: every document receives the sum of 1 / (k + rank).",
        ),
        ("corrective-rag.md", "Corrective RAG grades retrieved evidence before generation."),
        ("honeybees.txt", "Honeybees communicate the direction of food with a waggle dance."),
    ]
    hits, grades = [], []
    for i, (source, text) in enumerate(texts, 1):
        chunk = Chunk(i, i, 0, text, 0, len(text), f"sample_corpus/{source}", source)
        hits.append(Hit(chunk, i, 1 / (60 + i)))
        score = [0.91, 0.55, 0.04][i - 1]
        grades.append(
            ItemGrade(
                i,
                i,
                score,
                "signals",
                {"signals": score},
                {"similarity": score},
                score >= 0.3,
                f"signals score {score:.2f}",
            )
        )
    context = [
        ContextItem(1, 1, 1, hits[0].chunk.source, "RRF", 0, 60, texts[0][1][:60], "search", 0.91)
    ]
    return CragResult(
        question,
        Decision.CORRECT,
        Action.GENERATE,
        0.82,
        "rank_weighted score 0.82 >= 0.7",
        context,
        list(zip(hits, grades, strict=True)),
        corrections=[
            Correction("discard", {"chunk_ids": [3]}),
            Correction("refine", {"strips_kept": 1, "strips_total": 3}),
        ],
        rounds=[Round(1, question, "hybrid", Decision.CORRECT, 0.82, 3, 2)],
        fallback={"used": [], "reason": None, "failures": []},
        tiers={"signals": "ok"},
    )


CANNED_STAGES = [
    StageEvent("embed", "start"),
    StageEvent("embed", "end", ms=3.0),
    StageEvent("retrieve", "start"),
    StageEvent("retrieve", "end", ms=9.0),
    StageEvent("grade", "start"),
    StageEvent("grade:signals", "start", "3 items"),
    StageEvent("grade:signals", "end", "3 items", 2.0),
    StageEvent("grade", "end", ms=2.5),
    StageEvent("decision", "event", "CORRECT 0.82"),
    StageEvent("discard", "event", "iteration=1"),
    StageEvent("refine", "start"),
    StageEvent("refine", "end", ms=1.0),
]


class CannedLlm:
    """A model that streams `pieces`, then stops with `finish` (or, given one, raises
    `error`)."""

    def __init__(
        self, pieces: list[str], finish: FinishReason = "stop", error: Exception | None = None
    ) -> None:
        self.pieces, self.finish, self.error = pieces, finish, error

    continues = False  # answered whole: the support check reads it at the end

    def answer_logprobs(self, prompts: Any, answers: Any, **_: Any) -> NextTokenLogprobs:
        """The support check's question, answered yes: these tests are about the app, and
        every canned sentence is stated by the canned evidence."""
        return NextTokenLogprobs([[0.0, -math.inf] for _ in prompts], False, 0, 0.0)

    def stream_chat(self, messages: Any, **kwargs: Any) -> TextStream[FinishReason]:
        def stream() -> Generator[str, None, FinishReason]:
            yield from self.pieces
            if self.error is not None:
                raise self.error
            return self.finish

        return TextStream(stream())


class CannedEngine:
    """Just what the app calls: settings, corpus.stats, query (with its stages), llm_factory;
    and the real `Engine.answer` on top of them."""

    answer = Engine.answer
    _request = Engine._request
    _mentions = Engine._mentions

    def __init__(self) -> None:
        # The canned answers are shown as written (`keep`): these tests are about the app,
        # the support check has its own (tests/test_support.py).
        self.settings = Settings.load(grading_tiers=["signals"], support_check="keep")
        self.corpus = CannedCorpus()
        self.embedder = None  # the support check then reads the question by its terms alone

    def query(self, question: str, progress: StageListener | None = None, **_: Any) -> CragResult:
        for event in CANNED_STAGES:
            if progress is not None:
                progress(event)
        return canned_result(question)

    def _check_open(self) -> None:
        """A canned engine is always open."""

    def _run(self, request: Request, cancel: Any) -> CragResult:
        """`Engine.answer` runs its request here: the canned `query` (which the tests'
        engines override) answers it with the request's stages and conversation."""
        return self.query(request.question, request.progress, history=request.history)

    def llm_factory(self) -> CannedLlm:
        return CannedLlm(["RRF sums ", "1 / (k + rank) ", "over the rankings [1]."])

    def close(self) -> None:
        pass


def canned_app() -> CragApp:
    return CragApp(engine=CannedEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]


async def ask_canned(pilot: Pilot[None]) -> None:
    await pilot.press(*"How does RRF work?", "enter")
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


def steady(*keys: str, ask: bool = False) -> Callable[[Pilot[None]], Awaitable[None]]:
    """Press `keys` (and ask the canned question), then stop cursors blinking: a blinking
    cursor makes a screenshot depend on timing."""

    async def run_before(pilot: Pilot[None]) -> None:
        if ask:
            await ask_canned(pilot)
        await pilot.press(*keys)
        for box in pilot.app.screen.query(Input):
            box.cursor_blink = False
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_snapshot_main_after_answer(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(canned_app(), terminal_size=size, run_before=steady(ask=True))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_snapshot_main_idle(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(canned_app(), terminal_size=size, run_before=steady())


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_snapshot_help(snap_compare: Any, size: tuple[int, int]) -> None:
    assert snap_compare(canned_app(), terminal_size=size, run_before=steady("f1"))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
@pytest.mark.parametrize("key", ["ctrl+o", "f2"], ids=["ingest", "settings"])
def test_snapshot_ingest_and_settings(snap_compare: Any, size: tuple[int, int], key: str) -> None:
    assert snap_compare(canned_app(), terminal_size=size, run_before=steady(key))


class RecordingEngine(CannedEngine):
    """The canned engine, remembering the conversation each question was asked with."""

    def __init__(self) -> None:
        super().__init__()
        self.histories: list[list[dict[str, str]]] = []

    def query(
        self, question: str, progress: StageListener | None = None, **kwargs: Any
    ) -> CragResult:
        self.histories.append(list(kwargs.get("history", ())))
        return super().query(question, progress)


def test_follow_ups_see_the_conversation_until_ctrl_n() -> None:
    engine = RecordingEngine()
    app = CragApp(engine=engine, clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        await pilot.press(*"and its constant?", "enter")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        await pilot.press("ctrl+n")
        await pilot.press(*"What is WAL?", "enter")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    run(app, body, (120, 40))
    first, follow_up, fresh = engine.histories
    assert first == [] and fresh == []
    assert [turn["role"] for turn in follow_up] == ["user", "assistant"]
    assert follow_up[0]["content"] == "How does RRF work?"
    assert follow_up[1]["content"].endswith("[1].")


def test_canned_answer_cites_and_citation_jumps_to_evidence() -> None:
    app = canned_app()

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        assert app.main_screen.answer_text.endswith("[1].")
        screen_text = app.export_screenshot()
        assert "CORRECT" in screen_text
        table = app.query_one("#evidence", EvidenceTable)
        table.move_cursor(row=2)
        app.query_one("#citations").focus()
        await pilot.press("down", "enter")
        assert app.focused is table and table.cursor_row == 0

    run(app, body, (120, 40))


def test_insufficient_evidence_state() -> None:
    app = canned_app()
    engine: Any = app.engine

    def insufficient(question: str, progress: StageListener | None = None, **_: Any) -> CragResult:
        result = canned_result(question)
        result.decision, result.action = Decision.INCORRECT, Action.RE_RETRIEVE
        result.context, result.insufficient_evidence = [], True
        return result

    engine.query = insufficient

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        assert app.query_one("#answer-scroll").has_class("insufficient")
        assert app.main_screen.answer_text == INSUFFICIENT.format(fallback="")
        assert "No answer — nothing found" in screen_text(app)  # the panel's title
        step = "Ask again in the words the documents would use, or add documents that cover it."
        assert shown(app.query_one("#answer", Static)).endswith(step)
        assert "INCORRECT" in app.export_screenshot()

    run(app, body, (80, 24))


def test_tui_command_registers_with_typer() -> None:
    import typer
    from typer.testing import CliRunner

    from crag_edge.tui.cli import tui

    cli = typer.Typer()
    cli.command("tui")(tui)
    cli.command("noop")(lambda: None)  # a group, so "tui" is a subcommand as in crag-edge
    result = CliRunner().invoke(cli, ["tui", "--help"])
    assert result.exit_code == 0 and "--db" in result.output


@pytest.mark.models
def test_settings_screen_applies_and_saves(engine: Engine, tmp_path: Path) -> None:
    from crag_edge.tui.settings import SettingsScreen

    config = tmp_path / "crag-edge.toml"
    config.write_text("chunk_tokens = 180\n")
    app = CragApp(engine=engine, config=config)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("f2")
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        assert screen.query_one("#config", Input).value == str(config)
        screen.query_one("#correct_threshold", Input).value = "0.95"
        assert screen.query_one("#tier-signals", Checkbox).value
        await pilot.press("ctrl+s")
        assert app.settings.grading.correct_threshold == 0.95
        assert app.engine is not None and app.engine is not engine
        assert app.engine.settings.grading.correct_threshold == 0.95
        assert app.engine.corpus is engine.corpus  # the open corpus is kept
        saved = Settings.load(config)
        assert saved.grading.correct_threshold == 0.95 and saved.ingest.chunk_tokens == 180
        assert saved.grading.grading_tiers == ["signals"]
        # An invalid combination is refused with the reason; nothing changes.
        screen.query_one("#incorrect_threshold", Input).value = "0.99"
        await pilot.press("enter")
        assert "incorrect_threshold" in str(screen.query_one("#settings-status", Static).render())
        assert app.settings.grading.incorrect_threshold != 0.99
        await pilot.press("escape")
        assert not isinstance(app.screen, SettingsScreen)

    run(app, body, (100, 30))


# -- corpora: the picker (F3) and the ingest screen's directory tree ---------------------------


def foreign_sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    conn.close()
    return path


def screen_text(app: CragApp) -> str:
    """The screen as plain text (the SVG export escapes it)."""
    strips = app.screen._compositor.render_strips()
    return "\n".join("".join(segment.text for segment in strip) for strip in strips)


async def open_picker(pilot: Pilot[None]) -> CorpusScreen:
    await pilot.press("f3")
    screen = pilot.app.screen
    assert isinstance(screen, CorpusScreen)
    await wait_for(pilot, lambda: bool(screen.entries), timeout=30)
    await pilot.pause()
    return screen


@pytest.mark.models
@pytest.mark.slow
def test_corpus_picker_switches_creates_and_refuses(
    tmp_path: Path, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "corpora"
    folder.mkdir()
    for name, source in (("first.db", "honeybees.txt"), ("second.db", "reciprocal-rank-fusion.md")):
        doc = tmp_path / source
        doc.write_text((SAMPLE / source).read_text(encoding="utf-8"), encoding="utf-8")
        with Engine.open(folder / name, Settings.load(), create=True, embedder=embedder) as eng:
            eng.ingest([doc])
    foreign_sqlite(folder / "foreign.db")
    first, second = (folder / "first.db").resolve(), (folder / "second.db").resolve()
    monkeypatch.chdir(folder)

    with Engine.open(first, tui_settings(), embedder=embedder) as given:
        app = CragApp(engine=given)

        async def body(pilot: Pilot[None]) -> None:
            screen = await open_picker(pilot)
            by_name = {entry.path.name: entry for entry in screen.entries}
            assert list(by_name) == ["first.db", "second.db", "foreign.db"]  # the open one first
            assert by_name["first.db"].is_open
            stats = by_name["second.db"].stats
            assert stats is not None and stats.documents == 1 and stats.chunks >= 1
            assert stats.embedder_id == embedder.model_id
            foreign = by_name["foreign.db"]
            assert not foreign.openable and foreign.stats is None
            assert str(foreign.problem).startswith("not a crag-edge corpus: ")
            text = screen_text(app)
            assert "not a crag-edge corpus" in text and "1 documents" in text and "open" in text
            options = screen.query_one("#corpora", OptionList)
            assert options.highlighted == 0 and app.focused is options

            # A foreign file typed into the path box is refused, with the reason.
            await pilot.press("ctrl+n", *"foreign.db", "enter")
            status = str(screen.query_one("#corpora-status", Static).render())
            assert "not a crag-edge corpus" in status and app.engine is given
            # So is any other file that is not a corpus (found out by the opening worker).
            (folder / "readme.txt").write_text("not a database")
            box = screen.query_one("#corpus-path", Input)
            box.value = ""
            await pilot.press(*"readme.txt", "enter")
            await wait_for(pilot, lambda: "bad file header" in screen_text(app), timeout=30)
            status = str(screen.query_one("#corpora-status", Static).render())
            assert status.startswith("not a crag-edge corpus") and app.engine is given
            assert isinstance(app.screen, CorpusScreen)

            # Enter on the second corpus switches to it (in a worker) and returns to the main
            # screen; the engine the caller gave is left open for the caller to close.
            options.focus()
            await pilot.press("down", "enter")
            await wait_for(pilot, lambda: app.db == second, timeout=60)
            await pilot.pause()
            assert not isinstance(app.screen, CorpusScreen)
            assert app.engine is not None and app.engine.corpus.path == second
            assert app.engine.embedder is embedder  # same model: no second load
            assert app.engine.llm_factory is given.llm_factory  # nor a second LLM
            assert "second.db" in app.sub_title and "1 documents" in app.sub_title
            assert given.corpus.stats(view=EVERYTHING).documents == 1  # still open

            # A question runs against the new corpus.
            await pilot.press("ctrl+l", *QUESTION, "enter")
            await wait_for(pilot, lambda: app.main_screen.result is not None, timeout=300)
            await app.workers.wait_for_complete()
            assert app.main_screen.result is not None and app.main_screen.result.hits
            sources = {Path(hit.chunk.source).name for hit, _ in app.main_screen.result.hits}
            assert sources == {"reciprocal-rank-fusion.md"}, sources

            # Creating a corpus from the path box: the app owned the second engine, closes it.
            owned = app.engine
            screen = await open_picker(pilot)
            await pilot.press("ctrl+n", *"new/fresh.db", "enter")
            fresh = (folder / "new" / "fresh.db").resolve()
            await wait_for(pilot, lambda: app.db == fresh, timeout=60)
            await pilot.pause()
            assert fresh.is_file() and not isinstance(app.screen, CorpusScreen)
            assert "0 documents" in app.sub_title
            with pytest.raises(apsw.ConnectionClosedError):
                owned.corpus.stats(view=EVERYTHING)

        run(app, body, (100, 30))


def test_corpus_switch_is_refused_while_a_question_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    app = canned_app()

    async def body(pilot: Pilot[None]) -> None:
        screen = await open_picker(pilot)
        assert [entry.is_open for entry in screen.entries] == [True]
        await pilot.press("enter")  # the open corpus: nothing to switch, back to the main screen
        await pilot.pause()
        assert not isinstance(app.screen, CorpusScreen) and app.db == Path("demo.db")

        screen = await open_picker(pilot)
        app.main_screen.stages.start("retrieve")  # as a running question does
        assert app.busy() == "A question is running"
        await pilot.press("ctrl+n", *"other.db", "enter")
        assert "Busy" in str(screen.query_one("#corpora-status", Static).render())
        assert app.db == Path("demo.db") and app.screen is screen
        assert not (tmp_path / "other.db").exists()

    run(app, body, (80, 24))


def test_ingest_directory_tree_fills_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("a")
    (tmp_path / "b.md").write_text("b")
    (tmp_path / ".hidden").write_text("h")
    monkeypatch.chdir(tmp_path)
    app = canned_app()

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("ctrl+o")
        screen = app.screen
        assert isinstance(screen, IngestScreen)
        assert not screen.query(DirectoryTree)  # mounted on first use only
        box = screen.query_one("#path", Input)
        await pilot.press("ctrl+d")
        tree = screen.query_one("#browse", DirectoryTree)
        await wait_for(pilot, lambda: len(tree.root.children) == 2, timeout=30)
        assert app.focused is tree and screen.has_class("-browsing")
        assert [node.label.plain for node in tree.root.children] == ["notes", "b.md"]

        await pilot.press("down", "enter")  # a folder: fills the path, focus stays
        assert box.value == "notes" and app.focused is tree
        await wait_for(pilot, lambda: len(tree.root.children[0].children) == 1, timeout=30)
        await pilot.press("down", "enter")  # a file: fills the path, focus to the box
        assert box.value == str(Path("notes", "a.txt")) and app.focused is box

        await pilot.press("ctrl+d")  # from the box: back to the tree
        assert app.focused is tree
        await pilot.press("ctrl+d")  # from the tree: hide it, back to the box
        assert not screen.has_class("-browsing") and app.focused is box
        assert not tree.display or tree.region.height == 0

    run(app, body, (80, 24))


@pytest.fixture
def picker_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Corpora with fixed contents and times (no models: fake 4-d vectors) in a folder of a
    fixed name, in UTC: the picker's snapshot depends on neither the tmp dir nor the clock."""
    folder = tmp_path / "corpora"
    folder.mkdir()
    for name, n_docs in (("alpha.db", 2), ("beta.db", 3)):
        with Corpus.create(folder / name, "all-minilm-l6-v2", 4) as corpus:
            for i in range(n_docs):
                text = f"Document {i} of {name}."
                doc = DocumentRecord(f"doc{i}.txt", "", text, f"hash-{i}")
                vectors = np.eye(4, dtype=np.float32)[i : i + 1]
                corpus.replace_document(doc, [ChunkRecord(text, 0, len(text), 5)], vectors)
            corpus.set_meta({"created_at": "1700000000.0", "last_ingest_at": "1700003600.0"})
    foreign_sqlite(folder / "foreign.db")
    (folder / "notes.db").write_text("not a database")
    monkeypatch.chdir(folder)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield folder
    monkeypatch.undo()
    time.tzset()


async def picker_ready(pilot: Pilot[None]) -> None:
    await open_picker(pilot)
    await pilot.app.workers.wait_for_complete()
    for box in pilot.app.screen.query(Input):
        box.cursor_blink = False
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_snapshot_corpus_picker(
    snap_compare: Any, picker_folder: Path, size: tuple[int, int]
) -> None:
    assert snap_compare(canned_app(), terminal_size=size, run_before=picker_ready)


# -- hostile text: markup in documents, file names, answers and errors is shown as written ----

# Every kind of markup a document, file name or model could carry: an action on click, a
# style, a link, a stray closing tag (raises when parsed), an escape and an unclosed tag.
MARKUP = "[@click=app.quit]quit[/] [bold]b[/bold] [/] [link=https://x.test]l[/link] \\[2] [red"


class MarkupEngine(CannedEngine):
    """The canned engine whose sources, grade reasons and answer are all markup; with
    `fail`, the model's stream breaks after its first pieces with a markup-laden error."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__()
        self.fail = fail

    def query(self, question: str, progress: StageListener | None = None, **_: Any) -> CragResult:
        result = super().query(question, progress)
        source = f"docs/{MARKUP}.md"
        result.hits = [
            (replace(hit, chunk=replace(hit.chunk, source=source)), replace(grade, reason=MARKUP))
            for hit, grade in result.hits
        ]
        result.context = [replace(item, source=source, title=MARKUP) for item in result.context]
        return result

    def llm_factory(self) -> CannedLlm:
        answer = MARKUP + " [1]."
        pieces = [answer[i : i + 3] for i in range(0, len(answer), 3)]  # tags cut apart
        error = RuntimeError(f"model died at {MARKUP}") if self.fail else None
        return CannedLlm(pieces, error=error)


def shown(widget: Static) -> str:
    """What a Static shows, as plain text."""
    return str(widget.render())


def test_markup_in_answer_sources_and_reasons_is_shown_as_written() -> None:
    app = CragApp(engine=MarkupEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        answer = app.query_one("#answer", Static)
        assert shown(answer) == app.main_screen.answer_text == MARKUP + " [1]."
        assert not app.query_one("#answer-scroll").has_class("failed")
        text = screen_text(app)
        assert "[@click=app.quit]quit[/] [bold]b[/bo" in text  # the evidence table's source
        assert "[1] docs/[@click=app.quit]quit[/] [bold]b[/bold] [/]" in text  # a citation
        await pilot.press("ctrl+r")
        assert MARKUP in shown(app.query_one("#chunk", Static))
        await pilot.click("#answer", offset=(1, 0))  # on "quit": no action behind it
        await pilot.pause()
        assert app.is_running

    run(app, body, (120, 40))


def test_a_model_error_mid_answer_is_shown_as_written() -> None:
    app = CragApp(engine=MarkupEngine(fail=True), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        assert app.query_one("#answer-scroll").has_class("failed")
        error = f"RuntimeError: model died at {MARKUP}"
        assert shown(app.query_one("#answer", Static)) == error
        assert app.main_screen.stages.stages[-1].detail == error

    run(app, body, (120, 40))


class IngestingEngine(CannedEngine):
    """The canned engine with an ingest that reports files named in markup, then fails."""

    def ingest(self, paths: list[Path], progress: Callable[[ProgressEvent], None]) -> None:
        progress(ProgressEvent(1, 2, f"{MARKUP}.txt", "added"))
        progress(ProgressEvent(2, 2, "[/x].txt", "added"))
        raise RuntimeError(f"disk {MARKUP}")


def test_markup_in_paths_file_names_and_ingest_errors_is_shown_as_written(
    tmp_path: Path,
) -> None:
    app = CragApp(engine=IngestingEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("ctrl+o")
        screen = app.screen
        assert isinstance(screen, IngestScreen)
        status = screen.query_one("#ingest-status", Static)
        await pilot.press(*"/nowhere/[/][/]", "enter")
        assert shown(status) == "No such file or folder: /nowhere/[/][/]"
        screen.query_one("#path", Input).value = str(tmp_path)
        await pilot.press("enter")
        await wait_for(pilot, lambda: not screen.running, timeout=30)
        assert shown(status) == f"Failed: RuntimeError: disk {MARKUP}"
        assert list(screen.query_one("#ingest-log", Log).lines) == [
            f"added     {MARKUP}.txt",
            "added     [/x].txt",
        ]

    run(app, body, (100, 30))


def test_markup_in_a_typed_corpus_path_and_its_error_is_shown_as_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "a[").mkdir()  # typed as "a[/]b.txt": a closing tag, and a real file
    (tmp_path / "a[" / "]b.txt").write_text("not a database")
    app = CragApp(settings=tui_settings())

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("f3")
        screen = app.screen
        assert isinstance(screen, CorpusScreen)
        await pilot.press("ctrl+n", *"a[/]b.txt", "enter")
        status = screen.query_one("#corpora-status", Static)
        await wait_for(pilot, lambda: "not a crag-edge corpus" in shown(status), timeout=30)
        await pilot.pause()
        assert "Cannot open a[/]b.txt: not a crag-edge" in screen_text(app)  # the toast

    run(app, body, (100, 30), notifications=True)


def test_markup_in_a_settings_value_is_shown_as_written() -> None:
    app = canned_app()

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("f2")
        app.screen.query_one("#correct_threshold", Input).value = "[/][/]"
        await pilot.press("enter")
        status = app.screen.query_one("#settings-status", Static)
        assert shown(status) == "correct_threshold: '[/][/]' is not a number"

    run(app, body, (100, 30))


def test_a_terminal_shrunk_to_a_few_cells_and_back_keeps_the_app() -> None:
    app = canned_app()

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)  # an answer with a citation: the list under it has a line
        for width, height in ((20, 6), (12, 3), (10, 24), (1, 1), (80, 24)):
            await pilot.resize_terminal(width, height)
            await pilot.pause()
            await pilot.pause()  # the layout at the new size is done
        assert app.is_running
        text = screen_text(app)
        assert "[1] reciprocal-rank-fusion.md" in text and "rankings [1]." in text

    run(app, body, (80, 24))


# Escape sequences a document, file name or model could carry: set the terminal's clipboard
# (OSC 52), its title, clear the screen, and the 8-bit CSI.
ESCAPES = "\x1b]52;c;ZXZpbA==\x1b\\ \x1b]0;owned\x1b\\ \x1b[2J \x9b31m \x00\x7f"


class EscapeEngine(CannedEngine):
    """The canned engine whose sources, chunk text and answer carry terminal escapes."""

    def query(self, question: str, progress: StageListener | None = None, **_: Any) -> CragResult:
        result = super().query(question, progress)
        result.hits = [
            (
                replace(hit, chunk=replace(hit.chunk, source=f"x{ESCAPES}.md", text=ESCAPES)),
                grade,
            )
            for hit, grade in result.hits
        ]
        return result

    def llm_factory(self) -> CannedLlm:
        return CannedLlm([ESCAPES, " [1]."])


def test_terminal_escapes_in_text_never_reach_the_terminal() -> None:
    app = CragApp(engine=EscapeEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        await pilot.press("ctrl+r")
        text = screen_text(app)
        lines = text.replace("\n", "")
        controls = sorted({c for c in lines if ord(c) < 32 or 127 <= ord(c) < 160})
        assert not controls, controls
        assert "]52;c;ZXZpbA==\\ ]0;owned\\ [2J 31m" in text  # the rest, shown as written

    run(app, body, (120, 40))


class OpenCorpusEngine(CannedEngine):
    """The canned engine on a real corpus file (no models: 4-d vectors)."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        with Corpus.create(path, "all-minilm-l6-v2", 4) as corpus:
            doc = DocumentRecord("doc.txt", "", "A document.", "hash")
            vectors = np.eye(4, dtype=np.float32)[:1]
            corpus.replace_document(doc, [ChunkRecord("A document.", 0, 11, 3)], vectors)
        self.corpus = Corpus.open(path)  # type: ignore[assignment]

    def close(self) -> None:
        self.corpus.close()  # type: ignore[attr-defined]


def test_a_corpus_file_truncated_under_the_app_is_reported_not_fatal(tmp_path: Path) -> None:
    db = tmp_path / "corpus.db"
    engine = OpenCorpusEngine(db)
    app = CragApp(engine=engine, clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        assert "1 documents" in app.sub_title
        db.write_bytes(b"")  # another program empties the file the app has open
        await pilot.press("f3")
        screen = app.screen
        assert isinstance(screen, CorpusScreen)
        await wait_for(pilot, lambda: bool(screen.entries), timeout=30)
        assert screen.entries[0].is_open and screen.entries[0].stats is None
        assert "cannot read the corpus" in str(screen.entries[0].problem)
        await pilot.press("escape", "ctrl+o")
        assert isinstance(app.screen, IngestScreen)
        stats = app.screen.query_one("#stats", Static)
        assert shown(stats).startswith("cannot read the corpus: ")
        await pilot.press("escape")
        app.corpus_ready()  # as after an ingest: the title says what became of the corpus
        assert "cannot read the corpus" in app.sub_title
        assert app.is_running

    try:
        run(app, body, (100, 30))
    finally:
        engine.close()


@pytest.mark.models
def test_saving_settings_over_a_file_that_is_not_toml_applies_them_unsaved(
    engine: Engine, tmp_path: Path
) -> None:
    from crag_edge.tui.settings import SettingsScreen

    config = tmp_path / "picture.toml"
    config.write_bytes(b"\xff\xd8\xff\xe0 not text")
    app = CragApp(engine=engine, config=config)

    async def body(pilot: Pilot[None]) -> None:
        await pilot.press("f2")
        screen = app.screen
        assert isinstance(screen, SettingsScreen)
        screen.query_one("#correct_threshold", Input).value = "0.95"
        await pilot.press("ctrl+s")
        status = shown(screen.query_one("#settings-status", Static))
        unsaved = f"Applied to the next question, but not saved: config file {config} is not "
        assert status.startswith(unsaved + "valid TOML: "), status
        assert app.settings.grading.correct_threshold == 0.95  # applied, as it says
        assert app.is_running and config.read_bytes() == b"\xff\xd8\xff\xe0 not text"

    run(app, body, (100, 30))


@pytest.mark.models
def test_settings_applied_over_a_damaged_corpus_are_refused_not_fatal(
    corpus_db: Path, embedder: Any, tmp_path: Path
) -> None:
    from crag_edge.tui.settings import SettingsScreen

    db = tmp_path / "copy.db"
    db.write_bytes(corpus_db.read_bytes())
    with Engine.open(db, tui_settings(), embedder=embedder) as opened:
        app = CragApp(engine=opened)

        async def body(pilot: Pilot[None]) -> None:
            db.write_bytes(b"")  # another program empties the file the app has open
            await pilot.press("f2")
            screen = app.screen
            assert isinstance(screen, SettingsScreen)
            screen.query_one("#correct_threshold", Input).value = "0.95"
            await pilot.press("enter")  # applying reads the corpus's calibration
            status = shown(screen.query_one("#settings-status", Static))
            assert "malformed" in status, status
            assert app.is_running and app.engine is opened
            assert app.settings.grading.correct_threshold != 0.95

        run(app, body, (100, 30))


NO_HOME = "~no-such-user-here/notes"  # `~name` of no user: Path.expanduser raises


@pytest.mark.parametrize(
    "value", [NO_HOME, "notes\x00.db", "loop.db"], ids=["no-such-home", "nul", "symlink-loop"]
)
def test_a_typed_path_no_file_can_have_is_refused_in_words(
    value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loop.db").symlink_to("loop.db")  # Path.resolve raises on it
    app = canned_app()

    async def body(pilot: Pilot[None]) -> None:
        for key, box_id, status_id in (
            ("ctrl+o", "#path", "#ingest-status"),
            ("f3", "#corpus-path", "#corpora-status"),
        ):
            await pilot.press(key)
            screen = app.screen
            box = screen.query_one(box_id, Input)
            box.focus()
            box.value = value  # as typed or pasted: the path completer sees it too
            await pilot.pause()
            await pilot.press("enter")
            await pilot.pause()
            status = shown(screen.query_one(status_id, Static))
            assert status.startswith("Cannot use the path: "), status
            assert app.is_running
            await pilot.press("escape")

    run(app, body, (100, 30))


class LongAnswerEngine(CannedEngine):
    """The canned engine whose model streams a long answer as fast as it can."""

    def llm_factory(self) -> CannedLlm:
        return CannedLlm(["word 漢字 "] * 3000, finish="length")


def test_a_long_fast_answer_is_shown_without_redrawing_it_per_token() -> None:
    app = CragApp(engine=LongAnswerEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        started = time.monotonic()
        await ask_canned(pilot)
        # Re-wrapping the whole answer once per token took ~20 s here (its square grows).
        assert time.monotonic() - started < 8
        assert (
            app.main_screen.answer_text == ("word 漢字 " * 3000).rstrip()
        )  # sentences, as checked
        assert shown(app.query_one("#answer", Static)).startswith("word 漢字 " * 10)

    run(app, body, (120, 40))


class UnsupportedEngine(CannedEngine):
    """The canned engine removing unsupported sentences, whose model adds a date no passage
    holds (the support check fails it on the number, with no model call)."""

    def __init__(self) -> None:
        super().__init__()
        self.settings = self.settings.replace(support_check="remove")

    def llm_factory(self) -> CannedLlm:
        return CannedLlm(["RRF ignores the raw scores [1]. ", "It dates from 1887 [1]."])


def test_the_support_check_summary_and_removed_sentences_show_under_the_answer() -> None:
    app = CragApp(engine=UnsupportedEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        assert app.main_screen.answer_text == "RRF ignores the raw scores [1]."
        subtitle = str(app.query_one("#answer-scroll").border_subtitle)
        assert subtitle.startswith("support: 1 of 2 sentences stated by their passages, 1 removed")
        assert subtitle.endswith(" · removed: It dates from 1887 [1]. (no passage holds 1887)")
        assert "support: 1 of 2 sentences" in screen_text(app)  # on the panel's border

    run(app, body, (120, 40))


# -- the end of a question as it was: the stage line and the answer panel agree ------------


class StalledEngine(CannedEngine):
    """The canned engine whose model makes no progress: the answer is stopped, empty."""

    def llm_factory(self) -> CannedLlm:
        return CannedLlm([], finish="timeout")


STOPPED = "the model made no progress for 30 s and the answer was stopped"


def test_a_stopped_answer_shows_a_cross_and_the_reason_on_the_stage_line_and_the_panel() -> None:
    app = CragApp(engine=StalledEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        answer = app.main_screen.stages.stages[-1]
        assert (answer.name, answer.failed, answer.detail) == ("answer", True, STOPPED)
        line = shown(app.query_one("#stages", Static))
        assert line.endswith(f"✗ answer {STOPPED}") and "✓ answer" not in line
        assert shown(app.query_one("#answer", Static)).startswith(f"No answer: {STOPPED}")
        assert app.query_one("#answer-scroll").border_title == "No answer"

    run(app, body, (160, 40))


@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
def test_snapshot_main_after_a_stopped_answer(snap_compare: Any, size: tuple[int, int]) -> None:
    app = CragApp(engine=StalledEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]
    assert snap_compare(app, terminal_size=size, run_before=steady(ask=True))


def test_the_stage_line_keeps_the_newest_stages_whole_within_its_lines() -> None:
    pieces = [Text(f"✓ stage{i} detail {i}") for i in range(30)]
    text = fitted(pieces, 60, 2)
    lines = text.plain.split("\n")
    assert len(lines) == 2 and all(len(line) <= 60 for line in lines)
    assert lines[0].startswith("… ") and lines[1].startswith("→ ")
    assert text.plain.endswith("✓ stage29 detail 29")  # the newest, whole
    shown_pieces = text.plain.removeprefix("… ").replace("\n→ ", " → ").split(" → ")
    assert shown_pieces == [p.plain for p in pieces[-len(shown_pieces) :]]  # none cut
    (long,) = fitted([Text("✗ error " + "x" * 100)], 40, 2).plain.split("\n")
    assert len(long) <= 40 and long.endswith("…")
    assert fitted(pieces[:2], 60, 2).plain == "✓ stage0 detail 0 → ✓ stage1 detail 1"


def test_a_stage_of_a_second_or_more_shows_its_time_in_seconds() -> None:
    assert [stage_time(ms) for ms in (0.4, 26, 999.4)] == ["0ms", "26ms", "999ms"]
    assert [stage_time(ms) for ms in (999.5, 4_120, 84_633)] == ["1.0s", "4.1s", "84.6s"]


class TwoRoundsEngine(CannedEngine):
    """The canned engine whose loop searched twice: the second round's hits are ranked from 1
    again, as a search's are."""

    def query(self, question: str, progress: StageListener | None = None, **_: Any) -> CragResult:
        result = super().query(question, progress)
        result.hits = result.hits + [
            (replace(hit, chunk=replace(hit.chunk, chunk_id=hit.chunk.chunk_id + 10)), grade)
            for hit, grade in result.hits
        ]
        return result


def test_evidence_rows_are_numbered_once_across_rounds() -> None:
    app = CragApp(engine=TwoRoundsEngine(), clock=lambda: 0.0)  # type: ignore[arg-type]

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        table = app.query_one("#evidence", EvidenceTable)
        numbers = [str(table.get_row_at(i)[0]) for i in range(table.row_count)]
        assert numbers == [str(n) for n in range(1, 7)]
        await pilot.press("ctrl+r", "down", "down", "down")
        assert app.query_one("#chunk-scroll").border_title == "Chunk · #4 · rank 1 in its search"

    run(app, body, (120, 40))


def test_the_question_stays_in_the_box_to_edit_after_enter() -> None:
    app = canned_app()

    async def body(pilot: Pilot[None]) -> None:
        await ask_canned(pilot)
        box = app.query_one("#question", Input)
        assert box.value == "How does RRF work?" and box.selected_text == box.value
        await pilot.press("right", *["backspace"] * len("work?"))
        await pilot.press(*"WAL?")
        assert box.value == "How does RRF WAL?"  # edited in place
        box.select_all()
        await pilot.press(*"New question")
        assert box.value == "New question"  # typing over the selection replaces it

    run(app, body, (120, 40))
