"""The service against clients that send anything and against a machine that is not ready:
metric labels stay bounded whatever unauthenticated clients send, and `serve` refuses to
start, with one line, on a port in use or a file that is not a corpus."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from prometheus_client.parser import text_string_to_metric_families

from crag_edge.config import ServerSettings
from crag_edge.server import ServerConfig
from crag_edge.server.middleware import HTTP_METHODS
from tests.live_service import TOKEN, sample_corpus
from tests.test_server import ROOT, factory_for, running


@pytest.fixture(scope="module")
def corpus_db(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    return sample_corpus(tmp_path_factory.mktemp("limits"), embedder)


def label_sets(exposition: str, sample_name: str) -> list[dict[str, str]]:
    return [
        sample.labels
        for family in text_string_to_metric_families(exposition)
        for sample in family.samples
        if sample.name == sample_name
    ]


def test_metric_labels_stay_bounded_whatever_unauthenticated_clients_send(
    corpus_db: Path, embedder: Any
) -> None:
    config = ServerConfig(db=corpus_db, settings=ServerSettings(api_token=TOKEN))
    with running(config, factory_for(corpus_db, embedder)) as srv:
        with srv.client(token=None) as anon:
            for n in range(30):
                assert anon.request(f"BOGUS{n}", "/v1/query").status_code in (401, 405)
                assert anon.request(f"X-{n}", f"/no/such/{n}").status_code in (401, 404, 405)
                assert anon.get(f"/random/{n}?q={n}").status_code == 404
        with srv.client() as client:
            exposition = client.get("/metrics").text
    requests = label_sets(exposition, "crag_server_requests_total")
    methods = {labels["method"] for labels in requests}
    routes = {labels["route"] for labels in requests}
    known_routes = {"/v1/query", "/metrics", "/readyz", "unmatched"}  # /readyz: start-up probe
    assert "other" in methods and methods <= set(HTTP_METHODS) | {"other"}, methods
    assert routes <= known_routes, routes
    assert len(requests) <= 12, requests  # 90 odd requests, a handful of series
    latency_routes = {
        labels["route"] for labels in label_sets(exposition, "crag_server_request_seconds_count")
    }
    assert latency_routes <= known_routes, latency_routes


def test_json_the_parser_cannot_read_is_a_400_saying_why(corpus_db: Path, embedder: Any) -> None:
    unreadable = {
        b'{"question": ' + b"[" * 5000 + b"]" * 5000 + b"}": "nested too deeply",
        b'{"question": "caf\xe9 au lait"}': "byte 0xe9 at character 17 is not UTF-8",
        b'{"question": "bees", "top_k": ' + b"9" * 5000 + b"}": "a number of more than 4300 digits",
    }
    config = ServerConfig(db=corpus_db, settings=ServerSettings(api_token=TOKEN))
    with running(config, factory_for(corpus_db, embedder)) as srv, srv.client() as client:
        json_body = {"Content-Type": "application/json"}
        replies = {b: client.post("/v1/query", content=b, headers=json_body) for b in unreadable}
    for body, reason in unreadable.items():
        answer = replies[body]
        assert answer.status_code == 400 and answer.json()["error"] == "bad_request"
        assert answer.json()["message"] == f"the body is not valid JSON: {reason}", answer.text


@contextmanager
def slow_connection(corpus_db: Path, embedder: Any) -> Iterator[socket.socket]:
    """A raw connection to a service that waits 0.5 s for a request's head or body; once the
    test is done with it, the service must still answer a question."""
    config = ServerConfig(db=corpus_db, settings=ServerSettings(server_read_timeout_s=0.5))
    with running(config, factory_for(corpus_db, embedder)) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port), timeout=60) as slow:
            yield slow
        with srv.client() as client:
            served = client.post("/v1/query", json={"question": "What is a honeybee?"})
    assert served.status_code == 200


@pytest.mark.parametrize(
    "sent",
    [
        b'Content-Length: 100\r\n\r\n{"question": ',  # fewer bytes than declared
        b'Transfer-Encoding: chunked\r\n\r\n3\r\n{"q\r\n',  # a last chunk that never comes
    ],
)
def test_a_body_that_stops_arriving_is_a_408_and_the_service_goes_on(
    corpus_db: Path, embedder: Any, sent: bytes
) -> None:
    with slow_connection(corpus_db, embedder) as slow:
        head = b"POST /v1/query HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        slow.sendall(head + sent)
        answer = slow.makefile("rb").read()  # the server answers, then closes
    status, _, rest = answer.partition(b"\r\n")
    assert status == b"HTTP/1.1 408 Request Timeout", answer
    body = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert body["error"] == "request_timeout" and "0.5 s" in body["message"]


@pytest.mark.parametrize(
    "sent",
    [b"", b"POST /v1/query HTTP/1.1\r\nHost: x\r\n"],  # nothing; a head that never ends
)
def test_a_connection_whose_request_head_never_arrives_is_closed(
    corpus_db: Path, embedder: Any, sent: bytes
) -> None:
    with slow_connection(corpus_db, embedder) as slow:
        slow.sendall(sent)
        assert slow.recv(1024) == b""  # the server hangs up; a timeout here would raise


# -- start-up --------------------------------------------------------------------------------


def serve(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m crag_edge.server ARGS` as a user runs it, without an API token."""
    env = {k: v for k, v in os.environ.items() if k != "CRAG_EDGE_API_TOKEN"}
    return subprocess.run(
        [sys.executable, "-m", "crag_edge.server", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,  # a server that starts instead of refusing would otherwise run forever
    )


@pytest.fixture
def occupied_port() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield int(taken.getsockname()[1])


def test_serve_on_a_port_in_use_exits_1_with_one_line(corpus_db: Path, occupied_port: int) -> None:
    result = serve("--db", str(corpus_db), "--port", str(occupied_port))
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(occupied_port) in lines[0] and "in use" in lines[0]


def test_serve_on_a_file_that_is_not_a_corpus_exits_2_like_a_missing_one(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("just text, not a corpus")
    foreign = serve("--db", str(notes), "--port", "0")
    missing = serve("--db", str(tmp_path / "missing.db"), "--port", "0")
    for result in (foreign, missing):
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
        assert "Traceback" not in result.stderr
    assert "notes.txt" in foreign.stderr
    assert notes.read_text() == "just text, not a corpus"  # refused, left untouched


def test_an_ingest_root_in_the_home_of_no_user_exits_2_naming_it(corpus_db: Path) -> None:
    result = serve("--db", str(corpus_db), "--port", "0", "--ingest-root", "~no-such-user/docs")
    assert result.returncode == 2, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "~no-such-user/docs" in result.stderr and "Traceback" not in result.stderr
