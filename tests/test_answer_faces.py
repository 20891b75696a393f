"""One finished answer, one shape: `answer --json`, `/v1/answer`'s `result` event, the chat
API's `crag` object (through the official `openai` client) and MCP's `answer` tool (through
the SDK's client) give the same keys for the same question, asked of one corpus, three of them
over a live service on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("mcp")

import httpx2
import openai
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.live_service import SETTINGS, TOKEN, WAL, live_service, sample_corpus
from tests.test_cli import ANSWER_KEYS, invoke
from tests.test_server import Running, sse

pytestmark = pytest.mark.models


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    return sample_corpus(tmp_path_factory.mktemp("faces"), embedder)


@pytest.fixture(scope="module")
def service(corpus: Path, embedder: Any) -> Iterator[Running]:
    with live_service(corpus, embedder) as handle:
        yield handle


def from_the_cli(corpus: Path) -> dict[str, Any]:
    env = {f"CRAG_EDGE_{name.upper()}": json.dumps(value) for name, value in SETTINGS.items()}
    done = invoke("answer", "--db", str(corpus), "--json", WAL, env=env)
    assert done.exit_code in (0, 1), done.output  # 1: an empty answer (stalled), same shape
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def from_the_answer_route(service: Running) -> dict[str, Any]:
    kind, answer = sse(service, {"question": WAL})[-1]
    assert kind == "result", answer
    return dict(answer)


def from_the_chat_api(service: Running) -> dict[str, Any]:
    client = openai.OpenAI(base_url=f"{service.url}/v1", api_key=TOKEN, max_retries=0)
    completion = client.chat.completions.create(
        model="crag-edge:corpus", messages=[{"role": "user", "content": WAL}]
    )
    assert completion.model_extra is not None
    return dict(completion.model_extra["crag"])


async def from_mcp(service: Running) -> dict[str, Any]:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=300) as http,
        streamable_http_client(f"{service.url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        called = await session.call_tool("answer", {"question": WAL})
    assert not called.is_error and called.structured_content is not None, called.content
    return dict(called.structured_content)


def item_keys(items: list[dict[str, Any]]) -> set[str]:
    """The keys of a list's items, all of them (none for an empty list)."""
    return {key for item in items for key in item}


def test_every_face_gives_the_finished_answer_in_one_shape(corpus: Path, service: Running) -> None:
    faces = {
        "answer --json": from_the_cli(corpus),
        "/v1/answer": from_the_answer_route(service),
        "chat crag": from_the_chat_api(service),
        "mcp answer": asyncio.run(from_mcp(service)),
    }
    first = faces["answer --json"]
    for face, answer in faces.items():
        assert list(answer) == list(ANSWER_KEYS), face
        assert set(answer["timings"]) == set(first["timings"]), face
        assert set(answer["support"]) == set(first["support"]), face
        assert item_keys(answer["sources"]) == item_keys(first["sources"]), face
        assert answer["question"] == WAL and answer["decision"] == first["decision"], face
        sources = [(s["n"], s["locator"]) for s in answer["sources"]]
        assert sources == [(s["n"], s["locator"]) for s in first["sources"]], face
    assert first["sources"] and first["sources"][0]["locator"].startswith("sqlite-wal.md")
    citation_keys = item_keys(first["sources"]) - {"cited"} | {"text", "places"}
    for face, answer in faces.items():
        assert item_keys(answer["citations"]) <= citation_keys, face
        cited = {s["n"] for s in answer["sources"] if s["cited"]}
        assert cited == {c["n"] for c in answer["citations"]}, face
