"""What the service holds between requests: the engine, the admission queue, jobs, metrics.

The engine loads on a thread at start-up (liveness answers meanwhile, readiness once it is
loaded); ingest runs on one writer thread with its own connection (WAL: queries keep reading
while it writes).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.concurrency import run_in_threadpool

from crag_edge.engine import Engine
from crag_edge.groups import AS_OWNER, Tagging
from crag_edge.ingest import IngestReport, ProgressEvent
from crag_edge.observability import LATENCY_BUCKETS
from crag_edge.result import CragResult
from crag_edge.server.admission import Admission
from crag_edge.server.authenticate import Authenticator
from crag_edge.server.caller_view import CallerView
from crag_edge.server.config import MAX_JOBS_KEPT, SHUTDOWN_TIMEOUT_S, ServerConfig
from crag_edge.server.errors import ApiError
from crag_edge.server.jobs import IngestFn, JobManager
from crag_edge.server.readiness import DependencyProbe
from crag_edge.server.watching import ServiceWatch
from crag_edge.store.backend import CorpusBackend
from crag_edge.store.factory import open_corpus

EngineFactory = Callable[[], Engine]
log = logging.getLogger("crag_edge.server")


class ServerMetrics:
    """Request, queue and correction metrics of the service (the engine has its own registry)."""

    def __init__(self, admission: Admission) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "crag_server_requests", "HTTP requests", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "crag_server_request_seconds",
            "HTTP request latency (time to the response's start for streams)",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "crag_server_queue_depth", "Model calls waiting for a worker", registry=r
        )
        self.queue_depth.set_function(lambda: admission.waiting)
        self.in_flight = Gauge("crag_server_in_flight", "Model calls running", registry=r)
        self.in_flight.set_function(lambda: admission.running)
        capacity = Gauge("crag_server_workers", "Model calls allowed at once", registry=r)
        capacity.set(admission.workers)
        self.rejected = Counter(
            "crag_server_rejected", "Requests refused for capacity", ["reason"], registry=r
        )
        self.ready = Gauge(
            "crag_server_ready", "1 once the engine and models are loaded", registry=r
        )
        self.jobs = Gauge(
            "crag_server_ingest_jobs", "Ingest jobs kept, by state", ["state"], registry=r
        )
        self.corrections = Counter(
            "crag_server_corrections", "Corrective actions in served results", ["type"], registry=r
        )
        self.fallback = Counter(
            "crag_server_fallback_used",
            "Fallback providers used by served results",
            ["provider"],
            registry=r,
        )

    def observe_result(self, result: CragResult) -> None:
        for correction in result.corrections:
            self.corrections.labels(correction.type).inc()
        for provider in result.fallback.get("used") or []:
            self.fallback.labels(str(provider)).inc()


class ServerState:
    """The engine (None until loaded), the admission queue, the ingest jobs, the metrics and
    the tokens."""

    def __init__(self, config: ServerConfig, engine_factory: EngineFactory) -> None:
        self.config = config
        self.authenticator = Authenticator(config.api_token, config.tokens_file)
        self.engine_factory = engine_factory
        self.engine: Engine | None = None
        self.load_error: str | None = None
        self.closing = False
        self._lock = threading.Lock()
        limits = config.settings
        self.admission = Admission(
            limits.server_workers, limits.server_max_waiting, limits.server_queue_timeout_s
        )
        self.metrics = ServerMetrics(self.admission)
        self.jobs = JobManager(
            self._ingest, keep=MAX_JOBS_KEPT, stale_after_s=limits.server_job_stale_after_s
        )
        self._job_corpus: CorpusBackend | None = None
        self.probe: DependencyProbe | None = None  # what /readyz asks, once loaded
        self.watch: ServiceWatch | None = None
        self.view = CallerView()  # results as a caller with groups may see them

    def load(self) -> None:
        """Open the corpus and load the models (on a thread: liveness answers meanwhile)."""
        started = time.perf_counter()
        try:
            engine = self.engine_factory()
            engine.embedder.embed(["warm up"])  # first query should not pay for session start-up
            # Job records on a connection of their own: a heartbeat waiting for the ingest's
            # write lock (SQLite) never holds up the queries on the engine's.
            corpus = engine.corpus
            job_corpus = open_corpus(corpus.location, readonly=corpus.readonly)
        except Exception:
            log.exception("engine failed to load", extra={"db": str(self.config.db)})
            self.load_error = "engine failed to load; see the server log"
            return
        with self._lock:
            if self.closing:
                engine.close()
                job_corpus.close()
                return
            self.engine, self._job_corpus = engine, job_corpus
            self.probe = DependencyProbe(engine.corpus, engine.settings.models)
            self.jobs.attach(job_corpus.jobs())
            if self.config.watch_roots:
                watched = functools.partial(
                    self._ingest,
                    prune=True,
                    roots=self.config.watch_roots,
                    tagging=Tagging(defaults=self.config.watch_groups),
                )
                self.watch = ServiceWatch(self.config.watch_roots, self.jobs, watched)
                self.watch.start()
        self.metrics.ready.set(1)
        log.info(
            "engine ready",
            extra={"db": str(self.config.db), "seconds": round(time.perf_counter() - started, 3)},
        )

    def require_engine(self) -> Engine:
        engine = self.engine
        if engine is None:
            retry = str(self.config.settings.server_retry_after_s)
            if self.load_error:
                raise ApiError(503, "engine_unavailable", self.load_error)
            raise ApiError(
                503, "not_ready", "models are still loading", headers={"Retry-After": retry}
            )
        return engine

    def _ingest(
        self,
        paths: list[Path],
        progress: Callable[[ProgressEvent], None],
        *,
        prune: bool = False,
        roots: tuple[Path, ...] | None = None,
        tagging: Tagging = AS_OWNER,
        exclude: Sequence[str] = (),
    ) -> IngestReport:
        """Ingest confined to `roots` (default: the ingest roots; the watcher's: its folders),
        as `tagging` says (`crag_edge.groups`; by default as the owner, keeping every stored
        document's groups: the watcher's syncs), leaving out the files `exclude` matches."""
        engine = self.require_engine()
        # The one writer: its own connection, so queries keep reading committed data (WAL).
        with open_corpus(engine.corpus.location) as writer:
            return engine.ingest(
                paths,
                progress=progress,
                corpus=writer,
                prune=prune,
                roots=self.config.ingest_roots if roots is None else roots,
                groups=tagging.groups,
                caller=tagging.caller,
                default_groups=tagging.defaults,
                exclude=exclude,
            )

    def tagged_ingest(self, tagging: Tagging, exclude: Sequence[str] = ()) -> IngestFn:
        """An ingest of the ingest roots as `tagging` says, without the files `exclude`
        matches: an API job's, run as the token that started it."""
        return functools.partial(self._ingest, tagging=tagging, exclude=exclude)

    async def close(self) -> None:
        self.closing = True
        with self._lock:
            watch = self.watch
        if watch is not None:
            watch.stop()
        await run_in_threadpool(self.jobs.shutdown, SHUTDOWN_TIMEOUT_S)
        if watch is not None:
            await run_in_threadpool(watch.join, SHUTDOWN_TIMEOUT_S)
        deadline = time.monotonic() + SHUTDOWN_TIMEOUT_S
        while self.admission.running and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        with self._lock:
            engine, self.engine = self.engine, None
            job_corpus, self._job_corpus = self._job_corpus, None
        if engine is not None:
            engine.close()
        if job_corpus is not None:
            job_corpus.close()
        self.metrics.ready.set(0)
