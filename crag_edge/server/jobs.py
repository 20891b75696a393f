"""Ingest jobs: one background writer thread per replica, each job's record in the corpus.

Ingest is incremental by content hash and commits document by document, so a job aborted by
shutdown (or by its replica dying) leaves a consistent corpus and running the same ingest
again resumes where it stopped. The records live in the corpus (`store.jobs`), so with
several service replicas on one PostgreSQL corpus any replica answers for any job. While a
replica runs or queues jobs it refreshes their heartbeat every quarter of
`stale_after_s`; a job not refreshed for `stale_after_s` reads as failed (its replica died),
and the replica that owned it, should it come back, stops it at the next document.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any

from crag_edge.ingest import IngestReport, ProgressEvent
from crag_edge.store.jobs import JobRecord, JobTable

log = logging.getLogger("crag_edge.server.jobs")
IngestFn = Callable[[list[Path], Callable[[ProgressEvent], None]], IngestReport]
PROGRESS_WRITE_S = 0.5  # progress reaches the record at most this often (states: at once)
SHUTDOWN_REASON = "server shutting down; run the ingest again"


class JobCancelled(Exception):
    """Raised from the progress callback to stop an ingest between two documents."""


class JobLost(Exception):
    """The job's record reads failed: another replica found its heartbeat late. Raised from
    the progress callback so that this replica stops too."""


def replica_name() -> str:
    """What names this process in job records: host and process id."""
    return f"{socket.gethostname()}:{os.getpid()}"


def report_dict(report: IngestReport) -> dict[str, Any]:
    data = asdict(report)
    data["chunks_per_second"] = report.chunks_per_second
    for key in ("skipped", "errors", "warnings"):
        data[key] = [{"source": s, "reason": r} for s, r in data[key]]
    return data


class JobManager:
    """Runs this replica's ingest jobs one at a time on a single writer thread; the records
    (the newest `keep` finished ones and every unfinished one) live in the job table given to
    `attach` once the corpus is open."""

    def __init__(self, ingest: IngestFn, *, keep: int = 100, stale_after_s: float = 60.0) -> None:
        self._ingest = ingest
        self._keep = keep
        self._stale_after_s = stale_after_s
        self.replica = replica_name()
        self._table: JobTable | None = None
        self._lock = threading.Lock()
        self._cancel = threading.Event()
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crag-ingest")
        self._heartbeat = threading.Thread(target=self._beat, name="crag-jobs-heartbeat")
        self._heartbeat.daemon = True

    def attach(self, table: JobTable) -> None:
        """Keep records in `table` from now on, and start refreshing their heartbeat."""
        self._table = table
        self._heartbeat.start()

    def _store(self) -> JobTable:
        if self._table is None:
            raise RuntimeError("no job table yet: the corpus is not open")
        return self._table

    def submit(
        self,
        paths: list[Path],
        shown: list[str],
        *,
        ingest: IngestFn | None = None,
        owner: str | None = None,
    ) -> JobRecord:
        """Queue a job; it runs `ingest` (default: the manager's) after the jobs before it."""
        return self._enqueue(paths, shown, ingest or self._ingest, owner)[0]

    def run(self, paths: list[Path], shown: list[str], *, ingest: IngestFn) -> JobRecord:
        """Queue a job and wait until it has finished: a caller that feeds jobs one after
        another (the folder watcher) never has more than one in the queue."""
        job, finished = self._enqueue(paths, shown, ingest)
        finished.result()
        return job

    def _enqueue(
        self, paths: list[Path], shown: list[str], ingest: IngestFn, owner: str | None = None
    ) -> tuple[JobRecord, Future[None]]:
        table = self._store()
        job = JobRecord(uuid.uuid4().hex, shown, self.replica, owner, created_at=time.time())
        with self._lock:
            if self._cancel.is_set():  # shutting down: the executor may take no more work
                job.state, job.finished_at = "cancelled", job.created_at
            table.add(job)
            table.prune(self._keep)
            if job.state == "cancelled":
                done: Future[None] = Future()
                done.set_result(None)
                return job, done
            return job, self._executor.submit(self._run, job, paths, ingest)

    def get(self, job_id: str, owner: str | None = None) -> JobRecord | None:
        """The job with this id, whichever replica runs it; None before the corpus is open,
        and, with `owner`, for another owner's job (`Principal.job_owner`)."""
        if self._table is None:
            return None
        self._table.fail_stale(self._stale_after_s, self._stale_reason())
        job = self._table.get(job_id)
        return job if job is not None and owner in (None, job.owner) else None

    def counts(self, owner: str | None = None) -> dict[str, int]:
        """Jobs kept, by state, over every replica; with `owner`, only that owner's."""
        if self._table is None:
            return {}
        self._table.fail_stale(self._stale_after_s, self._stale_reason())
        return self._table.counts(owner)

    def _stale_reason(self) -> str:
        return (
            f"its replica stopped updating it for {self._stale_after_s:g} s (stopped, killed or "
            "cut off from the database); documents written before are kept: run the ingest "
            "again to finish"
        )

    def _run(self, job: JobRecord, paths: list[Path], ingest: IngestFn) -> None:
        if self._cancel.is_set():
            job.state, job.finished_at = "cancelled", time.time()
            self._save(job, ("state", "finished_at"))
            return
        job.state, job.started_at = "running", time.time()
        if not self._save(job, ("state", "started_at")):
            return  # failed meanwhile: this replica was thought dead
        try:
            report = ingest(paths, self._progress(job))
        except JobCancelled:
            job.state, job.error = "cancelled", SHUTDOWN_REASON
        except JobLost:
            log.warning(
                "ingest job stopped: marked failed by another replica", extra={"job": job.id}
            )
            return
        except Exception as exc:
            log.exception("ingest job failed", extra={"job": job.id})
            job.state, job.error = "failed", f"ingest failed ({type(exc).__name__}); see the log"
        else:
            job.state, job.report = "succeeded", report_dict(report)
        job.current, job.finished_at = None, time.time()
        ending = ("state", "error", "report", "current", "finished_at", "done", "total")
        self._save(job, ending)

    def _progress(self, job: JobRecord) -> Callable[[ProgressEvent], None]:
        """The ingest's progress callback: record it (at most every `PROGRESS_WRITE_S`) and
        stop between two documents when shutting down or when the job was lost. Only files
        count: the chunks within a large file and the evaluator's readings have counts of
        their own, which would make `done` of `total` jump between scales."""
        written = 0.0

        def progress(event: ProgressEvent) -> None:
            nonlocal written
            if event.stage == "documents":
                job.done, job.total, job.current = event.done, event.total, event.source
                if time.monotonic() - written >= PROGRESS_WRITE_S:
                    written = time.monotonic()
                    if not self._store().update(job, ("done", "total", "current")):
                        raise JobLost
            if self._cancel.is_set():
                raise JobCancelled

        return progress

    def _save(self, job: JobRecord, fields: Sequence[str]) -> bool:
        """Write `fields` of `job`; False when its record already reads finished. A database
        that cannot be written is logged: the job's heartbeat then lapses and it reads failed."""
        try:
            return self._store().update(job, fields)
        except Exception:
            log.exception("ingest job state not recorded", extra={"job": job.id})
            return False

    def _beat(self) -> None:
        """Refresh this replica's unfinished jobs until shutdown; a missed beat is logged."""
        while not self._cancel.wait(self._stale_after_s / 4):
            try:
                self._store().heartbeat(self.replica)
            except Exception:
                log.warning("job heartbeat not recorded", exc_info=True)

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
