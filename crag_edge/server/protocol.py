"""HTTP/1.1 for the service: uvicorn's h11 protocol with a deadline on each request's head.

uvicorn closes a connection idle between requests, but not one that was opened and never
sent a whole request head (nothing, or headers a byte a minute): each such connection would
stay open for ever, and enough of them exhaust the server's sockets. The request body has its
deadline in `server.middleware`; the head, which arrives before any ASGI code runs, has it
here. Both are `read_timeout_s`.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from crag_edge.server.config import ServerConfig


def http_protocol(config: ServerConfig) -> type[asyncio.Protocol]:
    """The protocol class to hand uvicorn (`uvicorn.Config(http=...)`) for `config`."""
    timeout_s = config.settings.server_read_timeout_s

    class DeadlineProtocol(H11Protocol):
        """Closes the connection when no request head has arrived `timeout_s` after it opened
        or after the last response, unless uvicorn closed it first."""

        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._await_head()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._await_head()

        def connection_lost(self, exc: Exception | None) -> None:
            self._stop_waiting()
            super().connection_lost(exc)

        def _await_head(self) -> None:
            self._stop_waiting()
            self._head_timer = self.loop.call_later(timeout_s, self._head_late)

        def _stop_waiting(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_late(self) -> None:
            """h11 is IDLE on the client's side until a whole head has arrived."""
            self._head_timer = None
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self.transport.close()

    return DeadlineProtocol
