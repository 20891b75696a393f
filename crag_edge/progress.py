"""Live progress of one question through the loop, for faces that show work as it happens.

The TUI (and anything else) passes a callback to `Engine.query(..., progress=...)` and gets
a `StageEvent` when each stage starts and ends — embed, retrieve, each grading tier, the
decision of every round, each corrective action, refine — with its duration. Callbacks run
on the worker's thread and must be quick; an exception in one is the caller's bug and
propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from crag_edge.observability import Metrics

Status = Literal["start", "end", "event"]


@dataclass(frozen=True)
class StageEvent:
    """`start`/`end` bracket a timed stage (`ms` set on `end`); `event` is instantaneous
    (a round's decision, a corrective action)."""

    stage: str
    status: Status
    detail: str = ""
    ms: float | None = None


Progress = Callable[[StageEvent], None]


class Stopwatch:
    """One run's stage timings (summed per stage), mirrored to the metrics and `progress`."""

    def __init__(self, metrics: Metrics, progress: Progress | None = None) -> None:
        self.timings: dict[str, float] = {}
        self._metrics = metrics
        self._progress = progress

    def emit(self, stage: str, status: Status, detail: str = "", ms: float | None = None) -> None:
        if self._progress is not None:
            self._progress(StageEvent(stage, status, detail, ms))

    def __call__(self, stage: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run `fn(*args, **kwargs)` as `stage`."""
        self.emit(stage, "start")
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            seconds = time.perf_counter() - started
            self.timings[stage] = round(self.timings.get(stage, 0.0) + seconds * 1000, 3)
            self._metrics.stage_seconds.labels(stage=stage).observe(seconds)
            self.emit(stage, "end", ms=round(seconds * 1000, 3))
