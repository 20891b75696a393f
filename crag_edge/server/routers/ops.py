"""Operations: liveness, readiness, Prometheus metrics and the corpus and queue statistics.

The probes are open; the statistics need the `ingest` scope (they count the documents the
caller's groups may see, and its own jobs), the metrics `admin` (they describe the whole
service)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response
from prometheus_client import generate_latest
from starlette.concurrency import run_in_threadpool

from crag_edge.server.deps import PROTECTED, CallerDep, StateDep, requires

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled")

router = APIRouter()


@router.get("/healthz", tags=["health"])
async def healthz() -> dict[str, str]:
    """Liveness: the process serves HTTP (models may still be loading)."""
    return {"status": "ok"}


@router.get("/readyz", tags=["health"], responses={503: {"description": "Not ready"}})
async def readyz(state: StateDep) -> JSONResponse:
    """Readiness: true once the corpus is open and the models are loaded, and while the
    corpus database and the LLM server (when `llm_url` is set) answer (`server.readiness`);
    503 names what failed."""
    probe = state.probe
    if state.engine is None or probe is None:
        reason = "engine failed to load" if state.load_error else "loading models"
        return JSONResponse({"ready": False, "reason": reason}, 503)
    failed = await run_in_threadpool(probe.failures)
    if failed:
        reason = "not answering: " + ", ".join(failed)
        return JSONResponse({"ready": False, "reason": reason, "failed": failed}, 503)
    return JSONResponse({"ready": True, "checked": probe.names})


@router.get(
    "/metrics",
    tags=["health"],
    dependencies=requires("admin"),
    response_class=Response,
    responses={200: {"content": {PROMETHEUS_TEXT: {}}}, **PROTECTED},
)
async def metrics(state: StateDep) -> Response:
    """Prometheus text: engine decisions and stage latencies, requests, queue depth, jobs."""
    counts = await run_in_threadpool(state.jobs.counts)
    for job_state in JOB_STATES:
        state.metrics.jobs.labels(job_state).set(counts.get(job_state, 0))
    text = generate_latest(state.metrics.registry)
    if state.engine is not None:
        text += state.engine.metrics.exposition()
    return Response(text, media_type=PROMETHEUS_TEXT)


@router.get(
    "/v1/stats",
    tags=["corpus"],
    dependencies=requires("ingest"),
    responses=PROTECTED,
)
async def stats(state: StateDep, caller: CallerDep) -> dict[str, Any]:
    """Corpus counts and provenance (the counts of what the caller's groups may see; no
    `last_ingest_at` or `db_bytes` for a caller with groups: other groups' ingests move
    them), and the server's queue and the jobs the caller may follow (an admin's: every
    job)."""
    engine = state.require_engine()
    view = caller.view
    corpus = asdict(await run_in_threadpool(lambda: engine.corpus.stats(view=view)))
    corpus["path"] = str(corpus["path"])
    if view.limited:  # they move when any group ingests: not the caller's to see
        corpus["last_ingest_at"] = corpus["db_bytes"] = None
    config = state.config
    return {
        "corpus": corpus,
        "server": {
            "workers": config.settings.server_workers,
            "max_waiting": config.settings.server_max_waiting,
            "running": state.admission.running,
            "waiting": state.admission.waiting,
            "jobs": await run_in_threadpool(state.jobs.counts, caller.job_owner),
        },
    }
