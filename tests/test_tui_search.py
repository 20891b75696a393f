"""The TUI's search screen (ctrl+f), driven by Textual's Pilot on a real corpus: passages
ranked with their places, the question's words marked, the highlighted one shown whole."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("textual")

from rich.text import Text
from textual.pilot import Pilot
from textual.widgets import OptionList

from crag_edge.console.output import MARK_STYLE
from crag_edge.engine import Engine
from crag_edge.tui.app import CragApp
from crag_edge.tui.search import SearchScreen
from crag_edge.tui.widgets import Plain
from tests.test_tui import SAMPLE, run, tui_settings, wait_for

pytestmark = pytest.mark.models


def test_search_shows_ranked_passages_with_marked_words(tmp_path: Path, embedder: Any) -> None:
    db = tmp_path / "corpus.db"
    with Engine.open(db, tui_settings(), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
        app = CragApp(engine=engine)

        async def body(pilot: Pilot[None]) -> None:
            await pilot.press("ctrl+f")
            screen = app.screen
            assert isinstance(screen, SearchScreen)
            await pilot.press(*"???", "enter")  # nothing to search for: said, nothing run
            passage = screen.query_one("#passage", Plain)
            assert "Nothing to search for: the question has no words" in str(passage.render())
            await pilot.press("ctrl+u", *"sqlite write-ahead logging", "enter")
            await wait_for(pilot, lambda: bool(screen.found), timeout=120)
            options = screen.query_one("#passages", OptionList)
            first = options.get_option_at_index(0).prompt
            assert isinstance(first, Text)
            assert first.plain.startswith("1. sqlite-wal.md § SQLite write-ahead logging\n")
            words = {first.plain[span.start : span.end].lower() for span in first.spans}
            assert {"write", "ahead", "logging"} <= words
            assert all(span.style == MARK_STYLE for span in first.spans[1:])
            await pilot.pause()
            assert str(passage.render()).startswith("# SQLite write-ahead logging")
            await pilot.press("down")
            second = screen.found[1].hit.chunk
            assert str(passage.render()) == second.text
            await pilot.press("escape")
            assert not isinstance(app.screen, SearchScreen)

        run(app, body, (100, 30))
