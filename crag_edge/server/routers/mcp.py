"""MCP over streamable HTTP at `/mcp`: the tools of `crag_edge.server.mcp`, behind the same
tokens and model-slot admission as every other route that reaches the models. Reaching `/mcp`
needs the `query` scope; a tool that needs more (`answer`) refuses a weaker token with a tool
error, and every tool searches only the documents the caller's groups may see.

The transport runs stateless (each POST is a whole exchange, answered as JSON): nothing is
kept between requests, so a restart or a second replica loses no session. Each app gets its
own MCP server because the SDK's session manager runs once, inside the app's lifespan.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from fastapi import APIRouter, Request
from mcp.server.mcpserver.exceptions import ToolError
from starlette.concurrency import run_in_threadpool
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Send
from starlette.types import Scope as AsgiScope

from crag_edge.cancellation import Cancelled
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.server.deps import admitted, authenticate, caller_var, require_scope
from crag_edge.server.errors import MCP_PATH, ApiError
from crag_edge.server.mcp import EngineRunner, build_server
from crag_edge.server.mcp_guard import client_gone, guarded
from crag_edge.server.scopes import Scope
from crag_edge.server.state import ServerState

T = TypeVar("T")


def mcp_router(state: ServerState) -> APIRouter:
    """The `/mcp` route and the lifespan that runs its session manager."""
    server = build_server(
        _runner(state),
        max_question_chars=state.config.settings.server_max_question_chars,
        client_gone=client_gone.get,
    )
    transport = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        stateless_http=True,
        json_response=True,
        host=state.config.host,  # loopback: the SDK also checks Host and Origin headers
    )
    router = APIRouter(lifespan=lambda _app: server.session_manager.run())
    router.routes.append(Route(MCP_PATH, _Authorized(transport), include_in_schema=False))
    return router


def _runner(state: ServerState) -> EngineRunner:
    """Engine work on a model slot, for the caller `_Authorized` found (the tools run in tasks
    that copy its context); too weak a token, not ready or at capacity is a tool error the
    calling model can read (an MCP client expects a tool result, not an HTTP status)."""

    async def run(work: Callable[[Engine, CorpusView], T], *, needs: Scope = "query") -> T:
        caller = caller_var.get()
        if caller is None:  # never seen: `_Authorized` sets it; fail closed all the same
            raise ToolError("no caller for this request (unauthorized)")
        try:
            require_scope(caller, needs)
            engine = state.require_engine()
            async with admitted(state):
                return await run_in_threadpool(work, engine, caller.view)
        except ApiError as exc:
            raise ToolError(f"{exc.message} ({exc.code})") from None
        except Cancelled:
            raise ToolError("the client went away; the work was stopped") from None

    return run


class _Authorized:
    """The transport behind the service's token check: without a live token the same 401, and
    below the `query` scope the same 403 (in the same JSON shape), as every other route."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        require_scope(await authenticate(Request(scope)), "query")
        if scope["method"] == "GET":  # stateless, the SDK's event stream would never carry a
            raise ApiError(  # message, yet hold the connection open for as long as one waits
                405,
                "method_not_allowed",
                "this MCP endpoint is stateless: POST each JSON-RPC message; no stream to GET",
                headers={"Allow": "POST"},
            )
        await guarded(self.app, scope, receive, send)
