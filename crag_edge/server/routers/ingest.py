"""Ingest jobs: start a background ingest of server-side paths, then follow its progress.

Paths are confined to the configured ingest roots (`server.security`); the job runs through
`Engine.ingest` on the one writer thread (`server.jobs`). Both routes need the `ingest` scope;
a job runs as the token that started it (`groups.Tagging`): new documents get its groups (an
admin token's: none, so they are seen by all) unless the request names groups, a stored
document it cannot see is refused and left as it is, and a job is shown to that token and to
admin tokens only.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool

from crag_edge.groups import NAME_PATTERN, Tagging
from crag_edge.ingest.exclude import MAX_GLOB_CHARS, checked_globs
from crag_edge.server.deps import PROTECTED, CallerDep, StateDep, requires
from crag_edge.server.errors import ApiError, error_responses
from crag_edge.server.scopes import Principal
from crag_edge.server.security import PathRefused, expand_confined
from crag_edge.text_boundary import printable_path

log = logging.getLogger("crag_edge.server")
MAX_GROUPS = 64  # access groups in one ingest request
MAX_EXCLUDE = 64  # exclude globs in one ingest request
router = APIRouter(tags=["corpus"], dependencies=requires("ingest"), responses=PROTECTED)


class IngestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[Annotated[str, Field(min_length=1, pattern=r"^[^\x00]+$")]] = Field(
        min_length=1, description="Server-side files or folders inside the configured roots."
    )
    groups: list[Annotated[str, Field(pattern=NAME_PATTERN)]] | None = Field(
        default=None,
        max_length=MAX_GROUPS,
        description="Access groups every ingested document is tagged with, replacing its "
        "earlier ones (an unchanged document is retagged, not re-embedded); [] leaves them "
        "untagged, visible to every caller. Without it, stored documents keep their groups "
        "and new ones get the token's (an admin's: none). A non-admin token may only name "
        "groups it has, and its job refuses every stored document it cannot see.",
    )
    exclude: list[Annotated[str, Field(min_length=1, max_length=MAX_GLOB_CHARS)]] = Field(
        default_factory=list,
        max_length=MAX_EXCLUDE,
        description="Globs of files to leave out, matched at the end of each file's path: a "
        "name ('*.fr.html', 'index.html') or a folder's files ('toc/*'), as `crag-edge "
        "ingest --exclude`. Not absolute, no NUL.",
    )


@router.post(
    "/v1/ingest",
    status_code=202,
    responses=error_responses(400, 403, 404, 408, 413, 415, 422, 503),
)
async def ingest_paths(body: IngestRequest, state: StateDep, caller: CallerDep) -> dict[str, Any]:
    """Start a background ingest of server-side paths confined to the ingest roots."""
    config = state.config
    if len(body.paths) > config.settings.server_max_ingest_paths:
        raise ApiError(
            422,
            "too_many_paths",
            f"{len(body.paths)} paths; the limit is {config.settings.server_max_ingest_paths}",
        )
    if state.require_engine().corpus.readonly:
        raise ApiError(
            503, "corpus_read_only", "the corpus is read-only here: nothing can be ingested"
        )
    try:
        confined = await run_in_threadpool(expand_confined, body.paths, config.ingest_roots)
    except PathRefused as exc:
        code = {403: "path_refused", 404: "path_not_found"}.get(exc.status, "invalid_path")
        shown = printable_path(exc.requested)  # a walked file name may not be UTF-8
        raise ApiError(exc.status, code, f"{shown}: {exc.reason}") from None
    tagging = _tagging(body, caller)
    try:
        exclude = checked_globs(body.exclude)
    except ValueError as exc:
        raise ApiError(422, "invalid_exclude", str(exc)) from None
    ingest = state.tagged_ingest(tagging, exclude)
    job = await run_in_threadpool(
        lambda: state.jobs.submit(
            list(confined.files), body.paths, ingest=ingest, owner=caller.name
        )
    )
    log.info("ingest job queued", extra={"job": job.id, "files": len(confined.files)})
    return {"job": job.to_dict(), "location": f"/v1/jobs/{job.id}"}


@router.get("/v1/jobs/{job_id}", responses=error_responses(404))
async def job_status(job_id: str, state: StateDep, caller: CallerDep) -> dict[str, Any]:
    """An ingest job: state, progress (done/total files) and, when finished, its report.
    Another token's job is answered as missing: its existence is not for this caller."""
    state.require_engine()  # the records are in the corpus
    job = await run_in_threadpool(state.jobs.get, job_id, caller.job_owner)
    if job is None:
        raise ApiError(404, "job_not_found", "no such job (finished jobs are kept a while)")
    return job.to_dict()


def _tagging(body: IngestRequest, caller: Principal) -> Tagging:
    """The job's tagging, as the caller: 403 when a non-admin token names a group it lacks."""
    asked = None if body.groups is None else frozenset(body.groups)
    try:
        return Tagging(caller.visible_groups, asked)
    except ValueError as exc:
        raise ApiError(403, "group_refused", str(exc)) from None
