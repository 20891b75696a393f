"""The MCP server driven by the SDK's own client: `crag-edge mcp` over stdio (a real
subprocess), and the service's `/mcp` over streamable HTTP with and without its token."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("mcp")

import httpx2
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from crag_edge.cancellation import Cancellation, Cancelled
from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.server.mcp import _cited_answer
from crag_edge.server.mcp_guard import BATCH
from tests.live_service import (
    FOLLOW_UP,
    NONSENSE,
    SETTINGS,
    TOKEN,
    WAL,
    live_service,
    sample_corpus,
)
from tests.test_server import Running

ROOT = Path(__file__).parent.parent
CLI = str(Path(sys.executable).parent / "crag-edge")
STDIO_ENV = {
    "CRAG_EDGE_GRADING_TIERS": '["signals", "cross_encoder"]',
    "CRAG_EDGE_REWRITE_WITH_LLM": "false",
    "CRAG_EDGE_LLM_MAX_TOKENS": "24",
}
HISTORY = [
    {"role": "user", "content": WAL},
    {"role": "assistant", "content": "Changes are appended to a separate WAL file [1]."},
]

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    return sample_corpus(tmp_path_factory.mktemp("mcp"), embedder)


@pytest.fixture(scope="module")
def service(corpus: Path, embedder: Any) -> Iterator[Running]:
    with live_service(corpus, embedder) as handle:
        yield handle


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


async def check_the_tools(session: ClientSession) -> None:
    """What every transport must serve: the tools, their verdicts and the follow-up."""
    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
    assert set(tools) == {"search", "ask", "answer"}
    for tool in tools.values():
        assert "INCORRECT: nothing trustworthy was found: do not answer" in str(tool.description)
        assert "history" in tool.input_schema["properties"]

    asked = await call(session, "ask", question=WAL)
    assert asked["decision"] in ("CORRECT", "AMBIGUOUS") and "follow_up" not in asked
    assert asked["context"][0]["source"].endswith("sqlite-wal.md")
    assert asked["context"][0]["section"] == "SQLite write-ahead logging"
    assert asked["context"][0]["n"] == 1 and asked["context"][0]["text"]

    followed = await call(session, "ask", question=FOLLOW_UP, history=HISTORY)
    rewrite = followed["follow_up"]
    assert rewrite["question"] == FOLLOW_UP and rewrite["standalone"] == followed["question"]
    assert "sqlite" in rewrite["standalone"].lower()
    assert followed["corrections"][0] == {
        "type": "rewrite",
        "query": rewrite["standalone"],
        "by": "keywords",
        "for": "follow-up",
        "question": FOLLOW_UP,
    }
    assert followed["context"][0]["source"].endswith("sqlite-wal.md")

    plain = await call(session, "search", question=WAL)
    first = plain["passages"][0]
    assert "decision" not in plain and "grade" not in first  # no model judged them
    assert first["source"].endswith("sqlite-wal.md") and first["rank"] == 1
    assert first["locator"] == "sqlite-wal.md § SQLite write-ahead logging"
    marked = {first["snippet"][start:end].lower() for start, end in first["marks"]}
    assert {"write", "logging"} <= marked, first["snippet"]
    followed_plainly = await session.call_tool(
        "search", {"question": FOLLOW_UP, "history": HISTORY}
    )
    assert followed_plainly.is_error and "history needs grade" in str(followed_plainly.content)

    nothing = await call(session, "ask", question=NONSENSE)
    assert nothing["decision"] == "INCORRECT" and nothing["insufficient_evidence"] is True
    assert nothing["context"] == [] and "do not answer" in nothing["meaning"]


async def over_stdio(db: Path) -> None:
    server = StdioServerParameters(
        command=CLI,
        args=["mcp", "--db", str(db)],
        env={k: v for k, v in os.environ.items() if k.startswith("CRAG_EDGE_")} | STDIO_ENV,
        cwd=ROOT,
    )
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        await check_the_tools(session)

        found = await call(session, "search", question=WAL, grade=True)
        assert found["decision"] in ("CORRECT", "AMBIGUOUS")
        hit = found["hits"][0]
        assert {"source", "text", "retrieval_score", "grade", "tier", "kept"} <= set(hit)
        assert any(h["kept"] and h["tier"] for h in found["hits"])

        answered = await call(session, "answer", question=WAL)
        assert answered["answer"].strip() and answered["finish_reason"] in (
            "stop",
            "length",
            "unsupported",
        )
        assert all(c["source"].endswith(".md") or c["source"] for c in answered["citations"])

        empty = await session.call_tool("ask", {"question": "   "})
        assert empty.is_error and "the question is empty" in str(empty.content)
        wordless = await session.call_tool("ask", {"question": '"""'})
        assert wordless.is_error and "the question has no words" in str(wordless.content)


def test_stdio_server_serves_the_tools(corpus: Path) -> None:
    asyncio.run(over_stdio(corpus))


def test_stdio_server_refuses_a_missing_corpus_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [CLI, "mcp", "--db", str(tmp_path / "nope.db")],
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("error:") and "Traceback" not in done.stderr


async def over_http(url: str, token: str | None) -> None:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=300) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        await check_the_tools(session)


def test_http_transport_serves_the_tools_with_the_token(service: Running) -> None:
    asyncio.run(over_http(service.url, TOKEN))


def test_http_transport_refuses_a_client_without_the_token(service: Running) -> None:
    with pytest.raises(ExceptionGroup) as refused:  # the SDK's task groups wrap its error
        asyncio.run(over_http(service.url, None))
    # a JSON-RPC error, whose message the client shows
    assert refused.group_contains(MCPError, match="a valid bearer token is required")
    hello = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
    for token in (None, "wrong-token"):
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        r = httpx.post(f"{service.url}/mcp", json=hello, headers=headers)
        assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
        assert r.json()["error"]["data"]["code"] == "unauthorized" and r.json()["request_id"]


def test_http_transport_says_why_a_request_is_too_large(service: Running) -> None:
    async def ask_too_much() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
            streamable_http_client(f"{service.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("search", {"question": "bees " * 20000})

    with pytest.raises(ExceptionGroup) as refused:
        asyncio.run(ask_too_much())
    assert refused.group_contains(MCPError, match="request body exceeds the limit of 65536 bytes")


def test_http_transport_has_no_stream_to_hold_open(service: Running) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "text/event-stream"}
    r = httpx.get(f"{service.url}/mcp", headers=headers, timeout=10)
    assert r.status_code == 405 and r.json()["error"]["data"]["code"] == "method_not_allowed"
    assert "POST" in r.headers["allow"]
    assert httpx.get(f"{service.url}/mcp", timeout=10).status_code == 401  # the token first


# -- errors as clients expect them -------------------------------------------------------------

MCP_HEADERS = {
    "Authorization": f"Bearer {TOKEN}",
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
}


def post_mcp(service: Running, message: Any, **headers: str) -> httpx.Response:
    return httpx.post(f"{service.url}/mcp", json=message, headers=MCP_HEADERS | headers, timeout=60)


def test_wrong_argument_types_get_a_short_error_naming_the_argument(service: Running) -> None:
    async def misuse() -> list[str]:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}) as http,
            streamable_http_client(f"{service.url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            texts = []
            for arguments in ({"question": 12345}, {"question": WAL, "history": [{"x": "y"}]}):
                result = await session.call_tool("search", arguments)
                assert result.is_error
                texts.append(result.content[0].text)  # type: ignore[union-attr]
            return texts

    number, history = asyncio.run(misuse())
    assert number == "invalid arguments for search: question: Input should be a valid string"
    assert history.startswith("invalid arguments for search: history.0.role: Field required")
    for text in (number, history):
        assert "pydantic" not in text and "input_value" not in text and "12345" not in text


@pytest.mark.parametrize("given", [{}, None, True, 1.5, "missing"])
def test_a_request_without_a_usable_id_gets_a_json_rpc_error(service: Running, given: Any) -> None:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": "tools/call"}
    message["params"] = {"name": "search", "arguments": {"question": WAL}}
    if given != "missing":
        message["id"] = given
    r = post_mcp(service, message)
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["error"]["code"] == -32600 and body["error"]["data"]["code"] == "invalid_request"
    assert "id" in body["error"]["message"] and body["request_id"]


def test_a_batch_gets_a_short_json_rpc_error(service: Running) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "search", "arguments": {"question": "ECHO-ME-7f3a"}}
    r = post_mcp(service, [call, call | {"id": 2}])
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert (error["code"], error["data"]["code"]) == (-32600, "invalid_request")
    assert error["message"] == BATCH
    assert "ECHO-ME" not in r.text and len(r.content) < 400


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Content-Type": "text/plain"}, 400),
        ({"Host": "elsewhere.example"}, 421),
        ({"Origin": "http://evil.example"}, 403),
    ],
)
def test_the_transports_refusals_come_in_the_services_error_shape(
    service: Running, headers: dict[str, str], status: int
) -> None:
    r = post_mcp(service, {"jsonrpc": "2.0", "id": 1, "method": "ping"}, **headers)
    assert r.status_code == status and r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["error"]["message"].startswith("Invalid") and body["request_id"]
    assert body["error"]["data"]["code"] and body["jsonrpc"] == "2.0"


def test_an_answer_stops_at_the_next_token_once_its_client_is_gone(
    corpus: Path, embedder: Any
) -> None:
    settings = Settings.load(**(SETTINGS | {"llm_max_tokens": 48}))
    gone = Cancellation()
    with Engine.open(corpus, settings, embedder=embedder) as engine:
        assert _cited_answer(engine, WAL, [], None, gone)["answer"]
        gone.cancel("the client went away")
        with pytest.raises(Cancelled, match="client went away"):
            _cited_answer(engine, WAL, [], None, gone)  # stopped at its first stage


def test_an_answer_stops_when_its_http_client_hangs_up(
    corpus: Path, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """The client gives up after a second, long before an answer of up to 600 tokens could be
    written: the tool hears of it and ends at its next token (the SDK logs the tool error)."""
    from crag_edge.server import ServerConfig
    from tests.test_server import factory_for, running, wait_until

    settings = SETTINGS | {"llm_max_tokens": 600}
    caplog.set_level(logging.INFO, logger="mcp")
    caplog.set_level(logging.INFO, logger="crag_edge.server")
    question = "Explain in detail, step by step, how SQLite write-ahead logging works."
    call = {"name": "answer", "arguments": {"question": question}}
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}
    config = ServerConfig(db=corpus, settings=ServerSettings(api_token=TOKEN))
    with running(config, factory_for(corpus, embedder, **settings)) as service:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{service.url}/mcp", json=message, headers=MCP_HEADERS, timeout=1.0)

        def stopped() -> bool:
            return any("the client went away" in r.getMessage() for r in caplog.records)

        def logged() -> list[int]:
            lines = [r for r in caplog.records if r.getMessage() == "request"]
            return [r.status for r in lines if getattr(r, "path", None) == "/mcp"]

        wait_until(stopped, timeout=120)
        wait_until(lambda: logged() == [499], timeout=120)  # the request's line says so
