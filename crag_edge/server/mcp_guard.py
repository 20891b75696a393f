"""What stands between `/mcp` and the MCP SDK's transport: the request's id, the shape of the
transport's refusals, and whether the client is still there.

- A JSON-RPC batch (an array) gets a short "Invalid Request" error, never the transport's
  validation dump, which echoes the input.
- A JSON-RPC request whose id is neither a string nor an integer (an object, null, a boolean,
  a float), or that has no id while its method is not a notification, gets a JSON-RPC
  "Invalid Request" error; the SDK would answer it 202 with an empty body, as a notification,
  and never run it.
- The SDK refuses a wrong Content-Type, Host or Origin, an Accept it cannot serve or a body it
  cannot parse with plain text or a bare JSON-RPC error; each becomes the service's error
  shape (`server.errors.shaped_for`: the JSON-RPC error with the code in `data`, and the
  request id), keeping the status and the SDK's message.
- The body is read here whole (the service caps its size first), so the connection is then
  watched: when the client hangs up, `client_gone` is cancelled, so the tool's work stops at
  its next stage or token (`server.mcp`), and the request is logged as 499.
"""

from __future__ import annotations

import json
from contextvars import ContextVar
from typing import Any

import anyio
from starlette.types import ASGIApp, Message, Receive, Send
from starlette.types import Scope as AsgiScope

from crag_edge.cancellation import Cancellation
from crag_edge.server.errors import MCP_PATH, ApiError, error_body, shaped_for
from crag_edge.server.hangup import GONE, mark_closed
from crag_edge.server.middleware import replay

# Set by `guarded` for the request being served; the MCP tools' tasks copy it.
client_gone: ContextVar[Cancellation | None] = ContextVar("crag_edge_mcp_gone", default=None)
# A JSON-RPC batch: the transport's own answer is a validation dump that echoes the input.
BATCH = "JSON-RPC batches are not supported: send one request per POST"
_CODES = {
    400: "bad_request",
    403: "forbidden",
    404: "not_found",
    406: "not_acceptable",
    413: "payload_too_large",
    415: "unsupported_media_type",
    421: "misdirected_request",
}


async def guarded(app: ASGIApp, scope: AsgiScope, receive: Receive, send: Send) -> None:
    """Run `app` on the whole body, after the id check, with its refusals reshaped."""
    body = await _read_body(receive)
    _check_id(body)
    gone = Cancellation()
    client_gone.set(gone)
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(_watch, receive, gone, scope)
        await app(scope, replay(body, _nothing_more), _Reshaped(send))
        tasks.cancel_scope.cancel()


async def _nothing_more() -> Message:
    """What the app hears after the body: nothing, ever; `_watch` hears the hang-up, since
    one `receive` cannot serve two listeners."""
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def _read_body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ApiError(400, "bad_request", "the client went away before its body arrived")
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _watch(receive: Receive, gone: Cancellation, scope: AsgiScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass
    gone.cancel(GONE)
    mark_closed(scope.setdefault("state", {}))


def _check_id(body: bytes) -> None:
    """400 invalid_request for a batch, or a request (not a notification) without a usable
    id."""
    try:
        message = json.loads(body)
    except ValueError:
        return  # the SDK answers a parse error itself
    if isinstance(message, list):
        raise ApiError(400, "invalid_request", BATCH)
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return
    if "id" not in message:
        if message["method"].startswith("notifications/"):
            return
        reason = f"{message['method']} is a request: give it an id (a string or an integer)"
    elif isinstance(message["id"], bool) or not isinstance(message["id"], str | int):
        reason = "the request id must be a string or an integer"
    else:
        return
    raise ApiError(400, "invalid_request", reason)


class _Reshaped:
    """The `send` of the SDK's response: an error status in the service's error shape."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._status: int | None = None
        self._body: list[bytes] = []

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] >= 400:
            self._status = message["status"]
            return
        if self._status is None or message["type"] != "http.response.body":
            await self._send(message)
            return
        self._body.append(message.get("body", b""))
        if not message.get("more_body", False):
            await self._send_error(self._status, b"".join(self._body))

    async def _send_error(self, status: int, raw: bytes) -> None:
        code = _CODES.get(status, "http_error")
        body = shaped_for(MCP_PATH, error_body(code, _message(raw, status)))
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(data)))]
        await self._send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k, v.encode() if isinstance(v, str) else v) for k, v in headers],
            }
        )
        await self._send({"type": "http.response.body", "body": data})


def _message(raw: bytes, status: int) -> str:
    """The SDK's own words: its JSON-RPC error's message, or its plain text."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        parsed: Any = json.loads(text)
    except ValueError:
        return text or f"refused with status {status}"
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        return str(error["message"])
    return text
