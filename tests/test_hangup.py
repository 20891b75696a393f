"""The caller leaves, the work stops: a real service on 127.0.0.1 and real clients (httpx, the
`openai` client) that hang up while the question is graded or answered. The model work
behind them is an LLM server that never ends a reply (`tests.servers.endless_llm_server`),
so only a stop can end it: the model hears the hang-up, the single worker serves the next
request, the log line says 499 and the metrics count it."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")

from crag_edge.cancellation import Cancellation, Cancelled
from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.server import ServerConfig
from tests.live_service import WAL, sample_corpus
from tests.servers import EndlessLlm, endless_llm_server
from tests.test_server import Running, factory_for, running, wait_until

pytestmark = pytest.mark.models
# The LLM judge reads the best hits (the signals settle none of them on their own), and a
# judged reply may take ten minutes: only a stop ends it within the test. An answer is let
# run to 8192 words, nearly three minutes of the endless server's.
JUDGED: dict[str, Any] = {
    "grading_tiers": ["signals", "llm"],
    "fast_path_rules": [],
    "llm_timeout_s": 600.0,
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    return sample_corpus(tmp_path_factory.mktemp("hangup"), embedder)


@contextmanager
def service(corpus: Path, embedder: Any, **overrides: Any) -> Iterator[tuple[Running, EndlessLlm]]:
    """One worker, no one waiting beside it, over the endless LLM server."""
    with endless_llm_server() as llm:
        factory = factory_for(corpus, embedder, llm_url=llm.url, llm_retries=0, **overrides)
        settings = ServerSettings(server_workers=1, server_max_waiting=1)
        with running(ServerConfig(db=corpus, settings=settings), factory) as srv:
            yield srv, llm


def events(response: httpx.Response) -> Iterator[tuple[str, Any]]:
    kind = "message"
    for line in response.iter_lines():
        if line.startswith("event: "):
            kind = line.removeprefix("event: ")
        elif line.startswith("data: "):
            yield kind, json.loads(line.removeprefix("data: "))


def answer_until(
    srv: Running, llm: EndlessLlm, seen: Callable[[str, Any], bool]
) -> list[tuple[str, Any]]:
    """POST /v1/answer and read its events until `seen` one, then, once the model is at
    work, hang up."""
    read: list[tuple[str, Any]] = []
    with srv.client() as c, c.stream("POST", "/v1/answer", json={"question": WAL}) as r:
        assert r.status_code == 200
        for kind, data in events(r):
            read.append((kind, data))
            if seen(kind, data):  # (leaving the loop closes the stream: wait here)
                assert llm.asked.wait(60), "the model was never asked"
                break
    return read


def stage_started(name: str) -> Callable[[str, Any], bool]:
    return lambda kind, data: (
        kind == "stage"
        and data
        == {
            "stage": name,
            "status": "start",
            "detail": data["detail"],
            "ms": None,
        }
    )


def freed_and_counted(srv: Running, llm: EndlessLlm, route: str, logs: Any) -> None:
    """The model heard the hang-up, the worker is free, the next request is served, and the
    request is a 499 in the log and in the metrics."""
    assert llm.hung_up.wait(60), "the model kept working for a client that had gone"
    with srv.client() as c:
        wait_until(lambda: "crag_server_in_flight 0.0" in c.get("/metrics").text, 60)
        llm.stop.set()  # the model answers at once from now on: the next request can end
        assert c.post("/v1/query", json={"question": WAL}).status_code == 200
        metrics = c.get("/metrics").text
    counted = f'crag_server_requests_total{{method="POST",route="{route}",status="499"}} 1.0'
    assert counted in metrics
    lines = [r for r in logs.records if r.getMessage() == "request" and r.route == route]
    assert lines[0].status == 499  # the next request on the route, if any, served (200)


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="crag_edge.server")
    return caplog


def test_an_answer_whose_client_leaves_during_grading_stops_there(
    corpus: Path, embedder: Any, logs: pytest.LogCaptureFixture
) -> None:
    with service(corpus, embedder, **JUDGED) as (srv, llm):
        read = answer_until(srv, llm, stage_started("grade:llm"))
        freed_and_counted(srv, llm, "/v1/answer", logs)
    # The stages came as they began, each with its time once it ended.
    stages = [data for kind, data in read if kind == "stage"]
    assert stages[0]["stage"] == "embed" and stages[0]["status"] == "start"
    retrieved = next(s for s in stages if s["stage"] == "retrieve" and s["status"] == "end")
    assert retrieved["ms"] > 0
    assert not [kind for kind, _ in read if kind != "stage"]


def test_an_answer_whose_client_leaves_while_it_is_written_stops_there(
    corpus: Path, embedder: Any, logs: pytest.LogCaptureFixture
) -> None:
    with service(corpus, embedder, llm_max_tokens=8192) as (srv, llm):
        read = answer_until(srv, llm, stage_started("answer"))
        freed_and_counted(srv, llm, "/v1/answer", logs)
    decided = [
        data["detail"] for kind, data in read if kind == "stage" and data["stage"] == "decision"
    ]
    assert decided and decided[0].split()[0] in ("CORRECT", "AMBIGUOUS")


def test_a_query_whose_client_leaves_during_grading_stops_there(
    corpus: Path, embedder: Any, logs: pytest.LogCaptureFixture
) -> None:
    with service(corpus, embedder, **JUDGED) as (srv, llm):
        hang_up_on_query(srv, llm)
        freed_and_counted(srv, llm, "/v1/query", logs)


def hang_up_on_query(srv: Running, llm: EndlessLlm) -> None:
    """POST /v1/query and hang up once the judge is asked (a whole response: no byte comes
    before the end, so the client is a bare socket)."""
    body = json.dumps({"question": WAL}).encode()
    head = b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    port = int(srv.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as impatient:
        impatient.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert llm.asked.wait(60), "the judge was never asked"


def test_a_streamed_chat_whose_client_leaves_stops_there(
    corpus: Path, embedder: Any, logs: pytest.LogCaptureFixture
) -> None:
    openai = pytest.importorskip("openai")
    with service(corpus, embedder, llm_max_tokens=8192) as (srv, llm):
        client = openai.OpenAI(base_url=f"{srv.url}/v1", api_key="-", max_retries=0)
        messages = [{"role": "user", "content": WAL}]
        stream = client.chat.completions.create(
            model="crag-edge:corpus", messages=messages, stream=True
        )
        assert llm.asked.wait(60)
        stream.close()
        freed_and_counted(srv, llm, "/v1/chat/completions", logs)


def test_cancelled_work_stops_at_its_next_stage_and_in_its_answer(
    corpus: Path, embedder: Any
) -> None:
    """The engine's own contract, as the TUI's Esc and every face rely on it: a question
    cancelled before it starts stops at its first stage; an answer cancelled after its first
    piece stops before the next."""
    settings = Settings.load(grading_tiers=["signals"], llm_max_tokens=48)
    with Engine.open(corpus, settings, embedder=embedder) as engine:
        early = Cancellation()
        early.cancel("asked to stop")
        with pytest.raises(Cancelled, match="asked to stop"):
            engine.query(WAL, cancel=early)
        late = Cancellation()
        result, stream = engine.answer(WAL, cancel=late)
        assert result.context
        first = next(stream)
        late.cancel()
        with pytest.raises(Cancelled):
            next(stream)
        assert stream.text == first
        assert engine.query(WAL).context  # the engine serves the next question


def test_ctrl_c_stops_an_answer_during_grading(corpus: Path) -> None:
    """Ctrl+C (SIGINT) on `crag-edge answer` while the judge reads: one line, exit 130, and
    the model hears the hang-up."""
    with endless_llm_server() as llm:
        env = os.environ | {
            "CRAG_EDGE_LLM_URL": llm.url,
            "CRAG_EDGE_LLM_RETRIES": "0",
            "CRAG_EDGE_GRADING_TIERS": json.dumps(JUDGED["grading_tiers"]),
            "CRAG_EDGE_FAST_PATH_RULES": "[]",
            "CRAG_EDGE_LLM_TIMEOUT_S": "600",
            "CRAG_EDGE_REWRITE_WITH_LLM": "false",
        }
        command = [sys.executable, "-m", "crag_edge.cli", "answer", "--db", str(corpus), WAL]
        with subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True) as process:
            assert llm.asked.wait(120), "the judge was never asked"
            process.send_signal(signal.SIGINT)
            _, stderr = process.communicate(timeout=60)
        assert llm.hung_up.wait(60)
    assert process.returncode == 130
    assert stderr.strip().splitlines()[-1] == "interrupted"


def test_esc_in_the_tui_stops_the_question_during_grading(corpus: Path, embedder: Any) -> None:
    """Esc while the judge reads: the stage line says cancelled, and the question's thread
    leaves the engine (the model hears the hang-up) without waiting for the judge."""
    pytest.importorskip("textual")
    from textual.pilot import Pilot

    from crag_edge.tui import CragApp
    from tests.test_tui import run, wait_for

    with endless_llm_server() as llm:
        settings = Settings.load(**(JUDGED | {"llm_url": llm.url, "llm_retries": 0}))
        with Engine.open(corpus, settings, embedder=embedder) as engine:
            app = CragApp(engine=engine)

            async def body(pilot: Pilot[None]) -> None:
                await pilot.press(*WAL, "enter")
                await wait_for(pilot, llm.asked.is_set, timeout=120)
                await pilot.press("escape")
                await wait_for(pilot, lambda: not app.main_screen.busy, timeout=60)
                last = app.main_screen.stages.stages[-1]
                assert last.failed and last.detail == "cancelled"

            run(app, body, (120, 40))
            assert llm.hung_up.wait(60)
