"""Questions: the corrective loop's result as JSON, and the answer streamed as server-sent
events.

Both take a model slot (`server.deps.admitted`); a streamed answer keeps its slot until the
stream ends or the client goes away. A query needs the `query` scope, an answer (which spends
the shared LLM) `answer`; both search only the documents the caller's groups may see.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool

from crag_edge.answer.generation import cited
from crag_edge.answer.timing import TimedAnswer
from crag_edge.config import RetrievalMode
from crag_edge.result import CragResult
from crag_edge.server.config import ServerConfig
from crag_edge.server.deps import (
    PROTECTED,
    CallerDep,
    ReleaseOnce,
    StateDep,
    acquire,
    admitted,
    requires,
)
from crag_edge.server.errors import ApiError, error_responses, failed_generation
from crag_edge.server.logs import request_id_var
from crag_edge.text_boundary import WORD_PATTERN, QuestionError, asked_question, repair

router = APIRouter(tags=["query"], responses=PROTECTED)
# What a question request can be refused for, besides a missing or too weak token.
QUESTION_ERRORS = error_responses(400, 408, 413, 415, 422, 503)


def _repaired(value: Any) -> Any:
    """Lone surrogates (JSON can send them) replaced before the pattern is checked."""
    return repair(value) if isinstance(value, str) else value


def _whole_number(value: Any) -> Any:
    """JSON Schema counts 5.0 as an integer, so it is one here too; `true` and "5" are not
    (the field is strict)."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", regex_engine="python-re")
    question: Annotated[str, BeforeValidator(_repaired)] = Field(
        min_length=1,
        pattern=WORD_PATTERN,  # a letter or digit: `text_boundary.asked_question`
        description="The question; limited to the server's max_question_chars.",
    )
    mode: RetrievalMode | None = Field(
        None, description="Retrieval mode (default: the retrieval_mode setting)."
    )
    top_k: (
        Annotated[int, Field(ge=1, le=100, strict=True), BeforeValidator(_whole_number)] | None
    ) = Field(None, description="Hits to retrieve per round.")


def checked_question(asked: str, config: ServerConfig) -> str:
    """The question as the engine takes it; 422 when it has nothing to search for or is too
    long."""
    try:
        question = asked_question(asked)
    except QuestionError as exc:
        raise ApiError(422, "invalid_question", str(exc)) from None
    limit = config.settings.server_max_question_chars
    if len(asked) > limit:
        raise ApiError(
            422,
            "question_too_long",
            f"the question has {len(asked)} characters; the limit is {limit}",
            max_question_chars=limit,
        )
    return question


@router.post("/v1/query", dependencies=requires("query"), responses=QUESTION_ERRORS)
async def query(body: QueryRequest, state: StateDep, caller: CallerDep) -> dict[str, Any]:
    """The corrective loop's result (CragResult JSON, as `crag-edge query --json`)."""
    question = checked_question(body.question, state.config)
    engine = state.require_engine()
    async with admitted(state):
        result = await run_in_threadpool(
            engine.query,
            question,
            mode=body.mode,
            top_k=body.top_k,
            groups=caller.visible_groups,
        )
    state.metrics.observe_result(result)
    shown: dict[str, Any] = state.view.shown(result.to_dict(), caller.visible_groups)
    return shown


@router.post(
    "/v1/answer",
    dependencies=requires("answer"),
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}}, **QUESTION_ERRORS},
)
async def answer(body: QueryRequest, state: StateDep, caller: CallerDep) -> StreamingResponse:
    """Server-sent events: `token` events ({"text"}), then one `result` event
    ({"answer", "finish_reason", "cited", "timings", "support", "result": CragResult};
    `timings` as `answer.timing.AnswerTimings`, in seconds; `support` the check of every
    sentence the model wrote, `answer.checked.SupportReport`); `error` instead if generation
    fails. Each `token` event is a whole sentence that passed the support check. `finish_reason`:
    stop, length (cut at llm_max_tokens), timeout (stalled past llm_stall_timeout_s),
    insufficient_evidence (no model called) or unsupported (no sentence of the model's answer
    was stated by the passages: the answer is the insufficient-evidence reply)."""
    question = checked_question(body.question, state.config)
    engine = state.require_engine()
    await acquire(state)
    release = ReleaseOnce(state.admission.release)
    try:
        result, tokens = await run_in_threadpool(
            engine.answer,
            question,
            mode=body.mode,
            top_k=body.top_k,
            groups=caller.visible_groups,
        )
    except BaseException:
        release()
        raise
    state.metrics.observe_result(result)

    def shown() -> dict[str, Any]:
        """The result as this caller may see it, read when the answer has ended: an answer
        written again from the top hits read whole has added them to its context."""
        return state.view.shown(result.to_dict(), caller.visible_groups)

    return StreamingResponse(
        _answer_events(result, shown, tokens, release, request_id_var.get()),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        background=BackgroundTask(release),
    )


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


_END = object()


async def _answer_events(
    result: CragResult,
    shown: Callable[[], dict[str, Any]],
    tokens: TimedAnswer,
    release: Callable[[], None],
    request_id: str | None,
) -> AsyncIterator[str]:
    try:
        while True:
            token = await run_in_threadpool(next, tokens, _END)
            if token is _END:
                break
            yield _sse("token", {"text": token})
        yield _sse(
            "result",
            {
                "answer": tokens.text,
                "finish_reason": tokens.finish_reason,
                "cited": [item.n for item in cited(tokens.text, result.context)],
                "timings": tokens.timings.to_dict(),
                "support": None if tokens.support is None else tokens.support.to_dict(),
                "result": shown(),
            },
        )
    except Exception as exc:
        code, message = failed_generation(exc, request_id)
        yield _sse(
            "error",
            {
                "error": code,
                "message": message,
                "request_id": request_id,
                "result": shown(),
            },
        )
    finally:
        await run_in_threadpool(tokens.close)
        release()
