"""What every router shares: the server's state, the caller and its scope, and admission.

A router's protected routes declare the scope they need, `dependencies=requires("query")`
(the ladder is in `server.scopes`), and document what the token check can answer,
`responses=PROTECTED`; a handler that hands the caller's groups to the engine
takes `caller: CallerDep`. Handlers reach the engine through `state: StateDep`
(`state.require_engine()`), the jobs and the metrics, and run model work inside
`admitted(state)` (or `await acquire(state)` for work that outlives the handler).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Annotated, Any

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from crag_edge.observability import audit_context
from crag_edge.server.admission import Overloaded
from crag_edge.server.errors import ApiError, error_responses
from crag_edge.server.scopes import LOCAL_OWNER, Principal, Scope
from crag_edge.server.security import bearer_secret
from crag_edge.server.state import ServerState
from crag_edge.server.tokens import TokenError

log = logging.getLogger("crag_edge.server")
# The caller of the request being served, for work the handler does not call directly: the
# MCP tools run in tasks of the MCP session manager, started from (and copying) this context.
caller_var: ContextVar[Principal | None] = ContextVar("crag_edge_caller", default=None)


def server_state(request: Request) -> ServerState:
    state: ServerState = request.app.state.server
    return state


StateDep = Annotated[ServerState, Depends(server_state)]


async def authenticate(request: Request) -> Principal:
    """The caller, found once per request: the local owner of a service without tokens, else
    the principal of the bearer token (401 without a live one). It is kept on
    `request.state.principal` for the access log, and its name in the audit context."""
    known = getattr(request.state, "principal", None)
    if isinstance(known, Principal):
        return known
    state = server_state(request)
    if state.authenticator.required:
        principal = await _token_principal(state, _authorization(request))
    else:
        principal = LOCAL_OWNER
    request.state.principal = principal
    caller_var.set(principal)
    if principal.name is not None:
        audit_context.set({"token_name": principal.name})
    return principal


def _authorization(request: Request) -> str | None:
    """The one Authorization header; 401 for two or more: a proxy in front may have checked
    one of them, and reading another would let its caller past that check."""
    given = request.headers.getlist("authorization")
    if len(given) > 1:
        raise _unauthorized(f"send one Authorization header, not {len(given)}")
    return given[0] if given else None


def _unauthorized(message: str) -> ApiError:
    return ApiError(401, "unauthorized", message, headers={"WWW-Authenticate": "Bearer"})


async def _token_principal(state: ServerState, header: str | None) -> Principal:
    """The live token's principal; the token file is read on a thread (it may wait on a lock)."""
    secret = bearer_secret(header)
    try:
        found = await run_in_threadpool(state.authenticator.identify, secret) if secret else None
    except TokenError as exc:
        log.error("token file unreadable", extra={"error": str(exc)})
        raise ApiError(
            503, "auth_unavailable", "the token file cannot be read; see the server log"
        ) from None
    if found is None:
        raise _unauthorized("a valid bearer token is required (Authorization: Bearer <token>)")
    return found


def require_scope(principal: Principal, needed: Scope) -> None:
    """403 unless the caller's scope reaches `needed`."""
    if not principal.allows(needed):
        raise ApiError(
            403,
            "insufficient_scope",
            f"the token {principal.name!r} has scope {principal.scope!r}; "
            f"this needs {needed!r} or above",
            needed_scope=needed,
        )


# Declares the bearer scheme in the OpenAPI schema; `requires` does the checking.
_BEARER = HTTPBearer(
    auto_error=False,
    description="A named token (`crag-edge tokens add`) or CRAG_EDGE_API_TOKEN, when the "
    "service has any. Scopes: query < answer < ingest < admin; each route names its own.",
)


def requires(scope: Scope) -> list[Any]:
    """The dependencies of a route that needs `scope`: 401 without a live token, 403 with a
    token of a lower scope."""

    async def check(
        request: Request,
        _declared: Annotated[HTTPAuthorizationCredentials | None, Depends(_BEARER)],
    ) -> None:
        require_scope(await authenticate(request), scope)

    return [Depends(check)]


CallerDep = Annotated[Principal, Depends(authenticate)]
# What the token check of `requires` can answer, for the OpenAPI schema of every protected
# route: no live token (401), too low a scope (403), an unreadable token file (503).
PROTECTED = error_responses(401, 403, 503)


def _overloaded(state: ServerState, exc: Overloaded) -> ApiError:
    state.metrics.rejected.labels(exc.reason).inc()
    retry_after_s = state.config.settings.server_retry_after_s
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
