"""The OpenAI chat-completions API, so chat front ends (Open WebUI and its peers) can talk to
the corpus: `GET /v1/models` lists it as one model, `crag-edge:<corpus name>`, and
`POST /v1/chat/completions` answers, whole or streamed as `chat.completion.chunk` events
ending with `data: [DONE]`.

The last user message is the question and the earlier user and assistant messages are the
conversation it may follow up on (system messages are ignored: the answer prompt is
crag-edge's own). The answer cites its evidence as [n] and lists the cited sources at its
end, for front ends that read only the text; a `crag` object beside `choices` (on the last
chunk when streaming) is the finished answer as every face gives it (`answer.finished`): the
verdict, the follow-up rewrite, the citations, every numbered source, the support check.
Sampling options (temperature, max_tokens, ...) are accepted and ignored: the service's
settings decide them. Listing the model needs the `query` scope, a completion `answer`; the
answer draws only on the documents the caller's groups may see.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from crag_edge.answer.finished import Answer, AnswerStream
from crag_edge.answer.generation import AnswerFinish, source_line
from crag_edge.cancellation import Cancellation, Cancelled
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.models.llm import Message
from crag_edge.result import CragResult
from crag_edge.server.deps import CallerDep, StateDep, acquire, admitted, requires
from crag_edge.server.errors import (
    ApiError,
    OpenAiErrorBody,
    error_responses,
    failed_generation,
)
from crag_edge.server.hangup import Emit, WorkStream, watched
from crag_edge.server.logs import request_id_var
from crag_edge.server.routers.query import checked_question
from crag_edge.server.state import ServerState

router = APIRouter(tags=["openai"], responses=error_responses(401, 403, 503, model=OpenAiErrorBody))


# OpenAI clients send fields this API does not use (names, tool calls, sampling options):
# accepted and ignored (extra="allow"); the fields it reads are checked, strictly typed.
class ContentPart(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str = Field(description="Only `text` parts are read; others (images) are ignored.")
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str = Field(description="system, user or assistant (others are ignored).")
    content: str | list[ContentPart] | None = Field(
        None, description="Text, or a list of content parts of which the text parts are read."
    )


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = Field(description="The corpus's model id, as `GET /v1/models` lists it.")
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = Field(False, strict=True)


def model_id(state: ServerState) -> str:
    return f"crag-edge:{state.config.corpus_name}"


@router.get("/v1/models", dependencies=requires("query"))
async def models(state: StateDep) -> dict[str, Any]:
    """The corpus, as the one model a chat front end can pick."""
    try:
        created = int(Path(state.config.db).stat().st_mtime)  # a database URL: no file, 0
    except OSError:
        created = 0
    entry = {"id": model_id(state), "object": "model", "created": created, "owned_by": "crag-edge"}
    return {"object": "list", "data": [entry]}


@router.post(
    "/v1/chat/completions",
    dependencies=requires("answer"),
    response_model=None,
    responses=error_responses(400, 404, 408, 413, 415, 422, 503, model=OpenAiErrorBody),
)
async def chat_completions(
    body: ChatRequest, state: StateDep, caller: CallerDep, request: Request
) -> JSONResponse | WorkStream:
    """The answer to the last user message, from the corpus's graded evidence only."""
    if body.model != model_id(state):
        raise ApiError(
            404,
            "model_not_found",
            f"no model {body.model!r}; this server serves {model_id(state)!r} (GET /v1/models)",
        )
    question, history = _conversation(body, state)
    engine = state.require_engine()
    ask = _Ask(question, history, caller.view)
    if body.stream:
        await acquire(state)
        streamed = _StreamedReply(model_id(state), engine, ask, state)
        return WorkStream(streamed.run, state.admission.release)
    async with admitted(state):
        answer = await watched(request, lambda cancel: ask.whole(engine, cancel))
    state.metrics.observe_result(answer.result)
    return JSONResponse(_Reply(model_id(state)).completion(answer))


def _conversation(body: ChatRequest, state: ServerState) -> tuple[str, list[Message]]:
    """(question, earlier turns): the last message must be the user's."""
    if body.messages[-1].role != "user":
        raise ApiError(422, "invalid_messages", "the last message must be the user's question")
    turns = [(m.role, _text(m.content)) for m in body.messages if m.role in ("user", "assistant")]
    question = checked_question(turns[-1][1], state.config)
    return question, [{"role": role, "content": text} for role, text in turns[:-1]]


def _text(content: str | list[ContentPart] | None) -> str:
    if isinstance(content, list):
        return "\n".join(p.text or "" for p in content if p.type == "text")
    return content or ""


@dataclass(frozen=True)
class _Ask:
    """The question, the turns before it, and what the caller asking it may see."""

    question: str
    history: list[Message]
    view: CorpusView

    def answer(self, engine: Engine, cancel: Cancellation) -> tuple[CragResult, AnswerStream]:
        return engine.answer(self.question, history=self.history, view=self.view, cancel=cancel)

    def whole(self, engine: Engine, cancel: Cancellation) -> Answer:
        """The answer read to its end (a whole completion)."""
        _, tokens = self.answer(engine, cancel)
        try:
            for _piece in tokens:
                pass
        finally:
            tokens.close()
        return tokens.answer


@dataclass(frozen=True)
class _StreamedReply:
    """A streamed completion: chunks as the model writes, the model slot held until the work
    ends (`server.hangup.WorkStream`)."""

    model: str
    engine: Engine
    ask: _Ask
    state: ServerState

    def run(self, cancel: Cancellation, emit: Emit) -> None:
        """The chunks, or an `error` chunk in OpenAI's shape when the work fails."""
        try:
            self._chunks(cancel, emit)
        except Cancelled:
            raise
        except Exception as exc:
            request_id = request_id_var.get()
            code, message = failed_generation(exc, request_id)
            emit(_event({"error": {"message": message, "type": code, "request_id": request_id}}))

    def _chunks(self, cancel: Cancellation, emit: Emit) -> None:
        result, tokens = self.ask.answer(self.engine, cancel)
        self.state.metrics.observe_result(result)
        reply = _Reply(self.model)
        try:
            emit(_event(reply.chunk({"role": "assistant", "content": ""})))
            for token in tokens:
                emit(_event(reply.chunk({"content": token})))
        finally:
            tokens.close()
        answer = tokens.answer
        tail = reply.tail(answer)
        if tail:
            emit(_event(reply.chunk({"content": tail})))
        emit(_event(reply.chunk({}, _finish(answer.finish_reason), crag=answer.to_dict())))
        emit("data: [DONE]\n\n")


def _event(data: dict[str, Any]) -> str:
    return f"data: {json.dumps(data, ensure_ascii=False)}\n\n"


def _finish(finish: AnswerFinish) -> str:
    """OpenAI's finish reasons: a cut-off or stalled answer is `length`, any other `stop`
    (the exact reason is in `crag.finish_reason`)."""
    return "length" if finish in ("length", "timeout") else "stop"


class _Reply:
    """One answer in the OpenAI shapes: its id, its tail of sources, the `crag` object (the
    finished answer's own shape, `answer.finished`)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.request_id = request_id_var.get()
        self.id = f"chatcmpl-{self.request_id or uuid.uuid4().hex}"
        self.created = int(time.time())

    def tail(self, answer: Answer) -> str:
        """The cited sources, one a line, each followed by the rows, slides or pages of it
        its sentences were found in; where to go next when nothing was found or stated (the
        passages found, by their places), or a note when the answer was stopped."""
        lines = []
        for citation in answer.citations:
            lines.append(source_line(citation.item))
            lines += [f"    {place.locator}: {place.claim}" for place in citation.places]
        tail = "\n\nSources:\n" + "\n".join(lines) if lines else ""
        refused = answer.refusal
        if refused is None:
            return tail
        if refused.kind == "stopped":
            return f"{tail}\n\n({refused.note})"
        return f"{tail}\n\n" + "\n".join(refused.lines())

    def chunk(
        self, delta: dict[str, Any], finish: str | None = None, **extra: Any
    ) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return self._envelope("chat.completion.chunk", choice) | extra

    def completion(self, answer: Answer) -> dict[str, Any]:
        message = {"role": "assistant", "content": answer.text + self.tail(answer)}
        choice = {"index": 0, "message": message, "finish_reason": _finish(answer.finish_reason)}
        return self._envelope("chat.completion", choice) | {"crag": answer.to_dict()}

    def _envelope(self, kind: str, choice: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.model,
            "choices": [choice],
        }
