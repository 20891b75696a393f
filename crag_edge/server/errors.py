"""Error responses: one JSON shape for every failure, with the request id and no stack trace.

The details of an unexpected failure go to the JSON log line of that request id; the client
gets a stable `error` code and a message for people.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from starlette.exceptions import HTTPException as StarletteHTTPException

from crag_edge.models.chat_model import LlmCallError, LlmServerError
from crag_edge.models.llm import LlmUnavailableError
from crag_edge.server.logs import request_id_var
from crag_edge.store.errors import CorpusBusyError, CorpusError, StorageError

log = logging.getLogger("crag_edge.server")
# Corpus failures that pass on their own (the database back, the writer done): worth a retry.
_TRANSIENT = (StorageError, CorpusBusyError)
CORPUS_RETRY_AFTER_S = 5
# The LLM failing in a way its message explains: a prompt too long for its context, a server
# that is down or unfit, llama-cpp-python missing. A setting or another process is the cause.
LLM_FAILURES = (LlmCallError, LlmServerError, LlmUnavailableError)


class ApiError(Exception):
    """An expected failure with an HTTP status, a stable error code and a message for people."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        headers: dict[str, str] | None = None,
        **extra: Any,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.headers = headers or {}
        self.extra = extra


class ErrorBody(BaseModel):
    """The body of every error response (the OpenAPI schema's, too); some codes add fields:
    `fields` (invalid_request), `max_body_bytes`, `read_timeout_s`, `max_question_chars`,
    `needed_scope` (insufficient_scope), `reason` and `retry_after_s` (overloaded)."""

    model_config = ConfigDict(extra="allow")
    error: str = Field(description="A stable code: unauthorized, invalid_request, overloaded...")
    message: str = Field(description="What went wrong, for people.")
    request_id: str | None = Field(description="Quote it: the server's log line has the rest.")


class OpenAiError(BaseModel):
    """The error as OpenAI's API gives it, where its client libraries read the message."""

    model_config = ConfigDict(extra="allow")
    message: str = Field(description="What went wrong, for people.")
    type: str = Field(description="The stable code, as `code`.")
    code: str = Field(description="A stable code: unauthorized, model_not_found...")


class OpenAiErrorBody(BaseModel):
    """The error body of the OpenAI-compatible routes: `ErrorBody` with `error` an object in
    OpenAI's shape (an OpenAI client shows `error.message`; a string there, it shows only the
    status)."""

    model_config = ConfigDict(extra="allow")
    error: OpenAiError
    message: str = Field(description="What went wrong, for people.")
    request_id: str | None = Field(description="Quote it: the server's log line has the rest.")


# The routes of the OpenAI-compatible API (`routers.openai_api`), whose errors take its shape.
OPENAI_PATHS = frozenset({"/v1/models", "/v1/chat/completions"})
# The MCP endpoint (`routers.mcp`), whose errors are JSON-RPC errors; the request id is not
# known where they are made (an MCP client answers them for the request it sent).
MCP_PATH = "/mcp"
JSONRPC_INVALID_REQUEST = -32600

_MEANINGS = {
    400: "The body could not be read (not UTF-8, or not valid JSON).",
    401: "No live bearer token (when the service has any).",
    403: "The token's scope is below the route's (insufficient_scope), or a path outside "
    "the ingest roots (or ingest by path disabled).",
    404: "No such resource.",
    408: "The body did not arrive within the server's read_timeout_s.",
    413: "The body exceeds the server's max_body_bytes.",
    415: "The body was not sent as JSON (Content-Type: application/json).",
    422: "The request does not match the schema, or exceeds a limit of this server.",
    503: "Models still loading or failed to load, the service at capacity (Retry-After), "
    "the token file unreadable (auth_unavailable), or the corpus unusable "
    "(corpus_unavailable: its database lost, its file locked, damaged or replaced).",
}


def error_responses(
    *statuses: int, model: type[BaseModel] = ErrorBody
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` for the error statuses a route can answer, each with `model`."""
    return {status: {"model": model, "description": _MEANINGS[status]} for status in statuses}


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, "request_id": request_id_var.get(), **extra}


def shaped_for(path: str, body: dict[str, Any]) -> dict[str, Any]:
    """`body` as the client of `path` reads it, its message where that client shows one: on
    the OpenAI-compatible routes `error` is OpenAI's object (`message`, `type`, `code`), at
    `/mcp` a JSON-RPC error (`message`, the code in `data`); `message`, `request_id` and any
    other field stay beside it."""
    code, message = body["error"], body["message"]
    if path in OPENAI_PATHS:
        return body | {"error": {"message": message, "type": code, "code": code}}
    if path == MCP_PATH:
        error = {"code": JSONRPC_INVALID_REQUEST, "message": message, "data": {"code": code}}
        return body | {"jsonrpc": "2.0", "id": None, "error": error}
    return body


def _respond(
    request: Request, status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse(shaped_for(request.url.path, body), status, headers=headers)


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return _respond(
        request, exc.status, error_body(exc.code, exc.message, **exc.extra), exc.headers
    )


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    """A schema mismatch (422); or, when the body itself is at fault, a body sent as something
    other than JSON (415: `curl -d` sends a form unless told otherwise) or JSON that does not
    parse (400), each with a message saying so instead of a field error."""
    errors = exc.errors()
    about_body = [e for e in errors if tuple(e.get("loc", ()))[:1] == ("body",)]
    if about_body and not _sent_as_json(request):
        sent = request.headers.get("content-type") or "none"
        message = f"send the body as JSON with Content-Type: application/json (got: {sent})"
        return _respond(request, 415, error_body("unsupported_media_type", message))
    broken = next((e for e in about_body if e.get("type") == "json_invalid"), None)
    if broken is not None:
        reason = str(broken.get("ctx", {}).get("error", "JSON decode error"))
        at = broken["loc"][1] if len(broken["loc"]) > 1 else 0
        message = f"the body is not valid JSON: {reason} at character {at}"
        return _respond(request, 400, error_body("bad_request", message))
    fields = [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))} for e in errors
    ]
    return _respond(
        request,
        422,
        error_body("invalid_request", "the request does not match the schema", fields=fields),
    )


def _sent_as_json(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed"}
    code = codes.get(exc.status_code, "http_error")
    message = _unreadable_json(exc.__cause__) or str(exc.detail)
    return _respond(request, exc.status_code, error_body(code, message), exc.headers)


def _unreadable_json(cause: BaseException | None) -> str | None:
    """Why the JSON parser gave up on a body, which FastAPI reports only as "There was an
    error parsing the body": bytes that are not UTF-8, nesting beyond the parser's recursion
    limit, or an integer beyond Python's digit limit. None for any other failure."""
    prefix = "the body is not valid JSON: "
    if isinstance(cause, UnicodeDecodeError):
        byte = cause.object[cause.start]
        return f"{prefix}byte 0x{byte:02x} at character {cause.start} is not UTF-8"
    if isinstance(cause, RecursionError):
        return f"{prefix}nested too deeply"
    if isinstance(cause, ValueError) and "integer string conversion" in str(cause):
        return f"{prefix}a number of more than {sys.get_int_max_str_digits()} digits"
    return None


async def _corpus_error(request: Request, exc: CorpusError) -> JSONResponse:
    """The corpus failed under a request (the store's errors name it, a URL without its
    password): 503 saying what the store said, logged without a stack trace, since the
    cause is outside the service; with Retry-After when it may pass on its own."""
    log.warning("corpus unavailable", extra={"path": request.url.path, "reason": str(exc)})
    retry = {"Retry-After": str(CORPUS_RETRY_AFTER_S)} if isinstance(exc, _TRANSIENT) else {}
    return _respond(request, 503, error_body("corpus_unavailable", str(exc)), retry)


def llm_failure(exc: Exception) -> tuple[int, str]:
    """The status and code of one of `LLM_FAILURES`: a call that failed is the server's own
    failure (500), a model or server that cannot serve at all is unavailable (503)."""
    return (500, "llm_call_failed") if isinstance(exc, LlmCallError) else (503, "llm_unavailable")


def failed_generation(exc: Exception, request_id: str | None) -> tuple[str, str]:
    """The (code, message) of an answer that failed after its stream began, and its log line:
    one of `LLM_FAILURES`, or the corpus failing, says what its message says (no stack trace:
    the cause is outside the code); anything else is a bug, logged with its stack trace. Call
    it inside `except`."""
    if isinstance(exc, (*LLM_FAILURES, CorpusError)):
        log.warning(
            "answer generation failed", extra={"request_id": request_id, "reason": str(exc)}
        )
        code = "corpus_unavailable" if isinstance(exc, CorpusError) else llm_failure(exc)[1]
        return code, str(exc)
    log.exception("answer generation failed", extra={"request_id": request_id})
    return "generation_failed", "the answer could not be generated; quote the request id"


async def _llm_error(request: Request, exc: Exception) -> JSONResponse:
    """An LLM failure under a whole (not streamed) answer: its message, not an anonymous 500."""
    log.warning("llm failed", extra={"path": request.url.path, "reason": str(exc)})
    status, code = llm_failure(exc)
    return _respond(request, status, error_body(code, str(exc)))


def install_error_handlers(app: FastAPI) -> None:
    """Our errors, the corpus's, schema mismatches and unknown routes all answer in the one
    JSON shape."""
    app.exception_handler(ApiError)(_api_error)
    app.exception_handler(CorpusError)(_corpus_error)
    for failure in LLM_FAILURES:
        app.exception_handler(failure)(_llm_error)
    app.exception_handler(RequestValidationError)(_invalid)
    app.exception_handler(StarletteHTTPException)(_http_error)
