"""The OpenAI chat-completions API driven by the official `openai` client against the live
service: the model list, whole and streamed answers with their `crag` object, a follow-up
question, and the service's auth and validation rules."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")

import httpx
import openai

from crag_edge.answer.generation import INSUFFICIENT
from crag_edge.config import ServerSettings
from crag_edge.server import ServerConfig
from tests.live_service import FOLLOW_UP, NONSENSE, TOKEN, WAL, live_service, sample_corpus
from tests.servers import endless_llm_server
from tests.test_server import Running, factory_for, running

pytestmark = pytest.mark.models
MODEL = "crag-edge:corpus"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Running]:
    db = sample_corpus(tmp_path_factory.mktemp("openai"), embedder)
    with live_service(db, embedder) as handle:
        yield handle


def client(service: Running, key: str = TOKEN) -> Any:
    return openai.OpenAI(base_url=f"{service.url}/v1", api_key=key, max_retries=0, timeout=300)


def ask(service: Running, *messages: dict[str, str], **options: Any) -> Any:
    return client(service).chat.completions.create(model=MODEL, messages=list(messages), **options)


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def test_the_corpus_is_listed_as_one_model(service: Running) -> None:
    models = client(service).models.list().data
    assert [m.id for m in models] == [MODEL]
    assert models[0].owned_by == "crag-edge"


def test_a_whole_answer_carries_its_verdict_and_sources(service: Running) -> None:
    completion = ask(service, {"role": "system", "content": "Be brief."}, user(WAL))
    choice = completion.choices[0]
    assert completion.object == "chat.completion" and completion.model == MODEL
    assert choice.message.role == "assistant" and choice.message.content.strip()
    assert choice.finish_reason in ("stop", "length")
    crag = completion.model_extra["crag"]
    assert crag["decision"] in ("CORRECT", "AMBIGUOUS") and crag["question"] == WAL
    assert crag["sources"][0]["source"].endswith("sqlite-wal.md")
    assert crag["sources"][0]["locator"] == "sqlite-wal.md § SQLite write-ahead logging"
    assert [s["n"] for s in crag["sources"]] == list(range(1, len(crag["sources"]) + 1))
    for source in crag["sources"]:
        assert source["cited"] == (f"[{source['n']}]" in choice.message.content)


def test_a_streamed_answer_arrives_in_chunks_and_ends_with_the_verdict(service: Running) -> None:
    chunks = list(ask(service, user(WAL), stream=True))
    assert all(c.object == "chat.completion.chunk" and c.model == MODEL for c in chunks)
    assert len({c.id for c in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks)
    assert text.strip()
    last = chunks[-1]
    assert last.choices[0].finish_reason in ("stop", "length")
    assert [c for c in chunks if c.choices[0].finish_reason] == [last]
    assert last.model_extra["crag"]["sources"][0]["source"].endswith("sqlite-wal.md")


def test_the_stream_is_server_sent_events_ending_with_done(service: Running) -> None:
    body = {"model": MODEL, "messages": [user(NONSENSE)], "stream": True}
    with service.client() as c, c.stream("POST", "/v1/chat/completions", json=body) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        events = [line.removeprefix("data: ") for line in r.iter_lines() if line]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
    # No model was asked; the reply says so, then what to do next.
    assert text.startswith(INSUFFICIENT.format(fallback="") + "\n\nAsk again in the words")
    assert chunks[-1]["crag"]["refusal"]["kind"] == "nothing_found"
    assert chunks[-1]["crag"]["decision"] == "INCORRECT"
    assert chunks[-1]["crag"]["finish_reason"] == "insufficient_evidence"


def test_a_follow_up_is_answered_from_the_standalone_question(service: Running) -> None:
    first = ask(service, user(WAL)).choices[0].message.content
    completion = ask(service, user(WAL), {"role": "assistant", "content": first}, user(FOLLOW_UP))
    crag = completion.model_extra["crag"]
    rewrite = crag["follow_up"]
    assert rewrite["question"] == FOLLOW_UP and rewrite["by"] == "keywords"
    assert rewrite["standalone"] == crag["question"] and "sqlite" in crag["question"].lower()
    assert crag["sources"] and crag["sources"][0]["source"].endswith("sqlite-wal.md")


def test_auth_model_and_messages_are_checked(service: Running) -> None:
    with pytest.raises(openai.AuthenticationError) as listed:
        client(service, key="wrong").models.list()
    with pytest.raises(openai.AuthenticationError) as asked:
        client(service, key="wrong").chat.completions.create(model=MODEL, messages=[user(WAL)])
    with pytest.raises(openai.NotFoundError) as unknown:
        client(service).chat.completions.create(model="gpt-4o", messages=[user(WAL)])
    with pytest.raises(openai.UnprocessableEntityError) as answered:
        ask(service, user(WAL), {"role": "assistant", "content": "Sure."})
    with pytest.raises(openai.UnprocessableEntityError) as empty:
        ask(service, user("   "))
    with pytest.raises(openai.APIStatusError) as oversized:  # refused before any route runs
        ask(service, user("word " * 20000))
    # OpenAI's error shape, the one its clients read: the code, and the message in the error.
    refused = (listed, asked, unknown, answered, empty, oversized)
    assert [e.value.code for e in refused] == [
        "unauthorized",
        "unauthorized",
        "model_not_found",
        "invalid_messages",
        "invalid_question",
        "body_too_large",
    ]
    assert "a valid bearer token is required" in str(listed.value)
    assert "no model 'gpt-4o'" in str(unknown.value)
    assert "the question is empty" in str(empty.value)
    assert oversized.value.status_code == 413 and "exceeds the limit" in str(oversized.value)


def test_a_client_that_hangs_up_stops_its_whole_answer(tmp_path: Path, embedder: Any) -> None:
    """A whole (not streamed) answer is written for a client that may time out and go: the
    model stops then, and its slot serves the next caller."""
    db = sample_corpus(tmp_path, embedder)
    body = json.dumps({"model": MODEL, "messages": [user(WAL)]}).encode()
    head = b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
    with endless_llm_server() as llm:
        factory = factory_for(db, embedder, llm_url=llm.url, llm_retries=0)
        with running(ServerConfig(db=db), factory) as srv:
            port = int(srv.url.rsplit(":", 1)[1])
            with socket.create_connection(("127.0.0.1", port)) as impatient:
                impatient.sendall(head + b"Content-Length: %d\r\n\r\n" % len(body) + body)
                assert llm.asked.wait(120), "the model was never asked"
            stopped = llm.hung_up.wait(60)
            llm.stop.set()  # lets an answer that went on end, so the service can stop
            with srv.client() as c:
                after = c.post("/v1/query", json={"question": WAL})
    assert stopped, "the model kept writing for a client that had gone"
    assert after.status_code == 200


def test_an_llm_failure_is_said_in_its_own_words_whole_and_streamed(
    tmp_path: Path, embedder: Any
) -> None:
    """A prompt too long for the LLM's context is a failure the service can name: the whole
    answer is a 500 carrying the LLM's message (not an anonymous internal error), and the
    streamed ones end with an error event saying the same."""
    db = sample_corpus(tmp_path, embedder)
    factory = factory_for(db, embedder, llm_context=512, context_budget_tokens=4096)
    question = WAL + " Explain the write-ahead log, its checkpoints and its readers." * 25
    with running(ServerConfig(db=db, settings=ServerSettings(api_token=TOKEN)), factory) as srv:
        with pytest.raises(openai.InternalServerError) as whole:
            ask(srv, user(question))
        assert whole.value.code == "llm_call_failed"
        assert "does not fit the 512-token context" in str(whole.value)
        with pytest.raises(openai.APIError) as streamed:
            list(ask(srv, user(question), stream=True))
        assert "does not fit the 512-token context" in str(streamed.value)
        with httpx.Client(base_url=srv.url, headers={"Authorization": f"Bearer {TOKEN}"}) as c:
            events = c.post("/v1/answer", json={"question": question}, timeout=300).text
        assert "event: error" in events and '"error": "llm_call_failed"' in events
        assert "does not fit the 512-token context" in events
