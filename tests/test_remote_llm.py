"""The OpenAI-compatible LLM backend against llama-cpp-python's real server (SmolLM2-135M):
chat, streaming, the grammar, the judge's probabilities next to the in-process runtime's on
the same model, a server without logprobs, retries across a restarted server, and the
engine answering through `llm_url`.

SmolLM2 is far too small to judge relevance: the judge tests compare the two runtimes'
scores, never their quality.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading.llm_judge import LlmJudge
from crag_edge.models.chat_model import ChatModel, LlmCallError, LlmServerError
from crag_edge.models.llm import LlamaRuntime, SharedLlm
from crag_edge.models.llm_http import MAX_EVENT_CHARS, LlmHttp, retry_after_s
from crag_edge.models.manifest import load_manifest
from crag_edge.models.registry import installed_file
from crag_edge.models.remote_llm import CHARS_PER_TOKEN, OpenAiLlm
from tests.servers import (
    ApiRequest,
    ApiResponse,
    LlmServer,
    api_server,
    free_port,
    llama_cpp_server,
    socket_server,
    trickle,
)

pytestmark = [pytest.mark.models, pytest.mark.slow]

MODEL_ID = "smollm2-135m-instruct"
N_CTX = 1024
QUERY = "What is the boiling point of water at sea level?"
PASSAGES = [
    "Water boils at 100 degrees Celsius at sea level.",
    "The Eiffel Tower is in Paris.",
    "At higher altitudes water boils at lower temperatures.",
    "Bananas are rich in potassium.",
    "Pressure cookers raise the boiling point of water.",
    "The Pacific is the largest ocean.",
    "Sea level is the average height of the ocean's surface.",
]
LONG_REPLY = [{"role": "user", "content": "Write a long story about a dragon."}]
SAMPLE = Path(__file__).parent.parent / "sample_corpus"
# The bar for judge scores through a server against the in-process runtime.
JUDGE_TOLERANCE = 0.02


@pytest.fixture(scope="module")
def model_file() -> Path:
    settings = Settings.load()
    spec = load_manifest(settings.models.model_dir).get(MODEL_ID)
    return installed_file(settings.models, MODEL_ID, spec.files[0].name)


@pytest.fixture(scope="module")
def server(model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlmServer]:
    log = tmp_path_factory.mktemp("llm-server") / "server.log"
    with llama_cpp_server(model_file, log) as running:
        yield running


def remote_settings(url: str, **more: Any) -> Settings:
    return Settings.load(llm_url=url, llm_context=N_CTX, llm_timeout_s=120, **more)


@pytest.fixture(scope="module")
def remote(server: LlmServer) -> OpenAiLlm:
    return OpenAiLlm.connect(remote_settings(server.url).models)


@pytest.fixture(scope="module")
def local(model_file: Path) -> LlamaRuntime:
    return LlamaRuntime(model_file, model_id=MODEL_ID, n_ctx=N_CTX, n_threads=1, timeout_s=120)


def test_the_model_is_the_one_the_server_lists_and_its_tokenizer_is_used(
    remote: OpenAiLlm, local: LlamaRuntime, model_file: Path
) -> None:
    assert remote.model_id.endswith(model_file.name)
    text = "Say hello to the world, twice over."
    assert remote.count_tokens(text) == local.count_tokens(text)  # not the estimate
    assert remote.count_tokens(text) != -(-len(text) // CHARS_PER_TOKEN)


def test_chat_through_the_server(remote: OpenAiLlm) -> None:
    reply = remote.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert reply.text.strip()
    assert reply.finish_reason in ("stop", "length")
    assert 0 < reply.completion_tokens <= 8 and reply.prompt_tokens > 0


def test_the_grammar_reaches_the_server(remote: OpenAiLlm) -> None:
    reply = remote.chat(
        [{"role": "user", "content": "Is the sky green?"}], grammar='root ::= "yes" | "no"'
    )
    assert reply.text in ("yes", "no")


def test_a_call_out_of_time_says_timeout(remote: OpenAiLlm) -> None:
    reply = remote.chat([{"role": "user", "content": "Tell a long story."}], timeout_s=0.0)
    assert reply.timed_out and reply.text == ""


def test_streaming_through_the_server(remote: OpenAiLlm) -> None:
    stream = remote.stream_chat(LONG_REPLY, max_tokens=4)
    pieces = list(stream)
    assert len(pieces) >= 2
    assert stream.finish_reason == "length"
    assert stream.text == "".join(pieces)


def test_a_stream_that_stalls_stops_with_timeout(remote: OpenAiLlm) -> None:
    stream = remote.stream_chat(LONG_REPLY, stall_timeout_s=0.0)
    assert list(stream) == []
    assert stream.finish_reason == "timeout"


def test_token_counts_match_the_in_process_tokenizer(
    remote: OpenAiLlm, local: LlamaRuntime
) -> None:
    text = " ".join(PASSAGES)
    assert remote.count_tokens(text) == local.count_tokens(text)
    assert remote.truncate(text, 10) == local.truncate(text, 10)
    # The server's chat template is not known here: its count may only err on the long side.
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": QUERY}]
    assert remote.count_chat_tokens(messages) >= local.count_chat_tokens(messages)


def test_judge_scores_through_the_server_match_the_in_process_runtime(
    remote: OpenAiLlm, local: LlamaRuntime
) -> None:
    runtimes: list[ChatModel] = [remote, local]
    through_server, in_process = (LlmJudge(r).score(QUERY, PASSAGES) for r in runtimes)
    assert through_server.failed == [] and in_process.failed == []
    assert len(set(in_process.scores)) > 1  # the comparison is not between constants
    for a, b in zip(through_server.scores, in_process.scores, strict=True):
        assert a == pytest.approx(b, abs=JUDGE_TOLERANCE)


def test_a_server_without_logprobs_is_an_error_naming_it(model_file: Path, tmp_path: Path) -> None:
    with llama_cpp_server(model_file, tmp_path / "log", logits_all=False, n_ctx=512) as bare:
        runtime = OpenAiLlm.connect(remote_settings(bare.url, llm_retries=0).models)
        assert runtime.chat([{"role": "user", "content": "hi"}], max_tokens=2).text
        with pytest.raises(LlmServerError) as raised:
            LlmJudge(runtime).score(QUERY, PASSAGES[:2])
    message = str(raised.value)
    assert bare.url in message and "CRAG_EDGE_LLM_URL" in message
    assert "log-probabilities" in message and "--logits_all true" in message


def test_an_unreachable_server_is_an_error_naming_it() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LlmServerError, match=f"cannot reach the LLM server at {url}"):
        SharedLlm(remote_settings(url, llm_retries=0).models)()


def test_retries_carry_a_call_across_a_restarted_server(model_file: Path, tmp_path: Path) -> None:
    """Killed mid-service: without retries the call fails at once; with them it waits
    (backing off) until the server is back on its port."""
    log = tmp_path / "log"
    with llama_cpp_server(model_file, log, n_ctx=512) as first:
        patient = OpenAiLlm.connect(remote_settings(first.url, llm_retries=6).models)
        impatient = OpenAiLlm.connect(remote_settings(first.url, llm_retries=0).models)
        first.process.kill()
        first.process.wait()
    question = [{"role": "user", "content": "Say hello."}]
    with pytest.raises(LlmCallError, match="after 1 attempts"):
        impatient.chat(question, max_tokens=4)
    back_up = threading.Event()
    done = threading.Event()

    def restart() -> None:
        with llama_cpp_server(model_file, log, n_ctx=512, port=first.port):
            back_up.set()
            done.wait()

    threading.Thread(target=restart, daemon=True).start()
    try:
        reply = patient.chat(question, max_tokens=4)
    finally:
        done.set()
    # The reply came from the restarted server; its starter marks it up only once its own
    # readiness check returns, which may trail the first answered request.
    assert back_up.wait(timeout=60)
    assert reply.text.strip()


def test_the_engine_answers_through_llm_url(
    server: LlmServer, tmp_path: Path, embedder: Any
) -> None:
    settings = remote_settings(
        server.url,
        grading_tiers=["signals", "cross_encoder", "llm"],
        rewrite_with_llm=True,
        llm_max_tokens=24,
    )
    with Engine.open(tmp_path / "corpus.db", settings, create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
        result, stream = engine.answer("How does SQLite write-ahead logging work?")
        answer = "".join(stream)
        assert isinstance(engine.llm_factory(), OpenAiLlm)
    assert result.context and answer.strip()
    assert stream.finish_reason in ("stop", "length", "unsupported")  # checked by the server too
    assert stream.answer.support.sentences
    assert any("llm" in grade.tiers for _, grade in result.hits)


# -- a server that breaks the protocol ----------------------------------------------------
# Raw sockets on 127.0.0.1 play the servers no real one should be: malformed events, wrong
# shapes, trickles. Each must end the call in one line or as a timeout, never hang or crash.

STREAM_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n"
HI = [{"role": "user", "content": "hi"}]


def delta(text: str) -> bytes:
    return b"data: " + json.dumps({"choices": [{"delta": {"content": text}}]}).encode() + b"\n\n"


def json_head(body: bytes) -> bytes:
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % (
        len(body)
    )


def misbehaving(url: str, patience_s: float = 1.0) -> OpenAiLlm:
    """A runtime for the server at `url`, `patience_s` per call or silence, no retries."""
    http = LlmHttp(url + "/v1", None, retries=0)
    return OpenAiLlm(
        http,
        "m",
        n_ctx=N_CTX,
        max_tokens=16,
        timeout_s=patience_s,
        stall_timeout_s=patience_s,
        tokenizer=None,
    )


def sends(data: bytes) -> Callable[[socket.socket, bytes], None]:
    return lambda connection, request: connection.sendall(data)


@pytest.mark.parametrize(
    ("stream", "said"),
    [
        (delta("Hi") + b"data: {not json\n\n", "a stream event is not JSON"),
        (delta("Hi") + b'data: {"error": {"message": "out of memory"}}\n\n', "out of memory"),
        (b'data: {"choices": "x"}\n\n', "(choices: Input should be a valid list)"),
        (b'data: {"choices": [null]}\n\n', "choices.0"),
        (b'data: {"choices": [{"delta": "Hi"}]}\n\n', "choices.0.delta"),
        (b'data: {"choices": [{"delta": {"content": 5}}]}\n\n', "choices.0.delta.content"),
        (delta("Hi"), "ended without [DONE]: the reply is cut off"),
        (b"", "ended without [DONE]"),
    ],
    ids=["not-json", "error", "choices", "null", "delta", "number", "no-done", "empty"],
)
def test_a_stream_that_breaks_the_protocol_fails_in_one_line(stream: bytes, said: str) -> None:
    with socket_server(sends(STREAM_HEAD + stream)) as url, pytest.raises(LlmCallError) as raised:
        "".join(misbehaving(url).stream_chat(HI))
    assert said in str(raised.value) and "\n" not in str(raised.value)


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"], ids=["lf", "crlf", "cr"])
def test_a_stream_ends_its_lines_as_server_sent_events_may(end: bytes) -> None:
    """Each of CR, LF and CRLF ends a line; the last line needs no line end."""
    events = [delta("Hello"), delta(" there"), b"data: [DONE]"]
    stream = (end + end).join(event.strip() for event in events)
    with socket_server(sends(STREAM_HEAD + stream)) as url:
        answer = misbehaving(url).stream_chat(HI)
        assert "".join(answer) == "Hello there"
    assert answer.finish_reason == "stop"


def test_stream_events_without_a_choice_say_nothing() -> None:
    """Azure sends its content filter results first, OpenAI the usage last, with no choice."""
    filtered = b'data: {"choices": [], "prompt_filter_results": [{"prompt_index": 0}]}\n\n'
    usage = b'data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 2}}\n\n'
    stream = filtered + delta("Hello") + delta(" there") + usage + b"data: [DONE]\n\n"
    with socket_server(sends(STREAM_HEAD + stream)) as url:
        answer = misbehaving(url).stream_chat(HI)
        assert "".join(answer) == "Hello there"
    assert answer.finish_reason == "stop"


def pings(connection: socket.socket, request: bytes) -> None:
    """Keep-alive comments, four a second for ten seconds, and no token."""
    connection.sendall(STREAM_HEAD)
    for _ in range(40):
        connection.sendall(b": ping\n\n")
        time.sleep(0.25)
    connection.sendall(b"data: [DONE]\n\n")


def slow_head(connection: socket.socket, request: bytes) -> None:
    trickle(connection, STREAM_HEAD, 0.05)
    connection.sendall(delta("late") + b"data: [DONE]\n\n")


@pytest.mark.parametrize("talk", [pings, slow_head], ids=["pings", "trickled-head"])
def test_a_stream_without_tokens_stops_with_timeout(
    talk: Callable[[socket.socket, bytes], None],
) -> None:
    """Bytes that carry no token are silence: the stall limit counts them as such."""
    with socket_server(talk) as url:
        stream = misbehaving(url).stream_chat(HI)
        assert list(stream) == []
    assert stream.finish_reason == "timeout"


def test_a_stream_event_that_never_ends_is_refused() -> None:
    endless = STREAM_HEAD + b"data: " + b"x" * (MAX_EVENT_CHARS + 65536)
    exceeds = "a stream event exceeds 1,048,576 characters"
    with socket_server(sends(endless)) as url, pytest.raises(LlmCallError, match=exceeds):
        list(misbehaving(url).stream_chat(HI))


def test_a_trickled_reply_is_out_of_time() -> None:
    body = json.dumps({"choices": [{"message": {"content": "hi"}}]}).encode()
    with socket_server(
        lambda connection, _: trickle(connection, json_head(body) + body, 0.05)
    ) as url:
        reply = misbehaving(url).chat(HI)
    assert reply.timed_out and reply.text == ""


def test_a_reply_larger_than_any_answer_is_refused() -> None:
    """A short call's reply is one answer of at most llm_max_tokens: 20 MiB is not one."""
    huge = json.dumps({"choices": [{"message": {"content": "x" * (20 << 20)}}]}).encode()
    exceeds = "the reply exceeds 16 MiB"
    with (
        socket_server(sends(json_head(huge) + huge)) as url,
        pytest.raises(LlmCallError, match=exceeds),
    ):
        misbehaving(url, patience_s=60.0).chat(HI)


@pytest.mark.parametrize(
    "entry",
    [{"token": "yes", "logprob": 1e308}, {"token": "yes"}, {"token": "yes", "logprob": "high"}],
    ids=["overflow", "missing", "text"],
)
def test_a_judge_reply_of_the_wrong_shape_scores_neutral(entry: dict[str, Any]) -> None:
    logprobs = {"content": [{"token": "yes", "logprob": 0.0, "top_logprobs": [entry]}]}
    body = json.dumps({"choices": [{"message": {"content": "yes"}, "logprobs": logprobs}]})
    with socket_server(sends(json_head(body.encode()) + body.encode())) as url:
        batch = LlmJudge(misbehaving(url)).score(QUERY, PASSAGES[:1])
    assert batch.scores == [0.5] and batch.failed == [0]
    assert "cannot read (choices.0.logprobs.content.0.top_logprobs.0.logprob" in batch.warnings[0]


def test_a_server_that_ignores_max_tokens_is_cut_off_at_it() -> None:
    """Without a limit of its own the answer would last as long as the server cared to send
    (here 5,000 tokens for a limit of 16)."""

    def chatter(connection: socket.socket, request: bytes) -> None:
        connection.sendall(STREAM_HEAD + delta("word ") * 5000 + b"data: [DONE]\n\n")

    with socket_server(chatter) as url:
        stream = misbehaving(url).stream_chat(HI)
        pieces = list(stream)
    assert len(pieces) == 16 and stream.finish_reason == "length"


def test_a_reply_passes_the_text_boundary() -> None:
    """A follow-up question or a rewrite is searched and shown: a JSON escape for a lone
    surrogate would stop the tokenizer, an escape sequence would reach the terminal."""
    body = json.dumps({"choices": [{"message": {"content": "Bees\x1b[2J dance \ud800?"}}]})
    with socket_server(sends(json_head(body.encode()) + body.encode())) as url:
        reply = misbehaving(url).chat(HI)
    assert reply.text == "Bees[2J dance \ufffd?"


def test_an_error_page_from_a_proxy_is_quoted_on_one_line() -> None:
    page = b"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>nginx</body>\r\n"
    reply = b"HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: %d\r\n\r\n"
    with (
        socket_server(sends(reply % len(page) + page)) as url,
        pytest.raises(LlmCallError) as raised,
    ):
        misbehaving(url).chat(HI)
    assert "HTTP 502: <html> <head><title>502 Bad Gateway</title></head> <body>nginx" in str(
        raised.value
    )
    assert "\n" not in str(raised.value) and "\r" not in str(raised.value)


def test_a_redirect_names_where_it_points() -> None:
    """Not followed (the key would go along): the setting is what should change."""
    moved = (
        b"HTTP/1.1 301 Moved Permanently\r\nLocation: https://llm.example/v1/chat/completions\r\n"
    )
    with (
        socket_server(sends(moved + b"Content-Length: 0\r\n\r\n")) as url,
        pytest.raises(LlmServerError) as raised,
    ):
        misbehaving(url).chat(HI)
    assert "redirects to https://llm.example/v1/chat/completions (HTTP 301)" in str(raised.value)
    assert "CRAG_EDGE_LLM_URL" in str(raised.value)


def test_an_error_reply_is_read_only_as_far_as_its_message() -> None:
    """A 500 whose body never ends (64 MiB here) is cut off once its message is read."""
    finished: list[bool] = []

    def endless_error(connection: socket.socket, request: bytes) -> None:
        connection.sendall(b"HTTP/1.1 500 Internal Server Error\r\nConnection: close\r\n\r\n")
        for _ in range(64):
            connection.sendall(b"overloaded " * 95325)
        finished.append(True)

    with socket_server(endless_error) as url, pytest.raises(LlmCallError, match="HTTP 500: over"):
        misbehaving(url, patience_s=60.0).chat(HI)
    assert finished == []


def test_a_server_without_a_tokenizer_is_used_with_estimated_counts() -> None:
    """vLLM and Ollama answer 404 at both tokenizer endpoints: counts are estimated."""
    asked: list[str] = []

    def openai_only(request: ApiRequest) -> ApiResponse:
        asked.append(request.path)
        if request.path == "/v1/models":
            return 200, {"Content-Type": "application/json"}, b'{"data": [{"id": "qwen"}]}'
        return 404, {"Content-Type": "application/json"}, b'{"detail": "Not Found"}'

    with api_server(openai_only) as url:
        runtime = OpenAiLlm.connect(Settings.load(llm_url=url + "/v1", llm_retries=0).models)
    assert runtime.model_id == "qwen"
    assert runtime.count_tokens("x" * 30) == 30 // CHARS_PER_TOKEN  # estimated: no tokenizer
    assert asked == ["/v1/models", "/extras/tokenize", "/tokenize"]


def test_a_password_in_llm_url_is_sent_but_never_shown() -> None:
    """A failed call is a warning in a result an API client reads: no password in it."""
    seen: list[str] = []

    def guarded(request: ApiRequest) -> ApiResponse:
        seen.append(request.headers.get("Authorization", ""))
        return 503, {"Content-Type": "application/json"}, b'{"detail": "loading"}'

    with api_server(guarded) as url, pytest.raises(LlmCallError) as raised:
        misbehaving(url.replace("http://", "http://alice:s3cret@")).chat(HI)
    assert seen == ["Basic YWxpY2U6czNjcmV0"]  # alice:s3cret
    assert "HTTP 503: loading" in str(raised.value) and "s3cret" not in str(raised.value)


def test_a_reply_without_logprobs_after_others_had_them_scores_neutral() -> None:
    """The server gave log-probabilities, so it can: one reply without is a failed call
    (0.5 and a warning), not a setting error that stops the loop."""
    replies = iter([[{"token": "yes", "logprob": -0.1}, {"token": "no", "logprob": -2.5}], []])

    def flaky(request: ApiRequest) -> ApiResponse:
        top = next(replies)
        logprobs = {"content": [{"token": "yes", "logprob": -0.1, "top_logprobs": top}]}
        body = {"choices": [{"message": {"content": "yes"}, "logprobs": logprobs}]}
        return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()

    with api_server(flaky) as url:
        judge = LlmJudge(misbehaving(url))
        first, second = judge.score(QUERY, PASSAGES[:1]), judge.score(QUERY, PASSAGES[:1])
    assert first.failed == [] and first.scores[0] > 0.5
    assert second.scores == [0.5] and "no top_logprobs" in second.warnings[0]


def test_a_server_still_loading_at_the_first_judged_batch_scores_neutral() -> None:
    """llama-server answers 503 while it loads its model: a failed call like any other,
    not a server without log-probabilities."""
    loading = b'{"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}'
    with api_server(lambda request: (503, {"Content-Type": "application/json"}, loading)) as url:
        batch = LlmJudge(misbehaving(url)).score(QUERY, PASSAGES[:1])
    assert batch.scores == [0.5] and "HTTP 503: Loading model" in batch.warnings[0]


def test_a_rate_limited_call_waits_as_long_as_the_server_asks() -> None:
    """A 429 with `Retry-After: 1` is tried again after a second, not after the first
    backoff's half second (which earns another refusal); a wait longer than the call may
    take fails it at once, saying so."""
    asked_at: list[float] = []

    def limited(request: ApiRequest) -> ApiResponse:
        asked_at.append(time.monotonic())
        if len(asked_at) == 1:
            return 429, {"Content-Type": "application/json", "Retry-After": "1"}, b"{}"
        return 200, {"Content-Type": "application/json"}, b'{"ok": true}'

    with api_server(limited) as url:
        http = LlmHttp(url + "/v1", None, retries=1)
        assert http.get("/models", time.monotonic() + 30) == {"ok": True}
    assert asked_at[1] - asked_at[0] >= 1.0
    forever = {"Content-Type": "application/json", "Retry-After": "3600"}
    with api_server(lambda request: (429, forever, b"{}")) as url, pytest.raises(LlmCallError) as e:
        LlmHttp(url + "/v1", None, retries=2).get("/models", time.monotonic() + 30)
    assert "asks to wait 3600 s, longer than the call may take" in str(e.value)
    assert retry_after_s("Wed, 21 Oct 2015 07:28:00 GMT") == 0.0  # a date already past
    assert retry_after_s("soon") == retry_after_s("-5") == retry_after_s("nan") == 0.0
