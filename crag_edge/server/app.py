"""The FastAPI app: query, streamed answer, ingest jobs, stats, health and metrics.

Everything that touches the models goes through `Admission` (a few running, a bounded line
waiting, the rest refused with 503 + Retry-After); ingest runs on one writer thread with its
own connection (WAL: queries keep reading while it writes). Errors never carry stack traces:
a generic JSON body with the request id, the details in the JSON log line of that id.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response, StreamingResponse
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from pydantic import BaseModel, ConfigDict, Field
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.generation import AnswerStream, cited
from crag_edge.ingest import IngestReport, ProgressEvent, ingest
from crag_edge.observability import LATENCY_BUCKETS
from crag_edge.result import CragResult
from crag_edge.server.admission import Admission, Overloaded
from crag_edge.server.config import ServerConfig
from crag_edge.server.jobs import JobManager
from crag_edge.server.logs import request_id_var
from crag_edge.server.security import PathRefused, expand_confined, token_matches
from crag_edge.store import Corpus

EngineFactory = Callable[[], Engine]
log = logging.getLogger("crag_edge.server")
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._-]{1,64}$")


# -- request and error shapes ----------------------------------------------------------------


class QueryRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(description="The question; limited to the server's max_question_chars.")
    mode: Literal["bm25", "dense", "hybrid"] | None = Field(
        None, description="Retrieval mode (default: the retrieval_mode setting)."
    )
    top_k: int | None = Field(None, ge=1, le=100, description="Hits to retrieve per round.")


class IngestRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    paths: list[str] = Field(
        min_length=1, description="Server-side files or folders inside the configured roots."
    )


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


# -- server-side metrics ---------------------------------------------------------------------


class ServerMetrics:
    """Request, queue and correction metrics of the service (the engine has its own registry)."""

    def __init__(self, admission: Admission) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "crag_server_requests", "HTTP requests", ["route", "method", "status"], registry=r
        )
        self.latency = Histogram(
            "crag_server_request_seconds",
            "HTTP request latency (time to the response's start for streams)",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.queue_depth = Gauge(
            "crag_server_queue_depth", "Model calls waiting for a worker", registry=r
        )
        self.queue_depth.set_function(lambda: admission.waiting)
        self.in_flight = Gauge("crag_server_in_flight", "Model calls running", registry=r)
        self.in_flight.set_function(lambda: admission.running)
        capacity = Gauge("crag_server_workers", "Model calls allowed at once", registry=r)
        capacity.set(admission.workers)
        self.rejected = Counter(
            "crag_server_rejected", "Requests refused for capacity", ["reason"], registry=r
        )
        self.ready = Gauge(
            "crag_server_ready", "1 once the engine and models are loaded", registry=r
        )
        self.jobs = Gauge(
            "crag_server_ingest_jobs", "Ingest jobs kept, by state", ["state"], registry=r
        )
        self.corrections = Counter(
            "crag_server_corrections", "Corrective actions in served results", ["type"], registry=r
        )
        self.fallback = Counter(
            "crag_server_fallback_used",
            "Fallback providers used by served results",
            ["provider"],
            registry=r,
        )

    def observe_result(self, result: CragResult) -> None:
        for correction in result.corrections:
            self.corrections.labels(correction.type).inc()
        for provider in result.fallback.get("used") or []:
            self.fallback.labels(str(provider)).inc()


# -- state -----------------------------------------------------------------------------------


class ServerState:
    """The engine (None until loaded), the admission queue, the ingest jobs and the metrics."""

    def __init__(self, config: ServerConfig, engine_factory: EngineFactory) -> None:
        self.config = config
        self.engine_factory = engine_factory
        self.engine: Engine | None = None
        self.load_error: str | None = None
        self.closing = False
        self._lock = threading.Lock()
        self.admission = Admission(config.workers, config.max_waiting, config.queue_timeout_s)
        self.metrics = ServerMetrics(self.admission)
        self.jobs = JobManager(self._ingest, keep=config.max_jobs_kept)

    def load(self) -> None:
        """Open the corpus and load the models (on a thread: liveness answers meanwhile)."""
        started = time.perf_counter()
        try:
            engine = self.engine_factory()
            engine.embedder.embed(["warm up"])  # first query should not pay for session start-up
        except Exception:
            log.exception("engine failed to load", extra={"db": str(self.config.db)})
            self.load_error = "engine failed to load; see the server log"
            return
        with self._lock:
            if self.closing:
                engine.close()
                return
            self.engine = engine
        self.metrics.ready.set(1)
        log.info(
            "engine ready",
            extra={"db": str(self.config.db), "seconds": round(time.perf_counter() - started, 3)},
        )

    def require_engine(self) -> Engine:
        engine = self.engine
        if engine is None:
            retry = str(self.config.retry_after_s)
            if self.load_error:
                raise ApiError(503, "engine_unavailable", self.load_error)
            raise ApiError(
                503, "not_ready", "models are still loading", headers={"Retry-After": retry}
            )
        return engine

    def _ingest(self, paths: list[Path], progress: Callable[[ProgressEvent], None]) -> IngestReport:
        engine = self.require_engine()
        # The one writer: its own connection, so queries keep reading committed data (WAL).
        with Corpus.open(engine.corpus.path) as corpus:
            return ingest(
                corpus,
                engine.embedder,
                engine.embedder.tokenizer,
                paths,
                settings=engine.settings,
                progress=progress,
                passage_index=engine.grader.passage_index(),
            )

    async def close(self) -> None:
        self.closing = True
        await run_in_threadpool(self.jobs.shutdown, self.config.shutdown_timeout_s)
        deadline = time.monotonic() + self.config.shutdown_timeout_s
        while self.admission.running and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        with self._lock:
            engine, self.engine = self.engine, None
        if engine is not None:
            engine.close()
        self.metrics.ready.set(0)


# -- middleware ------------------------------------------------------------------------------


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
        status = 500
        response_started = False

        async def send_with_id(message: Message) -> None:
            nonlocal status, response_started
            if message["type"] == "http.response.start":
                status = message["status"]
                response_started = True
                message.setdefault("headers", [])
                message["headers"] = [
                    *message["headers"],
                    (b"x-request-id", request_id.encode()),
                ]
                self.state.metrics.latency.labels(_route(scope)).observe(
                    time.perf_counter() - started
                )
            await send(message)

        try:
            limit = self.state.config.max_body_bytes
            body = await _read_body(scope, receive, headers, limit)
            if body is None:
                await _send_json(
                    send_with_id,
                    413,
                    error_body(
                        "body_too_large",
                        f"request body exceeds the limit of {limit} bytes",
                        max_body_bytes=limit,
                    ),
                )
                return
            await self.app(scope, _replay(body, receive), send_with_id)
        except Exception:
            log.exception("unhandled error", extra={"path": scope.get("path")})
            if not response_started:
                await _send_json(
                    send_with_id,
                    500,
                    error_body("internal_error", "internal server error; quote the request id"),
                )
        finally:
            route = _route(scope)
            self.state.metrics.requests.labels(route, scope["method"], str(status)).inc()
            log.info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope.get("path"),
                    "route": route,
                    "status": status,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 2),
                    "client": (scope.get("client") or ("?",))[0],
                },
            )
            request_id_var.reset(token)


def _route(scope: Scope) -> str:
    route = scope.get("route")
    path = getattr(route, "path", None)
    return str(path) if path else "unmatched"


async def _read_body(
    scope: Scope, receive: Receive, headers: dict[str, str], limit: int
) -> bytes | None:
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


def _replay(body: bytes, receive: Receive) -> Receive:
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _send_json(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(payload)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": payload})


# -- the app ---------------------------------------------------------------------------------


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

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(
            error_body(exc.code, exc.message, **exc.extra), exc.status, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        fields = [
            {"loc": [str(p) for p in e.get("loc", ())], "msg": str(e.get("msg", ""))}
            for e in exc.errors()
        ]
        return JSONResponse(
            error_body("invalid_request", "the request does not match the schema", fields=fields),
            422,
        )

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), exc.status_code, headers=exc.headers)

    def authorized(request: Request) -> None:
        token = config.api_token
        if token and not token_matches(request.headers.get("authorization"), token):
            raise ApiError(
                401,
                "unauthorized",
                "a valid bearer token is required (Authorization: Bearer <token>)",
                headers={"WWW-Authenticate": "Bearer"},
            )

    def overloaded(exc: Overloaded) -> ApiError:
        state.metrics.rejected.labels(exc.reason).inc()
        return ApiError(
            503,
            "overloaded",
            "the server is at capacity; retry later",
            headers={"Retry-After": str(config.retry_after_s)},
            reason=exc.reason,
            retry_after_s=config.retry_after_s,
        )

    def check_question(body: QueryRequest) -> str:
        question = body.question.strip()
        if not question:
            raise ApiError(422, "invalid_question", "the question is empty")
        if len(body.question) > config.max_question_chars:
            raise ApiError(
                422,
                "question_too_long",
                f"the question has {len(body.question)} characters; the limit is "
                f"{config.max_question_chars}",
                max_question_chars=config.max_question_chars,
            )
        return question

    auth = [Depends(authorized)]

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        """Liveness: the process serves HTTP (models may still be loading)."""
        return {"status": "ok"}

    @app.get("/readyz", tags=["health"], responses={503: {"description": "Not ready"}})
    async def readyz() -> JSONResponse:
        """Readiness: true once the corpus is open and the models are loaded."""
        if state.engine is not None:
            return JSONResponse({"ready": True})
        reason = "engine failed to load" if state.load_error else "loading models"
        return JSONResponse({"ready": False, "reason": reason}, 503)

    @app.get("/metrics", tags=["health"], dependencies=auth, response_class=Response)
    async def metrics() -> Response:
        """Prometheus text: engine decisions and stage latencies, requests, queue depth, jobs."""
        for job_state in ("queued", "running", "succeeded", "failed", "cancelled"):
            state.metrics.jobs.labels(job_state).set(state.jobs.counts().get(job_state, 0))
        text = generate_latest(state.metrics.registry)
        if state.engine is not None:
            text += state.engine.metrics.exposition()
        return Response(text, media_type=PROMETHEUS_TEXT)

    @app.get("/v1/stats", tags=["corpus"], dependencies=auth)
    async def stats() -> dict[str, Any]:
        """Corpus counts and provenance, and the server's queue and jobs."""
        engine = state.require_engine()
        corpus = asdict(await run_in_threadpool(engine.corpus.stats))
        corpus["path"] = str(corpus["path"])
        return {
            "corpus": corpus,
            "server": {
                "workers": config.workers,
                "max_waiting": config.max_waiting,
                "running": state.admission.running,
                "waiting": state.admission.waiting,
                "jobs": state.jobs.counts(),
            },
        }

    @app.post("/v1/query", tags=["query"], dependencies=auth)
    async def query(body: QueryRequest) -> dict[str, Any]:
        """The corrective loop's result (CragResult JSON, as `crag-edge query --json`)."""
        question = check_question(body)
        engine = state.require_engine()
        try:
            async with state.admission.slot():
                result = await run_in_threadpool(
                    engine.query, question, mode=body.mode, top_k=body.top_k
                )
        except Overloaded as exc:
            raise overloaded(exc) from None
        state.metrics.observe_result(result)
        return result.to_dict()

    @app.post(
        "/v1/answer",
        tags=["query"],
        dependencies=auth,
        response_class=StreamingResponse,
        responses={200: {"content": {"text/event-stream": {}}}},
    )
    async def answer(body: QueryRequest) -> StreamingResponse:
        """Server-sent events: `token` events ({"text"}), then one `result` event
        ({"answer", "finish_reason", "cited", "result": CragResult}); `error` instead if
        generation fails. `finish_reason`: stop, length (cut at llm_max_tokens), timeout
        (stalled past llm_stall_timeout_s) or insufficient_evidence (no model called)."""
        question = check_question(body)
        engine = state.require_engine()
        try:
            await state.admission.acquire()
        except Overloaded as exc:
            raise overloaded(exc) from None
        release = _Once(state.admission.release)
        try:
            result, tokens = await run_in_threadpool(
                engine.answer, question, mode=body.mode, top_k=body.top_k
            )
        except BaseException:
            release()
            raise
        state.metrics.observe_result(result)
        request_id = request_id_var.get()
        return StreamingResponse(
            _answer_events(result, tokens, release, request_id),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
            background=BackgroundTask(release),
        )

    @app.post("/v1/ingest", tags=["corpus"], dependencies=auth, status_code=202)
    async def ingest_paths(body: IngestRequest) -> dict[str, Any]:
        """Start a background ingest of server-side paths confined to the ingest roots."""
        if len(body.paths) > config.max_ingest_paths:
            raise ApiError(
                422,
                "too_many_paths",
                f"{len(body.paths)} paths; the limit is {config.max_ingest_paths}",
            )
        state.require_engine()
        try:
            confined = await run_in_threadpool(expand_confined, body.paths, config.ingest_roots)
        except PathRefused as exc:
            code = {403: "path_refused", 404: "path_not_found"}.get(exc.status, "invalid_path")
            raise ApiError(exc.status, code, f"{exc.requested}: {exc.reason}") from None
        job = state.jobs.submit(list(confined.files), body.paths)
        log.info("ingest job queued", extra={"job": job.id, "files": len(confined.files)})
        return {"job": job.to_dict(), "location": f"/v1/jobs/{job.id}"}

    @app.get("/v1/jobs/{job_id}", tags=["corpus"], dependencies=auth)
    async def job_status(job_id: str) -> dict[str, Any]:
        """An ingest job: state, progress (done/total files) and, when finished, its report."""
        job = state.jobs.get(job_id)
        if job is None:
            raise ApiError(404, "job_not_found", "no such job (finished jobs are kept a while)")
        return job.to_dict()

    return app


class _Once:
    """Call `fn` at most once, from whichever of the stream's end or its cleanup comes first."""

    def __init__(self, fn: Callable[[], None]) -> None:
        self._fn: Callable[[], None] | None = fn

    def __call__(self) -> None:
        fn, self._fn = self._fn, None
        if fn is not None:
            fn()


def _sse(event: str, data: Any) -> str:
    return f"event: {event}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


_END = object()


async def _answer_events(
    result: CragResult,
    tokens: AnswerStream,
    release: Callable[[], None],
    request_id: str | None,
) -> AsyncIterator[str]:
    try:
        while True:
            token = await run_in_threadpool(next, tokens, _END)
            if token is _END:
                break
            yield _sse("token", {"text": token})
        yield _sse(
            "result",
            {
                "answer": tokens.text,
                "finish_reason": tokens.finish_reason,
                "cited": [item.n for item in cited(tokens.text, result.context)],
                "result": result.to_dict(),
            },
        )
    except Exception:
        log.exception("answer generation failed", extra={"request_id": request_id})
        yield _sse(
            "error",
            {
                "error": "generation_failed",
                "message": "the answer could not be generated; quote the request id",
                "request_id": request_id,
                "result": result.to_dict(),
            },
        )
    finally:
        await run_in_threadpool(tokens.close)
        release()
