"""Ingest job records kept in the corpus itself, so every service replica on one corpus sees
every job (`server.jobs` runs them, `docs/scale-out.md` describes the replicas).

A job belongs to the replica that runs it, which keeps its `heartbeat_at` fresh (the
database's clock, so replicas on machines whose clocks differ agree). A queued or running
job whose heartbeat is older than the caller's limit is one whose replica died: `fail_stale`
marks it failed with the reason, and a finished job is never changed again, so a replica that
was only slow finds its job failed and stops it. The SQL is the same for both backends but
for the parameter mark and the clock (`store.dialect`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from crag_edge.store.dialect import Connect, Dialect

JobState = Literal["queued", "running", "succeeded", "failed", "cancelled"]
UNFINISHED: tuple[JobState, ...] = ("queued", "running")
# What a job may change after it was added; `id`, `owner`, `replica`, `paths` and
# `created_at` are fixed.
MUTABLE = (
    "state",
    "done",
    "total",
    "current",
    "report",
    "error",
    "started_at",
    "finished_at",
)


@dataclass
class JobRecord:
    """One ingest job: who started it, which replica runs it, its state and progress."""

    id: str
    paths: list[str]
    replica: str
    owner: str | None = None  # the name of the token that started it (None: no token)
    state: JobState = "queued"
    created_at: float = 0.0
    started_at: float | None = None
    finished_at: float | None = None
    done: int = 0
    total: int = 0
    current: str | None = None
    report: dict[str, Any] | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The job as the service shows it, progress grouped."""
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


_COLUMNS = (
    "id, owner, replica, state, paths, done, total, current, report, error, "
    "created_at, started_at, finished_at"
)


class JobTable:
    """The `jobs` table of one corpus, through `connect` (each call one transaction)."""

    def __init__(
        self, connect: Connect, dialect: Dialect, *, writable: bool, present: bool = True
    ) -> None:
        """`present=False`: a read-only file older than the table (it holds no job)."""
        self._connect = connect
        self._dialect = dialect
        self._writable = writable and present
        self._present = present

    def _sql(self, text: str) -> str:
        return self._dialect.sql(text)

    def add(self, job: JobRecord) -> None:
        """Store a new job; its heartbeat starts now."""
        marks = ", ".join("?" * 13)
        with self._connect() as conn:
            conn.execute(
                self._sql(f"INSERT INTO jobs ({_COLUMNS}, heartbeat_at) VALUES ({marks}, NOW)"),
                _row(job),
            )

    def update(self, job: JobRecord, fields: Sequence[str]) -> bool:
        """Write `fields` of a job not finished yet and refresh its heartbeat; False when the
        job is finished already (failed for a lost heartbeat) or gone."""
        unknown = set(fields) - set(MUTABLE)
        if unknown:
            raise ValueError(f"job fields {sorted(unknown)} cannot change")
        values = _row(job)
        names = _COLUMNS.split(", ")
        sets = "".join(f"{name} = ?, " for name in fields)
        with self._connect() as conn:
            changed = conn.execute(
                self._sql(
                    f"UPDATE jobs SET {sets}heartbeat_at = NOW "
                    "WHERE id = ? AND state IN ('queued', 'running') RETURNING id"
                ),
                [values[names.index(name)] for name in fields] + [job.id],
            ).fetchall()
        return bool(changed)

    def heartbeat(self, replica: str) -> None:
        """Refresh the heartbeat of every unfinished job of `replica`: it is alive."""
        if not self._writable:
            return
        with self._connect() as conn:
            conn.execute(
                self._sql(
                    "UPDATE jobs SET heartbeat_at = NOW "
                    "WHERE replica = ? AND state IN ('queued', 'running')"
                ),
                (replica,),
            )

    def fail_stale(self, after_s: float, reason: str) -> int:
        """Mark failed, with `reason`, every unfinished job without a heartbeat for `after_s`
        seconds; how many. Looks before writing, so that it waits for no writer when there
        is nothing to mark (the usual case); the write is a transaction of its own, which
        checks again: one that had read first could not write in SQLite once another writer
        committed in between (its snapshot is stale), and would fail instead of waiting."""
        if not self._writable:
            return 0
        stale = "state IN ('queued', 'running') AND heartbeat_at < NOW - ?"
        with self._connect() as conn:
            if not conn.execute(
                self._sql(f"SELECT 1 FROM jobs WHERE {stale}"), (after_s,)
            ).fetchall():
                return 0
        with self._connect() as conn:
            marked = conn.execute(
                self._sql(
                    "UPDATE jobs SET state = 'failed', error = ?, current = NULL, "
                    f"finished_at = NOW WHERE {stale} RETURNING id"
                ),
                (reason, after_s),
            ).fetchall()
        return len(marked)

    def get(self, job_id: str) -> JobRecord | None:
        """The job with this id, or None."""
        if not self._present:
            return None
        with self._connect() as conn:
            rows = conn.execute(
                self._sql(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?"), (job_id,)
            ).fetchall()
        return _record(rows[0]) if rows else None

    def counts(self, owner: str | None = None) -> dict[str, int]:
        """How many jobs are kept, by state: every job, or with `owner` only that owner's."""
        if not self._present:
            return {}
        mine, params = ("WHERE owner = ? ", (owner,)) if owner is not None else ("", ())
        with self._connect() as conn:
            rows = conn.execute(
                self._sql(f"SELECT state, count(*) FROM jobs {mine}GROUP BY state"), params
            ).fetchall()
        return {str(state): int(count) for state, count in rows}

    def prune(self, keep: int) -> None:
        """Delete the finished jobs beyond the newest `keep` jobs."""
        with self._connect() as conn:
            conn.execute(
                self._sql(
                    "DELETE FROM jobs WHERE state NOT IN ('queued', 'running') AND id NOT IN "
                    "(SELECT id FROM jobs ORDER BY created_at DESC LIMIT ?)"
                ),
                (keep,),
            )


def _row(job: JobRecord) -> tuple[Any, ...]:
    """The job's values in `_COLUMNS` order."""
    report = None if job.report is None else json.dumps(job.report)
    return (
        job.id,
        job.owner,
        job.replica,
        job.state,
        json.dumps(job.paths),
        job.done,
        job.total,
        job.current,
        report,
        job.error,
        job.created_at,
        job.started_at,
        job.finished_at,
    )


def _record(row: Sequence[Any]) -> JobRecord:
    job_id, owner, replica, state, paths, done, total, current, report, error, *times = row
    created_at, started_at, finished_at = times
    return JobRecord(
        id=str(job_id),
        paths=json.loads(paths),
        replica=str(replica),
        owner=owner,
        state=state,
        created_at=float(created_at),
        started_at=started_at,
        finished_at=finished_at,
        done=int(done),
        total=int(total),
        current=current,
        report=None if report is None else json.loads(report),
        error=error,
    )
