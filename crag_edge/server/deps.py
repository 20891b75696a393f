"""What every router shares: the server's state, the bearer-token check, and admission.

A router declares `dependencies=AUTH` on its protected routes, takes `state: StateDep` to reach
the engine (`state.require_engine()`), the jobs and the metrics, and runs model work inside
`admitted(state)` (or `await acquire(state)` for work that outlives the handler).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from crag_edge.server.admission import Overloaded
from crag_edge.server.errors import ApiError
from crag_edge.server.security import token_matches
from crag_edge.server.state import ServerState


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


StateDep = Annotated[ServerState, Depends(server_state)]


def authorized(request: Request) -> None:
    """401 unless the configured bearer token (if any) is given."""
    token = server_state(request).config.api_token
    if token and not token_matches(request.headers.get("authorization"), token):
        raise ApiError(
            401,
            "unauthorized",
            "a valid bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )


# Declares the bearer scheme in the OpenAPI schema; `authorized` does the checking.
_BEARER = HTTPBearer(
    auto_error=False, description="The service's API token (CRAG_EDGE_API_TOKEN), if it has one."
)


def _bearer_authorized(
    request: Request, _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)]
) -> None:
    authorized(request)


AUTH: list[Any] = [Depends(_bearer_authorized)]


def _overloaded(state: ServerState, exc: Overloaded) -> ApiError:
    state.metrics.rejected.labels(exc.reason).inc()
    retry_after_s = state.config.retry_after_s
    return ApiError(
        503,
        "overloaded",
        "the server is at capacity; retry later",
        headers={"Retry-After": str(retry_after_s)},
        reason=exc.reason,
        retry_after_s=retry_after_s,
    )


@asynccontextmanager
async def admitted(state: ServerState) -> AsyncIterator[None]:
    """Run the body on a model slot; 503 with Retry-After when the server is at capacity."""
    try:
        async with state.admission.slot():
            yield
    except Overloaded as exc:
        raise _overloaded(state, exc) from None


async def acquire(state: ServerState) -> None:
    """Take a model slot the caller releases (`state.admission.release`); 503 when full."""
    try:
        await state.admission.acquire()
    except Overloaded as exc:
        raise _overloaded(state, exc) from None


class ReleaseOnce:
    """Call `fn` at most once, from whichever of a stream's end or its cleanup comes first:
    the admission slot of a streamed answer is released exactly once."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Callable[[], None] | None = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()
