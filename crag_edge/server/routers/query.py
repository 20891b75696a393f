"""Questions: the corrective loop's result as JSON, and the answer streamed as server-sent
events.

Both take a model slot (`server.deps.admitted`); a streamed answer keeps its slot until its
work has ended, which a client that goes away ends at once (`server.hangup`). A query needs
the `query` scope, an answer (which spends the shared LLM) `answer`; both search only the
documents the caller's groups may see.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Annotated, Any

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from crag_edge.cancellation import Cancellation, Cancelled
from crag_edge.config import RetrievalMode
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.result import CragResult
from crag_edge.server.config import ServerConfig
from crag_edge.server.deps import (
    PROTECTED,
    CallerDep,
    StateDep,
    acquire,
    admitted,
    requires,
)
from crag_edge.server.errors import ApiError, error_responses, failed_generation
from crag_edge.server.hangup import Emit, WorkStream, watched
from crag_edge.server.logs import request_id_var
from crag_edge.server.state import ServerState
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
async def query(
    body: QueryRequest, state: StateDep, caller: CallerDep, request: Request
) -> dict[str, Any]:
    """The corrective loop's result (CragResult JSON, as `crag-edge query --json`); a client
    that hangs up stops it (499)."""
    question = checked_question(body.question, state.config)
    engine = state.require_engine()
    async with admitted(state):
        result = await watched(
            request,
            lambda cancel: engine.query(
                question,
                mode=body.mode,
                top_k=body.top_k,
                view=caller.view,
                cancel=cancel,
            ),
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
async def answer(body: QueryRequest, state: StateDep, caller: CallerDep) -> WorkStream:
    """Server-sent events from the start: a `stage` event ({"stage", "status", "detail",
    "ms"}) as each stage of the loop starts and ends (retrieve, the grading tiers, each
    round's decision, each correction, refine, answer), then `token` events ({"text"}), then
    one `result` event: the finished answer, as every face gives it (`answer.finished`:
    verdict, `answer`, `finish_reason`, `note`, `refusal`, `citations`, `sources`,
    `support`, `timings`); `error` instead if the work fails (with the loop's `result`,
    CragResult, when it got that far). Each `token` event is a whole sentence that passed
    the support check. `finish_reason`: stop, length (cut at llm_max_tokens), timeout
    (stalled past llm_stall_timeout_s), insufficient_evidence (no model called) or
    unsupported (no sentence of the model's answer was stated by the passages: the answer is
    the insufficient-evidence reply). A client that hangs up stops the work wherever it is
    (499 in the log)."""
    question = checked_question(body.question, state.config)
    engine = state.require_engine()
    await acquire(state)
    ask = _Answering(engine, question, body, caller.view, state, request_id_var.get())
    return WorkStream(ask.run, state.admission.release)


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


@dataclass(frozen=True)
class _Answering:
    """One `/v1/answer`: the engine's work, written as events while it runs."""

    engine: Engine
    question: str
    body: QueryRequest
    view: CorpusView
    state: ServerState
    request_id: str | None

    def run(self, cancel: Cancellation, emit: Emit) -> None:
        """The stages, the sentences and the result as events; a failure as an `error` event
        (with the result when the loop had reached one)."""
        result: CragResult | None = None
        try:
            result, tokens = self.engine.answer(
                self.question,
                mode=self.body.mode,
                top_k=self.body.top_k,
                view=self.view,
                progress=lambda event: emit(_sse("stage", asdict(event))),
                cancel=cancel,
            )
            self.state.metrics.observe_result(result)
            try:
                for token in tokens:
                    emit(_sse("token", {"text": token}))
            finally:
                tokens.close()
            emit(_sse("result", self._shown(tokens.answer.to_dict())))
        except Cancelled:
            raise
        except Exception as exc:
            code, message = failed_generation(exc, self.request_id)
            failed = {"error": code, "message": message, "request_id": self.request_id}
            reached = {"result": self._shown(result.to_dict())} if result else {}
            emit(_sse("error", failed | reached))

    def _shown(self, data: dict[str, Any]) -> dict[str, Any]:
        """`data` as this caller may see it (`server.caller_view`)."""
        shown: dict[str, Any] = self.state.view.shown(data, self.view.groups)
        return shown
