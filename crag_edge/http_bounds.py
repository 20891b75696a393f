"""Bounds for one HTTP exchange with a server crag-edge does not control: a size for its
reply, and a deadline for the whole exchange, which httpx does not have.

A URL's user and password are kept out of every message (`split_credentials`). A reply is
read up to a cap (`read_capped`), counted after decompression, so neither a huge body nor a
small gzip bomb can fill the memory.

httpx bounds each phase and each read, so a server that sends one byte a second (of its
status line, its headers or its body) never trips a timeout and holds the caller as long as
it likes. A `Watchdog` learns the exchange's socket from httpx's `trace` request extension
and shuts it down when the deadline passes: the read that is waiting ends at once, with an
error the caller reports as out of time (`expired` tells the two apart). Only a connection
the request opens can be watched, so a client that uses a watchdog keeps none idle.
"""

from __future__ import annotations

import contextlib
import math
import socket
import threading
import time
from typing import Any, Self

import httpx

from crag_edge.cancellation import current as current_cancellation
from crag_edge.types import Closing

# How often a watchdog over cancellable work looks whether it was cancelled.
CANCEL_POLL_S = 0.25
# The trace events after which a connection's socket is known (plain, then with TLS).
_OPENED = ("connect_tcp.complete", "start_tls.complete")


class Watchdog(Closing):
    """Cuts the connection of the requests sent with `extensions` once `seconds` pass
    (`postpone` moves the deadline on, e.g. for each piece of a stream). Use it as a context
    manager around the exchange."""

    def __init__(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds
        self._socket: socket.socket | None = None
        self._finished = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._watch, name="crag-http-deadline", daemon=True)
        self._cancel = current_cancellation()  # the work this exchange serves, if cancellable
        self.expired = False

    @property
    def extensions(self) -> dict[str, Any]:
        """Request extensions that show this watchdog the connection the request opens."""
        return {"trace": self._trace}

    def postpone(self, seconds: float) -> None:
        """The deadline becomes `seconds` from now."""
        with self._wake:
            self._deadline = time.monotonic() + seconds
            self._wake.notify()

    def pause(self) -> None:
        """No deadline until the next `postpone`: while the caller, not the server, is slow
        (a stream's reader busy with the last piece)."""
        with self._wake:
            self._deadline = math.inf

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def close(self) -> None:
        """The exchange is over: the watch ends, and nothing is cut after this returns."""
        with self._wake:
            self._finished = True
            self._wake.notify()
        self._thread.join()

    def _trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore reports each connection it opens, and its TLS layer (a new socket: the
        plain one is detached from the connection); the latest socket is what can be cut."""
        if event.endswith(_OPENED) and info.get("return_value") is not None:
            with self._wake:
                self._socket = info["return_value"].get_extra_info("socket")
                if self.expired:
                    self._cut()

    def _watch(self) -> None:
        """Cut at the deadline, or as soon as the work the exchange serves is cancelled (seen
        within `CANCEL_POLL_S`): a cut reads as out of time, and the work's next check stops
        it."""
        with self._wake:
            while not self._finished:
                left = self._deadline - time.monotonic()
                if left <= 0 or (self._cancel is not None and self._cancel.cancelled):
                    self.expired = True
                    self._cut()
                    return
                if self._cancel is not None:
                    left = min(left, CANCEL_POLL_S)
                self._wake.wait(None if left == math.inf else left)

    def _cut(self) -> None:
        """Shut the socket down (both ways): a blocked read returns at once, unlike `close`."""
        if self._socket is None:
            return
        with contextlib.suppress(OSError):  # already closed: nothing left to cut
            self._socket.shutdown(socket.SHUT_RDWR)


def read_capped(response: httpx.Response, limit: int) -> bytes:
    """The whole (decompressed) body of `response`, or, once it exceeds `limit` bytes, what
    was read by then: the caller tells the two apart by the length."""
    body = bytearray()
    for piece in response.iter_bytes():
        body += piece
        if len(body) > limit:
            break
    return bytes(body)


def split_credentials(url: str) -> tuple[str, httpx.BasicAuth | None]:
    """`url` without the user and password it may carry, and those as HTTP basic auth (what
    httpx would send for them). A server's URL is quoted in errors that reach results, logs
    and API clients: its password must not be."""
    parsed = httpx.URL(url)
    if not parsed.userinfo:
        return url, None
    bare = str(parsed.copy_with(username=None, password=None))
    return bare, httpx.BasicAuth(parsed.username, parsed.password)
