"""The HTTP service against a real uvicorn server on 127.0.0.1, a real corpus and real models:
every endpoint, auth rules, limits, path confinement, overload, readiness and metrics."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import uvicorn

from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.server import ServerConfig, ServerConfigError, create_app, is_loopback
from crag_edge.server.protocol import http_protocol
from crag_edge.server.security import bearer_secret

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
ROOT = Path(__file__).parent.parent
FAST: dict[str, Any] = {"grading_tiers": ["signals"], "rewrite_with_llm": False}
BEES = "How do honeybees tell other bees where flowers are?"
ZORBLAT = "The Zorblat reactor in Quentaris is cooled with chilled lemon juice every Tuesday."


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    db = tmp_path_factory.mktemp("server") / "corpus.db"
    with Engine.open(db, Settings.load(**FAST), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
    return db


@pytest.fixture(scope="module")
def roots(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """An ingest root with a document, escaping links, and a secret folder outside it."""
    base = tmp_path_factory.mktemp("roots")
    root, outside = base / "root", base / "outside"
    (root / "docs").mkdir(parents=True)
    (root / "sneaky").mkdir()
    outside.mkdir()
    (root / "docs" / "zorblat.md").write_text(f"# Zorblat\n\n{ZORBLAT}\n", encoding="utf-8")
    (outside / "secret.md").write_text("# Secret\n\nThe launch code is 0000.\n", encoding="utf-8")
    (root / "link.md").symlink_to(outside / "secret.md")
    (root / "linkdir").symlink_to(outside, target_is_directory=True)
    (root / "sneaky" / "ok.md").write_text("# Fine\n\nA harmless note.\n", encoding="utf-8")
    (root / "sneaky" / "escape.md").symlink_to(outside / "secret.md")
    return {"root": root, "outside": outside}


class Running:
    def __init__(self, url: str, token: str | None, server: uvicorn.Server) -> None:
        self.url = url
        self.token = token
        self.server = server

    def client(self, token: str | None = "default", timeout: float = 120.0) -> httpx.Client:
        token = self.token if token == "default" else token
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)


@contextmanager
def running(
    config: ServerConfig, factory: Callable[[], Engine], *, wait_ready: bool = True
) -> Iterator[Running]:
    """A real uvicorn server for `config` on a free loopback port, in a thread."""
    app = create_app(config, factory)
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            host="127.0.0.1",
            port=0,
            http=http_protocol(config),
            log_config=None,
            access_log=False,
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "server did not start"
        time.sleep(0.02)
    port = server.servers[0].sockets[0].getsockname()[1]
    handle = Running(f"http://127.0.0.1:{port}", config.api_token, server)
    if wait_ready:
        with httpx.Client(base_url=handle.url) as c:
            while c.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "engine did not load"
                time.sleep(0.05)
    try:
        yield handle
    finally:
        server.should_exit = True
        thread.join(30)
        assert not thread.is_alive()


def factory_for(db: Path, embedder: Any, **overrides: Any) -> Callable[[], Engine]:
    return lambda: Engine.open(db, Settings.load(**(FAST | overrides)), embedder=embedder)


@pytest.fixture(scope="module")
def server(corpus_db: Path, embedder: Any, roots: dict[str, Path]) -> Iterator[Running]:
    config = ServerConfig(
        db=corpus_db,
        settings=ServerSettings(server_max_body_bytes=4096, server_max_question_chars=300),
        ingest_roots=(roots["root"].resolve(),),
    )
    with running(config, factory_for(corpus_db, embedder)) as handle:
        yield handle


def wait_job(client: httpx.Client, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 120
    while True:
        job: dict[str, Any] = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] not in ("queued", "running"):
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.1)


# -- endpoints -------------------------------------------------------------------------------


def test_query_returns_the_crag_result_json(server: Running) -> None:
    with server.client() as c:
        r = c.post("/v1/query", json={"question": BEES}, headers={"X-Request-ID": "abc-123"})
    assert r.status_code == 200, r.text
    assert r.headers["x-request-id"] == "abc-123"
    data = r.json()
    for key in ("question", "decision", "action", "score", "reason", "context", "hits"):
        assert key in data
    assert data["question"] == BEES
    assert data["decision"] in ("CORRECT", "AMBIGUOUS", "INCORRECT")
    assert any("honeybee" in h["source"] for h in data["hits"])


def test_query_options_are_validated(server: Running) -> None:
    with server.client() as c:
        assert c.post("/v1/query", json={"question": BEES, "mode": "bm25"}).status_code == 200
        bad = c.post("/v1/query", json={"question": BEES, "mode": "psychic"})
        extra = c.post("/v1/query", json={"question": BEES, "sql": "DROP TABLE"})
    for r in (bad, extra):
        assert r.status_code == 422
        assert r.json()["error"] == "invalid_request" and r.json()["request_id"]


def test_a_body_that_is_not_json_says_so(server: Running) -> None:
    body = b'{"question": "' + BEES.encode() + b'"'  # the closing brace is missing
    with server.client() as c:
        broken = c.post("/v1/query", content=body, headers={"Content-Type": "application/json"})
        form = c.post("/v1/query", content=body + b"}", headers={"Content-Type": "text/plain"})
        bare = c.post("/v1/query", content=body + b"}")
        charset = "application/json; charset=utf-8"
        fine = c.post("/v1/query", content=body + b"}", headers={"Content-Type": charset})
    assert broken.status_code == 400 and broken.json()["error"] == "bad_request"
    assert broken.json()["message"].startswith("the body is not valid JSON: Expecting")
    for r in (form, bare):
        assert r.status_code == 415 and r.json()["error"] == "unsupported_media_type"
        assert "Content-Type: application/json" in r.json()["message"]
    assert fine.status_code == 200


def test_answer_streams_tokens_then_the_result(server: Running) -> None:
    events = sse(server, {"question": BEES})
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "result" and kinds.count("result") == 1, kinds
    assert set(kinds[:-1]) == {"stage", "token"}
    # The stages first, as they start and end, then the answer's sentences and its end.
    first_token = kinds.index("token")
    assert set(kinds[:first_token]) == {"stage"} and kinds[first_token:-1].count("stage") == 1
    stages = [data for kind, data in events if kind == "stage"]
    assert stages[0] == {"stage": "embed", "status": "start", "detail": "", "ms": None}
    assert [s["stage"] for s in stages if s["status"] == "end"][-1] == "answer"
    final = events[-1][1]
    assert final["answer"] == "".join(d["text"] for k, d in events if k == "token")
    assert final["finish_reason"] in ("stop", "length", "unsupported")
    assert final["question"] == BEES and final["insufficient_evidence"] is False
    timings = final["timings"]
    assert 0 < timings["first_token_s"] <= timings["answer_s"]
    assert timings["total_s"] >= timings["retrieval_grading_s"] > 0
    assert 0 < timings["evaluated_tokens"] <= timings["prompt_tokens"]


def test_answer_without_evidence_says_so_without_a_model(server: Running) -> None:
    events = sse(server, {"question": "qwxz vbnm plokij"})
    assert events[-1][0] == "result"
    assert events[-1][1]["insufficient_evidence"] is True
    assert events[-1][1]["finish_reason"] == "insufficient_evidence"
    assert events[-1][1]["timings"]["prompt_tokens"] is None  # no model was called


def test_stalled_answer_says_timeout_in_its_result(corpus_db: Path, embedder: Any) -> None:
    # Any elapsed time is a stall at this limit: the model is stopped before its first token.
    stalling = factory_for(corpus_db, embedder, llm_stall_timeout_s=1e-9)
    with running(ServerConfig(db=corpus_db), stalling) as srv:
        events = sse(srv, {"question": BEES})
    assert [kind for kind, _ in events if kind != "stage"] == ["result"]
    final = events[-1][1]
    assert final["finish_reason"] == "timeout" and final["answer"] == ""
    assert final["sources"]  # there was evidence: the model was asked, and stalled


def sse(server: Running, body: dict[str, Any]) -> list[tuple[str, Any]]:
    events: list[tuple[str, Any]] = []
    with server.client() as c, c.stream("POST", "/v1/answer", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        kind = None
        for line in r.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((str(kind), json.loads(line.removeprefix("data: "))))
    return events


def test_stats_health_and_openapi(server: Running) -> None:
    with server.client() as c:
        stats = c.get("/v1/stats").json()
        assert stats["corpus"]["documents"] >= 6 and stats["corpus"]["chunks"] > 0
        assert stats["server"]["workers"] == 1
        assert c.get("/healthz").json() == {"status": "ok"}
        assert c.get("/readyz").json() == {"ready": True, "checked": ["database"]}
        paths = set(c.get("/openapi.json").json()["paths"])
        missing = c.get("/v1/nope")
    expected = {"/v1/query", "/v1/answer", "/v1/ingest", "/v1/jobs/{job_id}", "/v1/stats"}
    assert expected | {"/healthz", "/readyz", "/metrics"} <= paths
    assert missing.status_code == 404 and missing.json()["error"] == "not_found"


def test_metrics_expose_engine_and_queue(server: Running) -> None:
    with server.client() as c:
        c.post("/v1/query", json={"question": BEES})
        r = c.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    text = r.text
    for name in (
        "crag_server_queue_depth 0.0",
        "crag_server_in_flight",
        "crag_server_ready 1.0",
        "crag_decisions_total",
        'crag_stage_seconds_bucket{le="0.0005",stage=',
        'crag_server_requests_total{method="POST",route="/v1/query",status="200"}',
        "crag_server_ingest_jobs",
    ):
        assert name in text, name


# -- ingest and path confinement -------------------------------------------------------------


def test_ingest_job_reports_progress_and_the_document_becomes_searchable(
    server: Running, roots: dict[str, Path]
) -> None:
    with server.client() as c:
        before = c.get("/v1/stats").json()["corpus"]["documents"]
        r = c.post("/v1/ingest", json={"paths": ["docs"]})
        assert r.status_code == 202, r.text
        assert r.json()["location"] == f"/v1/jobs/{r.json()['job']['id']}"
        job = wait_job(c, r.json()["job"]["id"])
        assert job["state"] == "succeeded", job
        assert job["report"]["added"] == 1
        assert job["progress"]["done"] == job["progress"]["total"] == 1
        assert c.get("/v1/stats").json()["corpus"]["documents"] == before + 1
        result = c.post("/v1/query", json={"question": "What cools the Zorblat reactor?"}).json()
        assert any("zorblat" in h["source"] for h in result["hits"])
        again = wait_job(c, c.post("/v1/ingest", json={"paths": ["docs"]}).json()["job"]["id"])
        assert again["report"]["unchanged"] == 1  # incremental: a re-run resumes, never doubles
        assert c.get("/v1/jobs/0123").status_code == 404


def test_ingest_job_progress_counts_files_not_chunks_or_readings(
    tmp_path: Path, embedder: Any
) -> None:
    """A multi-chunk file and the evaluator's stored readings report counts of their own;
    the job's progress stays in files."""
    db, folder = tmp_path / "c.db", tmp_path / "docs"
    folder.mkdir()
    long_text = " ".join(f"Sentence {i} of the Zorblat manual is about lemons." for i in range(200))
    (folder / "manual.md").write_text(f"# Manual\n\n{long_text}\n", encoding="utf-8")
    (folder / "note.md").write_text("# Note\n\nA short note.\n", encoding="utf-8")
    tiers = {"grading_tiers": ["signals", "cross_encoder"]}  # the evaluator stores readings
    Engine.open(db, Settings.load(**tiers), create=True, embedder=embedder).close()
    config = ServerConfig(db=db, ingest_roots=(tmp_path.resolve(),))
    with (
        running(config, factory_for(db, embedder, **tiers)) as handle,
        handle.client() as c,
    ):
        job = wait_job(c, c.post("/v1/ingest", json={"paths": ["docs"]}).json()["job"]["id"])
    assert job["state"] == "succeeded", job
    assert job["report"]["chunks_written"] > 2 and job["report"]["passages_encoded"] > 2
    assert job["progress"]["done"] == job["progress"]["total"] == 2


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("../outside/secret.md", 403),
        ("docs/../../outside/secret.md", 403),
        ("link.md", 403),  # a symlink inside the root pointing out
        ("linkdir/secret.md", 403),  # a folder link pointing out
        ("linkdir", 403),
        ("sneaky", 403),  # a folder whose walk would follow a link out
        ("/etc/passwd", 403),
        ("/etc/no-such-file", 403),  # outside: no existence oracle
        ("~no-such-user-here/notes.md", 403),  # the home of a user who does not exist
        ("docs/missing.md", 404),
        ("bad\x00name", 422),
    ],
)
def test_ingest_paths_are_confined(
    server: Running, roots: dict[str, Path], path: str, status: int
) -> None:
    with server.client() as c:
        r = c.post("/v1/ingest", json={"paths": [path]})
        absolute = c.post("/v1/ingest", json={"paths": [str(roots["outside"] / "secret.md")]})
    assert r.status_code == status, r.text
    # a NUL byte is refused by the schema (invalid_request) before any path is looked at
    assert r.json()["error"] in ("path_refused", "path_not_found", "invalid_request")
    assert "launch code" not in r.text
    assert absolute.status_code == 403


# -- limits and errors -----------------------------------------------------------------------


def test_body_and_question_limits(server: Running) -> None:
    with server.client() as c:
        big = c.post("/v1/query", json={"question": "x" * 5000})
        long = c.post("/v1/query", json={"question": "why " * 100})
        empty = c.post("/v1/query", json={"question": "   "})
        wordless = c.post("/v1/query", json={"question": "\u0000 ?"})
        chunked = c.post(
            "/v1/query",
            content=iter([b'{"question": "', b"y" * 5000, b'"}']),
            headers={"Content-Type": "application/json"},
        )
    assert big.status_code == 413 and big.json()["error"] == "body_too_large"
    assert chunked.status_code == 413
    assert long.status_code == 422 and long.json()["error"] == "question_too_long"
    assert long.json()["max_question_chars"] == 300
    assert empty.status_code == 422
    assert wordless.status_code == 422 and wordless.json()["fields"][0]["loc"] == [
        "body",
        "question",
    ]


# -- auth ------------------------------------------------------------------------------------


def test_token_rules(corpus_db: Path, embedder: Any) -> None:
    config = ServerConfig(db=corpus_db, settings=ServerSettings(api_token="s3cret-token"))
    with running(config, factory_for(corpus_db, embedder)) as srv:
        with srv.client(token=None) as anon:
            assert anon.get("/healthz").status_code == 200  # probes stay open
            assert anon.get("/readyz").status_code == 200
            for method, path in (("POST", "/v1/query"), ("GET", "/v1/stats"), ("GET", "/metrics")):
                r = anon.request(method, path, json={"question": BEES})
                assert r.status_code == 401, path
                assert r.headers["www-authenticate"] == "Bearer"
                assert r.json()["error"] == "unauthorized"
        with srv.client(token="s3cret-tokeX") as wrong:
            assert wrong.get("/v1/stats").status_code == 401
        with srv.client() as ok:
            assert ok.post("/v1/query", json={"question": BEES}).status_code == 200


def test_an_api_token_set_with_surrounding_blanks_is_the_token_without_them(
    corpus_db: Path, embedder: Any
) -> None:
    """A header cannot carry surrounding blanks, so a token pasted with them would otherwise
    lock every client out (a line break is refused with the settings, as a control
    character)."""
    config = ServerConfig(db=corpus_db, settings=ServerSettings(api_token=" s3cret-token  "))
    with running(config, factory_for(corpus_db, embedder)) as srv, srv.client() as c:
        stats = c.get("/v1/stats", headers={"Authorization": "Bearer s3cret-token"})
    assert stats.status_code == 200, stats.text


def test_two_authorization_headers_are_refused_whichever_comes_first(
    corpus_db: Path, embedder: Any
) -> None:
    """A proxy in front may check one of them and the service read the other: neither wins."""
    config = ServerConfig(db=corpus_db, settings=ServerSettings(api_token="s3cret-token"))
    both = [("Authorization", "Bearer s3cret-token"), ("Authorization", "Bearer other")]
    with running(config, factory_for(corpus_db, embedder)) as srv, srv.client(None) as anon:
        replies = [anon.get("/v1/stats", headers=pair) for pair in (both, both[::-1])]
    for r in replies:
        assert r.status_code == 401 and r.json()["error"] == "unauthorized", r.text
        assert "one Authorization header" in r.json()["message"]


def test_bearer_secret_is_read_from_the_bearer_scheme_only() -> None:
    assert bearer_secret("Bearer abc") == bearer_secret("bearer  abc ") == "abc"
    assert bearer_secret("Basic abc") is None and bearer_secret("abc") is None
    assert bearer_secret(None) is None and bearer_secret("Bearer ") is None


def test_loopback_detection_and_bind_rule(tmp_path: Path) -> None:
    for host in ("127.0.0.1", "127.8.9.1", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "10.0.0.5", "example.org", "192.168.1.1"):
        assert not is_loopback(host), host
    ServerConfig(db=tmp_path, host="127.0.0.1").validate_bind()
    ServerConfig(
        db=tmp_path, settings=ServerSettings(api_token="sixteen-chars-ok"), host="0.0.0.0"
    ).validate_bind()
    with pytest.raises(ServerConfigError, match="token"):
        ServerConfig(db=tmp_path, host="0.0.0.0").validate_bind()


def test_serve_refuses_to_bind_beyond_loopback_without_a_token(corpus_db: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "CRAG_EDGE_API_TOKEN"}
    cmd = [sys.executable, "-m", "crag_edge.server", "--db", str(corpus_db)]
    r = subprocess.run(
        [*cmd, "--host", "0.0.0.0", "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode != 0
    assert "refusing to listen" in r.stderr and "CRAG_EDGE_API_TOKEN" in r.stderr


# -- readiness, overload and failures --------------------------------------------------------


def test_readiness_is_false_until_the_models_load(corpus_db: Path, embedder: Any) -> None:
    gate = threading.Event()
    real = factory_for(corpus_db, embedder)

    def slow_factory() -> Engine:
        gate.wait(60)
        return real()

    config = ServerConfig(db=corpus_db)
    with running(config, slow_factory, wait_ready=False) as srv, srv.client() as c:
        assert c.get("/healthz").status_code == 200
        r = c.get("/readyz")
        assert r.status_code == 503 and r.json() == {"ready": False, "reason": "loading models"}
        q = c.post("/v1/query", json={"question": BEES})
        assert q.status_code == 503 and q.json()["error"] == "not_ready"
        assert "retry-after" in q.headers
        assert "crag_server_ready 0.0" in c.get("/metrics").text
        gate.set()
        deadline = time.monotonic() + 60
        while c.get("/readyz").status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert c.post("/v1/query", json={"question": BEES}).status_code == 200


def test_overload_is_refused_with_retry_after_and_nothing_is_lost(
    corpus_db: Path, embedder: Any
) -> None:
    """Capacity 1 running + 1 waiting: the third call is refused at once; the two finish."""
    hold = threading.Event()
    real = factory_for(corpus_db, embedder)

    def holding_factory() -> Engine:
        engine = real()
        query = engine.query

        def held(question: str, **kwargs: Any) -> Any:
            if question.startswith("HOLD"):
                hold.wait(60)
            if question.startswith("BOOM"):
                raise RuntimeError("secret internal detail /etc/shadow")
            return query(question, **kwargs)

        engine.query = held  # type: ignore[method-assign]
        return engine

    config = ServerConfig(
        db=corpus_db,
        settings=ServerSettings(server_workers=1, server_max_waiting=1, server_retry_after_s=3),
    )
    with running(config, holding_factory) as srv:
        results: dict[str, int] = {}

        def ask(name: str) -> None:
            with srv.client() as c:
                results[name] = c.post("/v1/query", json={"question": f"HOLD {BEES}"}).status_code

        first = threading.Thread(target=ask, args=("first",))
        first.start()
        with srv.client() as c:
            wait_until(lambda: "crag_server_in_flight 1.0" in c.get("/metrics").text)
            second = threading.Thread(target=ask, args=("second",))
            second.start()
            wait_until(lambda: "crag_server_queue_depth 1.0" in c.get("/metrics").text)
            refused = c.post("/v1/query", json={"question": BEES})
            refused_sse = c.post("/v1/answer", json={"question": BEES})
            for r in (refused, refused_sse):
                assert r.status_code == 503, r.text
                assert r.headers["retry-after"] == "3"
                assert r.json()["error"] == "overloaded" and r.json()["reason"] == "queue_full"
            hold.set()
            first.join(60)
            second.join(60)
            assert results == {"first": 200, "second": 200}
            text = c.get("/metrics").text
            assert 'crag_server_rejected_total{reason="queue_full"} 2.0' in text
            assert "crag_server_queue_depth 0.0" in text and "crag_server_in_flight 0.0" in text

            boom = c.post("/v1/query", json={"question": "BOOM now"})
            assert boom.status_code == 500
            assert boom.json() == {
                "error": "internal_error",
                "message": "internal server error; quote the request id",
                "request_id": boom.headers["x-request-id"],
            }
            assert "secret" not in boom.text and "Traceback" not in boom.text
            # the slot was given back: the server still answers
            assert c.post("/v1/query", json={"question": BEES}).status_code == 200


def wait_until(condition: Callable[[], bool], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def test_graceful_shutdown_finishes_in_flight_work(corpus_db: Path, embedder: Any) -> None:
    hold = threading.Event()
    real = factory_for(corpus_db, embedder)

    def holding_factory() -> Engine:
        engine = real()
        query = engine.query

        def held(question: str, **kwargs: Any) -> Any:
            hold.wait(60)
            return query(question, **kwargs)

        engine.query = held  # type: ignore[method-assign]
        return engine

    statuses: list[int] = []
    with running(ServerConfig(db=corpus_db), holding_factory) as srv:

        def ask() -> None:
            with srv.client() as c:
                statuses.append(c.post("/v1/query", json={"question": BEES}).status_code)

        asker = threading.Thread(target=ask)
        asker.start()
        with srv.client() as c:
            wait_until(lambda: "crag_server_in_flight 1.0" in c.get("/metrics").text)
        srv.server.should_exit = True  # shutdown starts while the query is running
        time.sleep(0.3)
        hold.set()
        asker.join(60)
    assert statuses == [200]


# -- fault: the server killed during an ingest -----------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_process(
    db: Path | str, root: Path, **settings: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    port = free_port()
    env = os.environ | {"CRAG_EDGE_GRADING_TIERS": '["signals"]'}
    env |= {f"CRAG_EDGE_{k.upper()}": v for k, v in settings.items()}
    env.pop("CRAG_EDGE_API_TOKEN", None)
    cmd = [sys.executable, "-m", "crag_edge.server", "--db", str(db), "--port", str(port)]
    proc = subprocess.Popen(
        [*cmd, "--ingest-root", str(root)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, "server exited"
            assert time.monotonic() < deadline, "server not ready"
            try:
                if httpx.get(f"{url}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        yield proc, url
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(30)


@pytest.mark.slow
def test_killed_during_ingest_the_corpus_stays_consistent_and_ingest_resumes(
    tmp_path: Path, embedder: Any
) -> None:
    import apsw

    db, root = tmp_path / "kill.db", tmp_path / "docs"
    root.mkdir()
    small_chunks = {"chunk_tokens": 32, "chunk_overlap": 0}  # many cheap chunks: several commits
    Engine.open(db, Settings.load(**small_chunks), create=True, embedder=embedder).close()
    env = {k: str(v) for k, v in small_chunks.items()}
    words = [
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
    ]
    n_files = 48
    for i in range(n_files):
        text = " ".join(words[(i + j) % len(words)] + str(j % 97) for j in range(100))
        (root / f"doc{i:03d}.md").write_text(f"# Document {i}\n\n{text}\n", encoding="utf-8")

    with serve_process(db, root, **env) as (proc, url):
        job = httpx.post(f"{url}/v1/ingest", json={"paths": ["."]}).json()["job"]
        deadline = time.monotonic() + 120
        while True:
            state = httpx.get(f"{url}/v1/jobs/{job['id']}").json()
            if state["progress"]["done"] >= 1 or state["state"] != "running":
                break
            assert time.monotonic() < deadline
            time.sleep(0.05)
        proc.kill()  # SIGKILL: no shutdown, no checkpoint
        proc.wait(30)
    assert state["state"] == "running", "ingest finished before the kill; make it longer"

    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    empty_docs = conn.execute(
        "SELECT count(*) FROM documents d WHERE NOT EXISTS "
        "(SELECT 1 FROM chunks c WHERE c.doc_id = d.id)"
    ).fetchall()[0][0]
    assert empty_docs == 0  # every document is either fully written or absent
    committed = conn.execute("SELECT count(*) FROM documents").fetchall()[0][0]
    conn.close()
    assert 0 < committed < n_files  # killed between two commits

    with serve_process(db, root, **env) as (proc, url):
        job = httpx.post(f"{url}/v1/ingest", json={"paths": ["."]}).json()["job"]
        deadline = time.monotonic() + 300
        while (state := httpx.get(f"{url}/v1/jobs/{job['id']}").json())["state"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert state["state"] == "succeeded", state
        report = state["report"]
        assert report["unchanged"] == committed
        assert report["added"] == n_files - committed
        stats = httpx.get(f"{url}/v1/stats").json()["corpus"]
        assert stats["documents"] == n_files


def test_a_lost_database_connection_is_503_naming_the_database(
    postgres_url: str, embedder: Any
) -> None:
    """The server drops the service's connections (a restart does): the request that meets
    one is 503 `corpus_unavailable` with the store's one line, not an anonymous 500."""
    settings = Settings.load(**FAST)
    with Engine.open(postgres_url, settings, create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])

    def factory() -> Engine:
        return Engine.open(postgres_url, settings, embedder=embedder)

    with running(ServerConfig(db=postgres_url), factory) as server, server.client() as c:
        assert c.post("/v1/query", json={"question": BEES}).status_code == 200
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
        lost = c.post("/v1/query", json={"question": BEES})
    assert lost.status_code == 503, lost.text
    assert lost.json()["error"] == "corpus_unavailable"
    assert "database error" in lost.json()["message"] and lost.headers["Retry-After"] == "5"
