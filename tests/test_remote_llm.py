"""The OpenAI-compatible LLM backend against llama-cpp-python's real server (SmolLM2-135M):
chat, streaming, the grammar, the judge's probabilities next to the in-process runtime's on
the same model, a server without logprobs, retries across a restarted server, and the
engine answering through `llm_url`.

SmolLM2 is far too small to judge relevance: the judge tests compare the two runtimes'
scores, never their quality.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading.llm_judge import LlmJudge
from crag_edge.models.chat_model import ChatModel, LlmCallError, LlmServerError
from crag_edge.models.llm import LlamaRuntime, SharedLlm
from crag_edge.models.manifest import load_manifest
from crag_edge.models.registry import installed_file
from crag_edge.models.remote_llm import OpenAiLlm
from tests.servers import LlmServer, free_port, llama_cpp_server

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
    remote: OpenAiLlm, model_file: Path
) -> None:
    assert remote.model_id.endswith(model_file.name)
    assert remote.exact_tokens


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
        assert isinstance(engine.llm(), OpenAiLlm)
    assert result.context and answer.strip()
    assert stream.finish_reason in ("stop", "length")
    assert any("llm" in grade.tiers for _, grade in result.hits)
