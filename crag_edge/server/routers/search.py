"""Search: the ranked passages a question finds, with their places and snippets, without the
corrective loop (no grading, no LLM): what a person looking for a page wants, in a fraction
of a second.

It takes a model slot like every route that runs a model (the embedder) and needs the `query`
scope; only the documents the caller's groups may see are searched.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.concurrency import run_in_threadpool

from crag_edge.server.deps import PROTECTED, CallerDep, StateDep, admitted, requires
from crag_edge.server.routers.query import QUESTION_ERRORS, QueryRequest, checked_question

router = APIRouter(tags=["query"], responses=PROTECTED)


@router.post("/v1/search", dependencies=requires("query"), responses=QUESTION_ERRORS)
async def search(body: QueryRequest, state: StateDep, caller: CallerDep) -> dict[str, Any]:
    """The passages for the question, best first (as `crag-edge search --json`): each with
    its source, `locator` (file and page or section), a `snippet` with the question's words
    at the character spans `marks`, the whole `text`, and the retrieval scores."""
    question = checked_question(body.question, state.config)
    engine = state.require_engine()
    async with admitted(state):
        found = await run_in_threadpool(
            engine.search_passages,
            question,
            mode=body.mode,
            top_k=body.top_k,
            view=caller.view,
        )
    shown: dict[str, Any] = state.view.shown(
        {"question": question, "passages": [p.to_dict() for p in found]}, caller.visible_groups
    )
    return shown
