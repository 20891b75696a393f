"""The outermost layer of every request: its id, the body's size and time limits, the access
log (with the name of the token that asked, never the token), and a 500 without a stack trace.

Plain ASGI rather than a Starlette `BaseHTTPMiddleware`, so streamed answers pass through
unbuffered and the body limit is enforced while the body arrives.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crag_edge.server.errors import error_body, shaped_for
from crag_edge.server.hangup import CLIENT_CLOSED, client_closed
from crag_edge.server.logs import request_id_var
from crag_edge.server.scopes import Principal
from crag_edge.server.state import ServerState

log = logging.getLogger("crag_edge.server")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")
# The methods of RFC 9110 and PATCH: any other name is "other" in the metrics, so a client
# cannot grow the label set (and /metrics) by inventing methods, signed in or not.
HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "DELETE", "CONNECT", "OPTIONS", "TRACE", "PATCH")


class RequestContext:
    """Request ids, the body size limit, JSON access logs, and a stack-trace-free 500."""

    def __init__(self, app: ASGIApp, state: ServerState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        given = headers.get("x-request-id", "")
        request_id = given if _REQUEST_ID.match(given) else uuid.uuid4().hex
        token = request_id_var.set(request_id)
        started = time.perf_counter()
        # The same dict as every inner layer's `request.state`: the auth check leaves the
        # caller's principal there for the access log.
        scope.setdefault("state", {})

        def observe_latency() -> None:
            seconds = time.perf_counter() - started
            self.state.metrics.latency.labels(_route(scope)).observe(seconds)

        response = _TrackedSend(send, request_id, observe_latency)
        try:
            await self._serve(scope, receive, headers, response)
        except Exception:
            log.exception("unhandled error", extra={"path": scope.get("path")})
            if not response.started:
                await _send_json(
                    scope,
                    response,
                    500,
                    error_body("internal_error", "internal server error; quote the request id"),
                )
        finally:
            self._log(scope, response.status, started)
            request_id_var.reset(token)

    async def _serve(
        self, scope: Scope, receive: Receive, headers: dict[str, str], send: Send
    ) -> None:
        """Read the body under the size limit (413 beyond it) and the time limit (408 beyond
        it: a client that stops sending mid-body would hold its connection for ever), then
        hand the request on."""
        limits = self.state.config.settings
        limit, timeout_s = limits.server_max_body_bytes, limits.server_read_timeout_s
        try:
            async with asyncio.timeout(timeout_s):
                body = await _read_body(receive, headers, limit)
        except TimeoutError:
            message = f"the request body did not arrive within {timeout_s:g} s"
            await _send_json(
                scope,
                send,
                408,
                error_body("request_timeout", message, read_timeout_s=timeout_s),
                close=True,
            )
            return
        if body is None:
            await _send_json(
                scope,
                send,
                413,
                error_body(
                    "body_too_large",
                    f"request body exceeds the limit of {limit} bytes",
                    max_body_bytes=limit,
                ),
            )
            return
        await self.app(scope, replay(body, receive), send)

    def _log(self, scope: Scope, status: int, started: float) -> None:
        """The access log line and the request metrics: a request whose client hung up
        before its answer was whole is a 499, whatever status its stream had begun with."""
        if client_closed(scope):
            status = CLIENT_CLOSED
        route = _route(scope)
        self.state.metrics.requests.labels(route, _method(scope), str(status)).inc()
        fields = {
            "method": scope["method"],
            "path": scope.get("path"),
            "route": route,
            "status": status,
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
            "client": (scope.get("client") or ("?",))[0],
        }
        principal = scope["state"].get("principal")
        if isinstance(principal, Principal) and principal.name is not None:
            fields["token_name"] = principal.name
        log.info("request", extra=fields)


class _TrackedSend:
    """`send` that adds the request id header and remembers whether, and with what status,
    the response started (500 until it does)."""

    def __init__(self, send: Send, request_id: str, on_start: Callable[[], None]) -> None:
        self._send = send
        self._request_id = request_id.encode()
        self._on_start = on_start
        self.status = 500
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            self.started = True
            message.setdefault("headers", [])
            message["headers"] = [*message["headers"], (b"x-request-id", self._request_id)]
            self._on_start()
        await self._send(message)


def _route(scope: Scope) -> str:
    """The matched route's template (`/v1/jobs/{job_id}`), never the path as sent."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


def _method(scope: Scope) -> str:
    method = str(scope["method"])
    return method if method in HTTP_METHODS else "other"


async def _read_body(receive: Receive, headers: dict[str, str], limit: int) -> bytes | None:
    """The whole request body, or None as soon as it is known to exceed `limit` bytes."""
    declared = headers.get("content-length")
    if declared is not None:
        try:
            if int(declared) > limit:
                return None
        except ValueError:
            return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` for an app after the body was read whole here: the body as one message,
    then whatever `receive` hears next (the hang-up, for one)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _send_json(
    scope: Scope, send: Send, status: int, body: dict[str, Any], close: bool = False
) -> None:
    """The error `body` as the whole JSON response, in the shape the route's callers read;
    `close` ends the connection after it (the rest of the request may never come)."""
    payload = json.dumps(shaped_for(scope["path"], body)).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    if close:
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
