"""The FastAPI app: search, query, streamed answer, ingest jobs, stats, health and metrics.

Everything that touches the models goes through `Admission` (a few running, a bounded line
waiting, the rest refused with 503 + Retry-After); ingest runs on one writer thread with its
own connection (WAL: queries keep reading while it writes). Errors never carry stack traces:
a generic JSON body with the request id, the details in the JSON log line of that id.

The routes live in `server.routers`, one module per area; what they share (state, auth,
admission) in `server.deps`.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.server.config import ServerConfig
from crag_edge.server.errors import install_error_handlers
from crag_edge.server.middleware import RequestContext
from crag_edge.server.openapi import install_openapi
from crag_edge.server.routers import ingest, openai_api, ops, query, search
from crag_edge.server.routers.mcp import mcp_router
from crag_edge.server.state import EngineFactory, ServerState


def create_app(
    config: ServerConfig,
    engine_factory: EngineFactory | None = None,
    *,
    settings: Settings | None = None,
) -> FastAPI:
    """The service for `config.db`; `engine_factory` (default: `Engine.open`) runs on a thread
    at start-up, and /readyz turns true when it returns."""
    if engine_factory is None:

        def engine_factory() -> Engine:
            return Engine.open(config.db, settings or Settings.load())

    state = ServerState(config, engine_factory)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        threading.Thread(target=state.load, name="crag-engine-load", daemon=True).start()
        yield
        await state.close()

    app = FastAPI(
        title="crag-edge",
        summary="Corrective RAG, fully offline: graded evidence, corrections, cited answers.",
        version="1",
        lifespan=lifespan,
        docs_url=None,  # the docs pages load scripts from a CDN: useless air-gapped
        redoc_url=None,
    )
    app.state.server = state
    app.add_middleware(RequestContext, state=state)  # outermost; CORS is off (no middleware)
    install_error_handlers(app)
    install_openapi(app, config)
    app.include_router(ops.router)
    app.include_router(query.router)
    app.include_router(search.router)
    app.include_router(ingest.router)
    app.include_router(openai_api.router)
    app.include_router(mcp_router(state))
    return app
