"""An ingest's progress as a person follows it: chunks, their rate and the time left.

Documents differ too much in size for documents/s to say how fast ingest goes, so faces
show chunks: in the writing stage, chunks embedded (`ProgressEvent.chunks`) of the chunks
the run is expected to embed (`ProgressEvent.expected`, exact once every file is read); in
the evaluator's stage, passages read (`done` of `total`). The writing stage is timed from the
start of the run (made just before it), the evaluator's from its first event, so the rate
and the ETA restart when the stage changes. The last frame comes from the run's report, so
it says what was done, not where the last event happened to stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from crag_edge.ingest.pipeline import IngestReport, ProgressEvent


@dataclass(frozen=True)
class Frame:
    """What a progress display shows: `done` of `total` chunks (0 total: not known yet) in
    `stage`, at `per_second`, with `eta_s` seconds left (None: no rate yet), `files` of
    `file_total` documents done (files, BEIR records and the attachments files carry),
    `current` the file at hand."""

    stage: str
    done: int
    total: int
    per_second: float
    eta_s: float | None
    files: int
    file_total: int
    current: str = ""
    finished: bool = False

    def describe(self) -> str:
        """`embedding · 1,234/~3,400 chunks · 45.1 chunks/s · 3/16 documents · ETA 0:42`; the
        last frame: `ingested 3,412 chunks from 16 documents · 47.0 chunks/s`."""
        rate = f"{self.per_second:.1f} chunks/s" if self.per_second > 0 else ""
        if self.finished:
            head = f"{self.stage} {counted(self.done, 'chunk')} from "
            head += counted(self.file_total, "document")
            return " · ".join(part for part in (head, rate) if part)
        total = f"{'' if self.files >= self.file_total else '~'}{self.total:,}"
        parts = [
            self.stage,
            f"{self.done:,}/{total} chunks" if self.total else f"{self.done:,} chunks",
            rate,
            f"{self.files:,}/{self.file_total:,} documents" if self.stage != "evaluator" else "",
            f"ETA {clock(self.eta_s)}" if self.eta_s is not None else "",
            Path(self.current).name[-40:],
        ]
        return " · ".join(part for part in parts if part)


def counted(n: int, noun: str) -> str:
    """`1 document`, `16 documents`, `3,412 chunks`: the last frame reads as a sentence."""
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def clock(seconds: float) -> str:
    """`0:42`, `12:05`, `1:02:03`."""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"


class IngestMeter:
    """Follows one run's `ProgressEvent`s and turns each into a `Frame`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stage = "embedding"
        self._started = clock()
        self._files = (0, 0)

    def update(self, event: ProgressEvent) -> Frame:
        """The frame after `event`."""
        if event.stage == "passages":
            if self._stage != "evaluator":  # its rate must not use the embedding's time
                self._stage, self._started = "evaluator", self._clock()
            done, total = event.done, event.total
        else:
            done, total = event.chunks, max(event.expected, event.chunks)
            if event.stage == "documents":
                self._files = (event.done, event.total)
        rate = self._per_second(done)
        eta = (total - done) / rate if rate > 0 and total else None
        return Frame(self._stage, done, total, rate, eta, *self._files, current=event.source)

    def final(self, report: IngestReport) -> Frame:
        """The last frame, from what the run did: every chunk it wrote, of as many."""
        files = report.added + report.updated + report.unchanged + report.retagged
        files += len(report.errors)
        written = report.chunks_written
        return Frame(
            "ingested",
            written,
            written,
            report.chunks_per_second,
            0.0,
            files,
            files,
            finished=True,
        )

    def _per_second(self, done: int) -> float:
        """Chunks per second since the stage began (0.0 before a second passed: the first
        group's rate would only measure model loading and warm-up)."""
        elapsed = self._clock() - self._started
        return done / elapsed if elapsed >= 1.0 else 0.0
