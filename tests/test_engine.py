"""`Engine.answer` reports its stages as `Engine.query` does, then the answer's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.progress import StageEvent

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
FAST: dict[str, Any] = {"grading_tiers": ["signals"], "rewrite_with_llm": False}
UNANSWERABLE = "The Zorblat reactor in Quentaris is cooled with chilled lemon juice every Tuesday."


def test_answer_reports_the_loop_then_the_answer_stage(tmp_path: Path, embedder: Any) -> None:
    events: list[StageEvent] = []
    with Engine.open(
        tmp_path / "kb.db", Settings.load(**FAST), create=True, embedder=embedder
    ) as engine:
        engine.ingest([SAMPLE])
        result, stream = engine.answer(UNANSWERABLE, progress=events.append)
        before_reading = [(e.stage, e.status) for e in events]
        text = "".join(stream)
    assert result.insufficient_evidence and "insufficient" in text
    assert ("retrieve", "start") in before_reading
    assert before_reading[-1] == ("answer", "start")
    assert ("answer", "end") not in before_reading
    last = events[-1]
    assert (last.stage, last.status) == ("answer", "end") and last.ms is not None
    assert stream.finish_reason == "insufficient_evidence"
