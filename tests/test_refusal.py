"""Refusals that help, in every face: when there is no whole answer the reader learns which
case it is (nothing relevant found; relevant passages found that state no answer; the answer
stopped) and what to do next, the passages found listed by their places in the second case.

The sample corpus and a real service on 127.0.0.1, driven by each face's own client: the CLI
runner, httpx for `/v1/answer`, the `openai` client for the chat API, the MCP client, and
Textual's Pilot. The model is an LLM server that answers from memory, a year no passage
holds (`tests.servers.endless_llm_server` with a reply), so the support check removes its
sentence, deterministically and without a model call; stopped is the stall limit at zero.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")

from crag_edge.answer.generation import INSUFFICIENT, UNSUPPORTED
from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.server import ServerConfig
from tests.live_service import NONSENSE, SETTINGS, WAL, sample_corpus
from tests.servers import EndlessLlm, endless_llm_server
from tests.test_server import Running, factory_for, running

pytestmark = pytest.mark.models
FROM_MEMORY = "SQLite added the write-ahead log in 1887 [1]."
PLACE = "sqlite-wal.md § SQLite write-ahead logging"
NOTHING_STEP = "Ask again in the words the documents would use, or add documents that cover it."
STALLED = "the model made no progress for 1e-09 s and the answer was stopped"
STALL_STEP = "retry on a less busy machine or raise CRAG_EDGE_LLM_STALL_TIMEOUT_S"
# (case, question, service): stopped is asked of the service whose model may not stall.
CASES = [
    ("nothing_found", NONSENSE, "answering"),
    ("not_stated", WAL, "answering"),
    ("stopped", WAL, "stalling"),
]
STALLING: dict[str, Any] = {"llm_stall_timeout_s": 1e-9}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    return sample_corpus(tmp_path_factory.mktemp("refusal"), embedder)


@pytest.fixture(scope="module")
def llm() -> Iterator[EndlessLlm]:
    with endless_llm_server(reply=FROM_MEMORY) as server:
        yield server


def settings(llm: EndlessLlm, **overrides: Any) -> dict[str, Any]:
    return SETTINGS | {"llm_url": llm.url, "llm_retries": 0} | overrides


@pytest.fixture(scope="module")
def services(corpus: Path, embedder: Any, llm: EndlessLlm) -> Iterator[dict[str, Running]]:
    with ExitStack() as stack:
        yield {
            name: stack.enter_context(
                running(
                    ServerConfig(db=corpus, settings=ServerSettings()),
                    factory_for(corpus, embedder, **settings(llm, **overrides)),
                )
            )
            for name, overrides in (("answering", {}), ("stalling", STALLING))
        }


def check_refusal(case: str, refusal: dict[str, Any]) -> None:
    """The refusal as every JSON face carries it."""
    assert refusal["kind"] == case
    if case == "nothing_found":
        assert refusal["reason"] == "nothing relevant to the question was found in the documents"
        assert refusal["passages"] == []
    elif case == "not_stated":
        assert refusal["reason"].startswith("relevant passages were found, but none of them")
        assert refusal["next_step"] == "read the passages found, where they are"
        assert refusal["passages"][0]["locator"] == PLACE and refusal["passages"][0]["n"]
    else:
        assert (refusal["reason"], refusal["next_step"]) == (STALLED, STALL_STEP)


def check_text(case: str, text: str) -> None:
    """The refusal as every face that writes for people shows it."""
    if case == "nothing_found":
        assert INSUFFICIENT.format(fallback="") in text and NOTHING_STEP in text
    elif case == "not_stated":
        assert UNSUPPORTED in text
        assert "Read the passages found, where they are:\n  [1] " in text and PLACE in text
    else:
        assert f"{STALLED}; {STALL_STEP}" in text


@pytest.mark.parametrize(("case", "question", "service"), CASES)
def test_the_cli_says_which_case_and_what_next(
    corpus: Path, llm: EndlessLlm, case: str, question: str, service: str
) -> None:
    from typer.testing import CliRunner

    from crag_edge.cli import app

    chosen = settings(llm, **(STALLING if service == "stalling" else {}))
    env = {f"CRAG_EDGE_{k.upper()}": json.dumps(v) if isinstance(v, list) else str(v)
           for k, v in chosen.items()}  # fmt: skip
    shown = CliRunner().invoke(app, ["answer", "--db", str(corpus), question], env=env)
    check_text(case, shown.stdout + shown.stderr)
    assert "1887" not in shown.stdout  # removed, as the support report on stderr says
    assert shown.exit_code == (1 if case == "stopped" else 0)  # an empty answer: exit 1
    as_json = CliRunner().invoke(app, ["answer", "--db", str(corpus), "--json", question], env=env)
    check_refusal(case, json.loads(as_json.stdout)["refusal"])


@pytest.mark.parametrize(("case", "question", "service"), CASES)
def test_v1_answer_says_which_case_and_what_next(
    services: dict[str, Running], case: str, question: str, service: str
) -> None:
    with services[service].client() as c:
        body = c.post("/v1/answer", json={"question": question}).text
    result = json.loads(body.rsplit("event: result\ndata: ", 1)[1])
    check_refusal(case, result["refusal"])


@pytest.mark.parametrize(("case", "question", "service"), CASES)
def test_the_chat_api_says_which_case_and_what_next(
    services: dict[str, Running], case: str, question: str, service: str
) -> None:
    openai = pytest.importorskip("openai")
    client = openai.OpenAI(base_url=f"{services[service].url}/v1", api_key="-", max_retries=0)
    messages = [{"role": "user", "content": question}]
    whole = client.chat.completions.create(model="crag-edge:corpus", messages=messages)
    check_text(case, whole.choices[0].message.content)
    assert "1887" not in whole.choices[0].message.content
    check_refusal(case, whole.model_extra["crag"]["refusal"])
    chunks = list(
        client.chat.completions.create(model="crag-edge:corpus", messages=messages, stream=True)
    )
    check_text(case, "".join(c.choices[0].delta.content or "" for c in chunks))
    check_refusal(case, chunks[-1].model_extra["crag"]["refusal"])


@pytest.mark.parametrize(("case", "question", "service"), CASES)
def test_mcp_says_which_case_and_what_next(
    services: dict[str, Running], case: str, question: str, service: str
) -> None:
    pytest.importorskip("mcp")
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def ask() -> dict[str, Any]:
        url = f"{services[service].url}/mcp"
        async with (
            streamable_http_client(url) as (read, write, *_),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("answer", {"question": question})
            assert not result.is_error, result.content
            assert result.structured_content is not None
            return result.structured_content

    answered = asyncio.run(ask())
    check_refusal(case, answered["refusal"])
    if case == "stopped":
        assert answered["note"] == f"{STALLED}; {STALL_STEP}"


@pytest.mark.parametrize(("case", "question", "service"), CASES)
def test_the_tui_says_which_case_and_what_next(
    corpus: Path, embedder: Any, llm: EndlessLlm, case: str, question: str, service: str
) -> None:
    pytest.importorskip("textual")
    from textual.pilot import Pilot
    from textual.widgets import Static

    from crag_edge.tui import CragApp
    from tests.test_tui import run

    chosen = Settings.load(**settings(llm, **(STALLING if service == "stalling" else {})))
    with Engine.open(corpus, chosen, embedder=embedder) as engine:
        app = CragApp(engine=engine)

        async def body(pilot: Pilot[None]) -> None:
            await pilot.press(*question, "enter")
            await app.workers.wait_for_complete()
            await pilot.pause()
            check_text(case, str(app.query_one("#answer", Static).render()))
            title = str(app.query_one("#answer-scroll").border_title)
            assert title.startswith("No answer")

        run(app, body, (120, 40))
