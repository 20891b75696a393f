"""Error responses: one JSON shape for every failure, with the request id and no stack trace.

The details of an unexpected failure go to the JSON log line of that request id; the client
gets a stable `error` code and a message for people.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from crag_edge.server.logs import request_id_var


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


def error_body(code: str, message: str, **extra: Any) -> dict[str, Any]:
    return {"error": code, "message": message, "request_id": request_id_var.get(), **extra}


async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(
        error_body(exc.code, exc.message, **exc.extra), exc.status, headers=exc.headers
    )


async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
    fields = [
        {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))}
        for e in exc.errors()
    ]
    return JSONResponse(
        error_body("invalid_request", "the request does not match the schema", fields=fields),
        422,
    )


async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
    code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return JSONResponse(error_body(code, str(exc.detail)), exc.status_code, headers=exc.headers)


def install_error_handlers(app: FastAPI) -> None:
    """Our errors, schema mismatches and unknown routes all answer in the one JSON shape."""
    app.exception_handler(ApiError)(_api_error)
    app.exception_handler(RequestValidationError)(_invalid)
    app.exception_handler(StarletteHTTPException)(_http_error)
