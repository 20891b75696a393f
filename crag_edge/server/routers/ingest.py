"""Ingest jobs: start a background ingest of server-side paths, then follow its progress.

Paths are confined to the configured ingest roots (`server.security`); the job runs through
`Engine.ingest` on the one writer thread (`server.jobs`).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from crag_edge.server.deps import AUTH, StateDep
from crag_edge.server.errors import ApiError, error_responses
from crag_edge.server.security import PathRefused, expand_confined
from crag_edge.text_boundary import printable_path

log = logging.getLogger("crag_edge.server")
router = APIRouter(tags=["corpus"], dependencies=AUTH, responses=error_responses(401))


class IngestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[Annotated[str, Field(min_length=1, pattern=r"^[^\x00]+$")]] = Field(
        min_length=1, description="Server-side files or folders inside the configured roots."
    )


@router.post("/v1/ingest", status_code=202, responses=error_responses(400, 403, 404, 413, 422, 503))
async def ingest_paths(body: IngestRequest, state: StateDep) -> dict[str, Any]:
    """Start a background ingest of server-side paths confined to the ingest roots."""
    config = state.config
    if len(body.paths) > config.max_ingest_paths:
        raise ApiError(
            422,
            "too_many_paths",
            f"{len(body.paths)} paths; the limit is {config.max_ingest_paths}",
        )
    state.require_engine()
    try:
        confined = await run_in_threadpool(expand_confined, body.paths, config.ingest_roots)
    except PathRefused as exc:
        code = {403: "path_refused", 404: "path_not_found"}.get(exc.status, "invalid_path")
        shown = printable_path(exc.requested)  # a walked file name may not be UTF-8
        raise ApiError(exc.status, code, f"{shown}: {exc.reason}") from None
    job = state.jobs.submit(list(confined.files), body.paths)
    log.info("ingest job queued", extra={"job": job.id, "files": len(confined.files)})
    return {"job": job.to_dict(), "location": f"/v1/jobs/{job.id}"}


@router.get("/v1/jobs/{job_id}", responses=error_responses(404))
async def job_status(job_id: str, state: StateDep) -> dict[str, Any]:
    """An ingest job: state, progress (done/total files) and, when finished, its report."""
    job = state.jobs.get(job_id)
    if job is None:
        raise ApiError(404, "job_not_found", "no such job (finished jobs are kept a while)")
    return job.to_dict()
