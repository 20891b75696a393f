"""Ingest jobs: one background writer thread, each job with an id, a state and its progress.

Ingest is incremental by content hash and commits document by document (WAL, one writer), so
a job aborted by shutdown leaves a consistent corpus and running the same ingest again resumes
where it stopped.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from crag_edge.ingest import IngestReport, ProgressEvent

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
log = logging.getLogger("crag_edge.server.jobs")
IngestFn = Callable[[list[Path], Callable[[ProgressEvent], None]], IngestReport]


class JobCancelled(Exception):
    """Raised from the progress callback to stop an ingest between two documents."""


@dataclass
class Job:
    id: str
    paths: list[str]
    owner: str | None = None  # the name of the token that started it (None: no token)
    state: JobState = "queued"
    created_at: float = field(default_factory=time.time)
    started_at: float | None = None
    finished_at: float | None = None
    done: int = 0
    total: int = 0
    current: str | None = None
    report: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["progress"] = {
            "done": self.done,
            "total": self.total,
            "fraction": (self.done / self.total) if self.total else 0.0,
            "current": self.current,
        }
        for key in ("done", "total", "current"):
            del data[key]
        return data


def report_dict(report: IngestReport) -> dict[str, Any]:
    data = asdict(report)
    data["chunks_per_second"] = report.chunks_per_second
    for key in ("skipped", "errors", "warnings"):
        data[key] = [{"source": s, "reason": r} for s, r in data[key]]
    return data


class JobManager:
    """Runs ingest jobs one at a time on a single writer thread; keeps the last `keep` jobs."""

    def __init__(self, ingest: IngestFn, *, keep: int = 100) -> None:
        self._ingest = ingest
        self._keep = keep
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crag-ingest")

    def submit(
        self,
        paths: list[Path],
        shown: list[str],
        *,
        ingest: IngestFn | None = None,
        owner: str | None = None,
    ) -> Job:
        """Queue a job; it runs `ingest` (default: the manager's) after the jobs before it."""
        return self._enqueue(paths, shown, ingest or self._ingest, owner)[0]

    def run(self, paths: list[Path], shown: list[str], *, ingest: IngestFn) -> Job:
        """Queue a job and wait until it has finished: a caller that feeds jobs one after
        another (the folder watcher) never has more than one in the queue."""
        job, finished = self._enqueue(paths, shown, ingest)
        finished.result()
        return job

    def _enqueue(
        self, paths: list[Path], shown: list[str], ingest: IngestFn, owner: str | None = None
    ) -> tuple[Job, Future[None]]:
        job = Job(id=uuid.uuid4().hex, paths=shown, owner=owner)
        with self._lock:
            self._jobs[job.id] = job
            finished = [j for j in self._jobs.values() if j.finished_at is not None]
            for old in finished[: max(0, len(self._jobs) - self._keep)]:
                del self._jobs[old.id]
            if self._cancel.is_set():  # shutting down: the executor may take no more work
                job.state, job.finished_at = "cancelled", time.time()
                done: Future[None] = Future()
                done.set_result(None)
                return job, done
            return job, self._executor.submit(self._run, job, paths, ingest)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def counts(self) -> dict[str, int]:
        with self._lock:
            counts: dict[str, int] = {}
            for job in self._jobs.values():
                counts[job.state] = counts.get(job.state, 0) + 1
            return counts

    def _run(self, job: Job, paths: list[Path], ingest: IngestFn) -> None:
        if self._cancel.is_set():
            job.state, job.finished_at = "cancelled", time.time()
            return
        job.state, job.started_at = "running", time.time()

        def progress(event: ProgressEvent) -> None:
            job.done, job.total, job.current = event.done, event.total, event.source
            if self._cancel.is_set():
                raise JobCancelled

        try:
            report = ingest(paths, progress)
        except JobCancelled:
            job.state, job.error = "cancelled", "server shutting down; run the ingest again"
        except Exception as exc:
            log.exception("ingest job failed", extra={"job": job.id})
            job.state, job.error = "failed", f"ingest failed ({type(exc).__name__}); see the log"
        else:
            job.state, job.report = "succeeded", report_dict(report)
        finally:
            job.current = None
            job.finished_at = time.time()

    def shutdown(self, timeout_s: float) -> None:
        """Stop after the document in progress; queued jobs are cancelled, not started."""
        with self._lock:
            self._cancel.set()
        done = threading.Event()

        def wait() -> None:
            self._executor.shutdown(wait=True)
            done.set()

        threading.Thread(target=wait, daemon=True).start()
        done.wait(timeout_s)
