"""`serve --watch-root`: the folder watcher (`ingest.watch`) inside the service.

Each sync the watcher asks for runs as an ingest job on the service's one writer thread, so it
queues behind API ingest jobs and never runs beside them, and the watcher waits for that job
before it takes the next batch of changes. Every sync is logged (`watch sync`, with the job id,
its state and counts) and is a job like any other (`GET /v1/jobs/{id}`, the job counts of
`/v1/stats` and `/metrics`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path

from crag_edge.ingest.watch import FolderWatcher
from crag_edge.server.jobs import IngestFn, JobManager

log = logging.getLogger("crag_edge.server.watch")
COUNTS = ("added", "updated", "unchanged", "pruned")


class ServiceWatch:
    """The watcher on a thread of its own, feeding `ingest` jobs to `jobs` one at a time."""

    def __init__(self, folders: Sequence[Path], jobs: JobManager, ingest: IngestFn) -> None:
        self._jobs = jobs
        self._ingest = ingest
        self._watcher = FolderWatcher(folders, self._sync, notice=log.warning)
        self._thread = threading.Thread(target=self._run, name="crag-watch", daemon=True)

    def start(self) -> None:
        folders = [str(folder.path) for folder in self._watcher.folders]
        log.info("watching folders", extra={"folders": folders})
        self._thread.start()

    def stop(self) -> None:
        """Ask the watcher to stop; a sync job in progress ends with the job manager's."""
        self._watcher.stop()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            self._watcher.run()
        except Exception:  # the service keeps serving what is indexed; the log says why
            log.exception("folder watching stopped")

    def _sync(self, folders: list[Path]) -> None:
        shown = [str(folder) for folder in folders]
        job = self._jobs.run(folders, shown, ingest=self._ingest)
        report = job.report or {}
        counts = {key: report.get(key, 0) for key in COUNTS}
        errors = len(report.get("errors", []))
        extra = {"job": job.id, "state": job.state, "folders": shown, "errors": errors} | counts
        log.info("watch sync", extra=extra)
