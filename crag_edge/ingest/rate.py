"""Chunks per second of a running ingest, for progress displays.

Documents differ too much in size for documents/s to say how fast ingest goes, so faces
show chunks/s: in the writing stage, chunks embedded (`ProgressEvent.chunks`); in the
evaluator's stage, passages read (`done`). The writing stage is timed from the start of
the run (made just before it), the evaluator's from its first event, so the rate and a
display's ETA restart when the stage changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from crag_edge.ingest.pipeline import ProgressEvent


class ChunkRate:
    """Follows one run's `ProgressEvent`s; `update` says when a new stage began."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stage = "writing"
        self._started = clock()
        self._chunks = 0

    def update(self, event: ProgressEvent) -> bool:
        """Record `event`; True when it opens the evaluator's stage."""
        stage = "passages" if event.stage == "passages" else "writing"
        opened = stage != self._stage
        if opened:
            self._stage, self._started = stage, self._clock()
        self._chunks = event.done if stage == "passages" else event.chunks
        return opened

    @property
    def per_second(self) -> float:
        """Chunks per second since the current stage began (0.0 before a second passed:
        the first group's rate would only measure model loading and warm-up)."""
        elapsed = self._clock() - self._started
        return self._chunks / elapsed if elapsed >= 1.0 else 0.0

    def describe(self) -> str:
        """`12.3 chunks/s`, or "" while there is no rate yet."""
        rate = self.per_second
        return f"{rate:.1f} chunks/s" if rate > 0 else ""
