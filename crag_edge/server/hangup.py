"""A client that hangs up takes its work with it: the model slot is free again within a stage
or a token, and the request is logged (and counted in the metrics) as 499.

Model work runs on a worker thread under a `Cancellation` (`crag_edge.cancellation`), while
the event loop listens for the client's `http.disconnect`; hearing it cancels the work, which
stops at its next check. Two shapes of response use it:

- `watched`: a whole response (a query, a whole chat completion); the handler waits for the
  work, and a hang-up makes it a 499 instead of an answer nobody reads.
- `WorkStream`: server-sent events the work writes as it goes (an answer's stages and
  sentences). The stream starts at once, so a client sees the work move from the first stage
  on; the slot is released when the work's thread has left the engine, however it ended.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, MutableMapping
from contextlib import suppress
from typing import Any, TypeVar, cast

import anyio
from fastapi import Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from crag_edge.cancellation import Cancellation, Cancelled
from crag_edge.server.errors import ApiError

T = TypeVar("T")
# nginx's status for a request whose client closed the connection before the answer.
CLIENT_CLOSED = 499
_CLOSED_KEY = "client_closed"
GONE = "the client went away"
# Work on a thread hands the stream its next event with this (any thread may call it).
Emit = Callable[[str], None]


def mark_closed(state: MutableMapping[str, Any]) -> None:
    """Record on the request's state (`scope["state"]`) that its client hung up."""
    state[_CLOSED_KEY] = True


def client_closed(scope: Scope) -> bool:
    """Whether the client of this request hung up before its answer was whole."""
    return bool(scope.get("state", {}).get(_CLOSED_KEY))


async def _hung_up(receive: Receive) -> None:
    """Return once the client has hung up (the request body was read already)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def watched(request: Request, work: Callable[[Cancellation], T]) -> T:
    """`work` on a worker thread, cancelled when the client hangs up meanwhile: 499 then."""
    cancel = Cancellation()

    async def listen() -> None:
        await _hung_up(request.receive)
        cancel.cancel(GONE)

    error: Exception | None = None
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(listen)
        try:
            value = await run_in_threadpool(work, cancel)
        except Exception as exc:  # raised below, outside the task group
            error = exc
        tasks.cancel_scope.cancel()
    if isinstance(error, Cancelled):
        mark_closed(request.scope.setdefault("state", {}))
        raise ApiError(CLIENT_CLOSED, "client_closed", "the client went away before the answer")
    if error is not None:
        raise error
    return cast(T, value)


class WorkStream(Response):
    """Server-sent events that `work(cancel, emit)` writes on a thread of its own; `release`
    runs on the event loop once that thread has ended. A client that hangs up cancels the
    work and its request is logged as 499."""

    media_type = "text/event-stream"

    def __init__(
        self, work: Callable[[Cancellation, Emit], None], release: Callable[[], None]
    ) -> None:
        self.status_code = 200
        self.background = None
        self.init_headers({"Cache-Control": "no-store", "X-Accel-Buffering": "no"})
        self._work, self._release = work, release
        self.cancel = Cancellation()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        queue: asyncio.Queue[str | None] = asyncio.Queue()
        self._start(asyncio.get_running_loop(), queue)
        finished = False
        async with anyio.create_task_group() as tasks:

            async def listen() -> None:
                await _hung_up(receive)
                if not finished:  # after the last event, a disconnect is the normal end
                    self.cancel.cancel(GONE)
                    mark_closed(scope.setdefault("state", {}))
                    tasks.cancel_scope.cancel()

            tasks.start_soon(listen)
            try:
                await self._send_events(send, queue)
                finished = True
                await send({"type": "http.response.body", "body": b"", "more_body": False})
            except OSError:  # a send to a client that has gone
                mark_closed(scope.setdefault("state", {}))
            finally:
                self.cancel.cancel(GONE)  # a no-op once the work has ended
            tasks.cancel_scope.cancel()

    async def _send_events(self, send: Send, queue: asyncio.Queue[str | None]) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
        while (event := await queue.get()) is not None:
            await send({"type": "http.response.body", "body": event.encode(), "more_body": True})

    def _start(self, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[str | None]) -> None:
        """Run the work on its thread, in the request's context (its id for the logs)."""

        def on_loop(call: Callable[..., None], *args: Any) -> None:
            with suppress(RuntimeError):  # the loop has closed: the server is gone too
                loop.call_soon_threadsafe(call, *args)

        def run() -> None:
            try:
                self._work(self.cancel, lambda event: on_loop(queue.put_nowait, event))
            except Cancelled:
                pass
            finally:
                on_loop(queue.put_nowait, None)
                on_loop(self._release)

        context = contextvars.copy_context()
        worker = threading.Thread(target=context.run, args=(run,), name="crag-edge work")
        worker.daemon = True
        worker.start()
