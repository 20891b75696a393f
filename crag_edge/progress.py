"""Live progress of one question through the loop, for faces that show work as it happens.

The TUI (and anything else) passes a callback to `Engine.query(..., progress=...)` and gets
a `StageEvent` when each stage starts and ends — embed, retrieve, each grading tier, the
decision of every round, each corrective action, refine — with its duration. Callbacks run
on the worker's thread and must be quick; an exception in one is the caller's bug and
propagates.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

from crag_edge.cancellation import check_cancelled
from crag_edge.observability import Metrics
from crag_edge.renamed import renamed_names

Status = Literal["start", "end", "event"]


@dataclass(frozen=True)
class StageEvent:
    """`start`/`end` bracket a timed stage (`ms` set on `end`); `event` is instantaneous
    (a round's decision, a corrective action)."""

    stage: str
    status: Status
    detail: str = ""
    ms: float | None = None


StageListener = Callable[[StageEvent], None]
"""Called with each stage event of a question as it happens."""

__getattr__ = renamed_names(__name__, {"Progress": "StageListener"}, globals())


class Stopwatch:
    """One run's stage timings (summed per stage), mirrored to the metrics and `progress`."""

    def __init__(self, metrics: Metrics, progress: StageListener | None = None) -> None:
        self.timings: dict[str, float] = {}
        self._metrics = metrics
        self._progress = progress

    def emit(self, stage: str, status: Status, detail: str = "", ms: float | None = None) -> None:
        """Tell `progress` of the stage; every stage's start and end is also where cancelled
        work stops (`cancellation`)."""
        check_cancelled()
        if self._progress is not None:
            self._progress(StageEvent(stage, status, detail, ms))

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time the block as the stage `name`: `with clock.stage("retrieve"): ...`."""
        self.emit(name, "start")
        started = time.perf_counter()
        try:
            yield
        finally:
            seconds = time.perf_counter() - started
            self.timings[name] = round(self.timings.get(name, 0.0) + seconds * 1000, 3)
            self._metrics.stage_seconds.labels(stage=name).observe(seconds)
            self.emit(name, "end", ms=round(seconds * 1000, 3))
