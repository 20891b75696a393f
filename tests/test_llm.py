"""LlamaRuntime and LlmJudge on the real SmolLM2-135M GGUF.

SmolLM2 is far too small to judge relevance, so these tests check plumbing (shapes,
bounds, timeouts, errors, locking), never the quality of the scores.
"""

from __future__ import annotations

import hashlib
import math
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from crag_edge.answer.generation import SYSTEM
from crag_edge.config import Settings
from crag_edge.grading.llm_judge import MODES, JudgeMode, LlmJudge, parse_ratings, rating_grammar
from crag_edge.models.llm import LlamaRuntime, LlmUnavailableError, load_llm
from crag_edge.models.registry import ModelNotInstalledError
from crag_edge.types import PairScorer

pytestmark = pytest.mark.models

MODEL_ID = "smollm2-135m-instruct"
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


@pytest.fixture(scope="module")
def model_path(smollm_path: Path) -> Path:
    return smollm_path


@pytest.fixture(scope="module")
def runtime(model_path: Path) -> LlamaRuntime:
    # One thread: llama.cpp's spinning workers collapse when the cores are shared with
    # other test processes, and a 135M model gains little from a second one.
    return LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=2048, n_threads=1, timeout_s=120)


def test_runtime_answers(runtime: LlamaRuntime) -> None:
    reply = runtime.chat([{"role": "user", "content": "Say hello."}], max_tokens=8)
    assert reply.text.strip()
    assert reply.finish_reason in ("stop", "length")
    assert 0 < reply.completion_tokens <= 8


def test_grammar_constrains_chat(runtime: LlamaRuntime) -> None:
    reply = runtime.chat(
        [{"role": "user", "content": "Is the sky green?"}], grammar='root ::= "yes" | "no"'
    )
    assert reply.text in ("yes", "no")
    assert reply.finish_reason == "stop"


def test_invalid_grammar_is_an_error_not_a_crash(runtime: LlamaRuntime) -> None:
    with pytest.raises(ValueError, match="invalid GBNF"):
        runtime.chat([{"role": "user", "content": "hi"}], grammar='root ::= "a" (((')


def test_chat_timeout_returns_instead_of_raising(runtime: LlamaRuntime) -> None:
    reply = runtime.chat([{"role": "user", "content": "Tell a long story."}], timeout_s=0.0)
    assert reply.timed_out
    assert reply.text == ""


def test_waiting_for_a_busy_model_counts_against_the_timeout(runtime: LlamaRuntime) -> None:
    with runtime._lock:  # another thread holding the model
        reply = runtime.chat([{"role": "user", "content": "hi"}], timeout_s=0.2)
        probs = runtime.next_token_logprobs(
            [[{"role": "user", "content": "hi"}]], [0], timeout_s=0.2
        )
    assert reply.timed_out
    assert probs.timed_out and probs.rows == [None]


def test_stream_cut_by_max_tokens_says_length(runtime: LlamaRuntime) -> None:
    stream = runtime.stream_chat(LONG_REPLY, max_tokens=2)
    pieces = list(stream)
    assert stream.finish_reason == "length"
    assert stream.text == "".join(pieces) and stream.text.strip()


def test_stream_that_stalls_stops_with_timeout(runtime: LlamaRuntime) -> None:
    stream = runtime.stream_chat(LONG_REPLY, stall_timeout_s=0.0)
    assert list(stream) == []
    assert stream.finish_reason == "timeout"


def test_stream_waiting_for_a_busy_model_is_a_stall(runtime: LlamaRuntime) -> None:
    with runtime._lock:  # another thread holding the model
        stream = runtime.stream_chat(LONG_REPLY, stall_timeout_s=0.2)
        assert list(stream) == []
    assert stream.finish_reason == "timeout"


def test_stream_stall_limit_is_on_silence_not_on_the_total(runtime: LlamaRuntime) -> None:
    """The whole stream outlasts its stall limit and still ends on its own: the limit
    restarts with every token, and the reader's pause between pieces is not a stall."""
    stream = runtime.stream_chat(LONG_REPLY, max_tokens=4, stall_timeout_s=3.0)
    first = next(stream)
    time.sleep(3.5)
    rest = list(stream)
    assert stream.finish_reason == "length"
    assert stream.text == first + "".join(rest)


def test_stream_finish_reason_is_known_only_at_the_end(runtime: LlamaRuntime) -> None:
    stream = runtime.stream_chat(LONG_REPLY, max_tokens=8)
    with pytest.raises(RuntimeError, match="has not ended"):
        _ = stream.finish_reason
    assert next(stream)
    with pytest.raises(RuntimeError, match="has not ended"):
        _ = stream.finish_reason
    stream.close()  # a reader that stops early gives the model back
    assert runtime._lock.acquire(blocking=False)
    runtime._lock.release()


def test_shared_prefixes_are_evaluated_once(runtime: LlamaRuntime) -> None:
    prompts = [[{"role": "user", "content": f"{QUERY}\n{p}"}] for p in PASSAGES[:3]]
    ids = [runtime.tokenize("Yes")[0], runtime.tokenize("No")[0]]
    forward = runtime.next_token_logprobs(prompts, ids)
    backward = runtime.next_token_logprobs(prompts[::-1], ids)
    total = sum(len(runtime.chat_tokens(p)) for p in prompts)
    assert forward.evaluated_tokens < total
    for a, b in zip(forward.rows, backward.rows[::-1], strict=True):
        assert a is not None and b is not None
        assert a == pytest.approx(b, abs=1e-3)
        assert all(v < 0 for v in a)


def _answer_prompt(question: str) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"{question}\n\nContext passages:\n\n[1] {PASSAGES[0]}"},
    ]


def test_answer_after_a_judge_call_reuses_its_system_prompt(model_path: Path) -> None:
    """The judge's prompt replaces the answer's in the KV cache; the answer's fixed part
    (template header and system prompt) comes back from its snapshot, not evaluated again,
    and the logits after the restored prefix are the ones a fresh evaluation gives."""
    fresh_runtime = LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=2048, n_threads=1)
    first, second = _answer_prompt(QUERY), _answer_prompt("Why do pressure cookers work?")
    opening = fresh_runtime.stream_chat(first, max_tokens=2)
    "".join(opening)
    assert opening.usage.evaluated_tokens == opening.usage.prompt_tokens  # nothing cached yet
    LlmJudge(fresh_runtime).score(QUERY, PASSAGES[:2])  # another system prompt in the cache
    reply = fresh_runtime.stream_chat(second, max_tokens=2)
    "".join(reply)
    fixed = _shared_prefix(fresh_runtime.chat_tokens(first), fresh_runtime.chat_tokens(second))
    assert reply.usage.prompt_tokens is not None and fixed > 20
    assert reply.usage.evaluated_tokens == reply.usage.prompt_tokens - fixed
    fresh_runtime.next_token_logprobs([LONG_REPLY], [1])  # no system prompt at all now
    restored = fresh_runtime.answer_logprobs([second], ["yes", "no"]).rows[0]
    cold = LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=2048, n_threads=1)
    assert restored == pytest.approx(cold.answer_logprobs([second], ["yes", "no"]).rows[0])


def _turns_prompt(question: str) -> list[dict[str, str]]:
    """A system prompt, one earlier exchange, then the question: a prompt with history."""
    return [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": f"Context passages:\n\n[1] {PASSAGES[1]}\n\nQuestion: Why?"},
        {"role": "assistant", "content": "Because the passage says so [1]."},
        {"role": "user", "content": question},
    ]


def test_every_turn_before_the_last_is_cached_with_the_system_prompt(model_path: Path) -> None:
    """After a judge call has replaced it in the KV cache, a prompt that opens with the same
    turns evaluates only its last message: the earlier turns are part of the fixed part."""
    fresh_runtime = LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=2048, n_threads=1)
    first, second = _turns_prompt(QUERY), _turns_prompt("Why do pressure cookers work?")
    "".join(fresh_runtime.stream_chat(first, max_tokens=2))
    LlmJudge(fresh_runtime).score(QUERY, PASSAGES[:2])
    reply = fresh_runtime.stream_chat(second, max_tokens=2)
    "".join(reply)
    empty_question = {"role": "user", "content": ""}
    system_only = len(fresh_runtime.chat_tokens([first[0], empty_question]))
    fixed = _shared_prefix(
        fresh_runtime.chat_tokens(second), fresh_runtime.chat_tokens([*second[:-1], empty_question])
    )
    assert fixed > system_only + 20  # the earlier exchange is part of what is reused
    assert reply.usage.prompt_tokens is not None
    assert reply.usage.evaluated_tokens == reply.usage.prompt_tokens - fixed


def _state_runtime(model_path: Path, state_dir: Path) -> LlamaRuntime:
    return LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=2048, n_threads=1, state_dir=state_dir)


def _answer(runtime: LlamaRuntime, prompt: list[dict[str, str]]) -> tuple[str, int, int]:
    """The reply to `prompt` (8 tokens), its prompt tokens and the tokens evaluated."""
    reply = runtime.stream_chat(prompt, max_tokens=8)
    text = "".join(reply)
    assert reply.usage.prompt_tokens is not None and reply.usage.evaluated_tokens is not None
    return text, reply.usage.prompt_tokens, reply.usage.evaluated_tokens


def _system_part(runtime: LlamaRuntime) -> int:
    empty_question = {"role": "user", "content": ""}
    return _shared_prefix(
        runtime.chat_tokens(_answer_prompt(QUERY)),
        runtime.chat_tokens([{"role": "system", "content": SYSTEM}, empty_question]),
    )


def test_a_later_process_reads_the_system_prompt_from_disk(
    model_path: Path, tmp_path: Path
) -> None:
    """The system prompt's KV snapshot outlives the runtime that evaluated it: a new runtime
    (a new `crag-edge ask`) evaluates only the user's turn and answers exactly the same."""
    first = _state_runtime(model_path, tmp_path)
    text, prompt_tokens, evaluated = _answer(first, _answer_prompt(QUERY))
    assert evaluated == prompt_tokens
    assert len(list(tmp_path.glob("*.kv"))) == 1
    later = _state_runtime(model_path, tmp_path)
    again, _, evaluated_later = _answer(later, _answer_prompt(QUERY))
    assert evaluated_later == prompt_tokens - _system_part(later)
    assert again == text


@pytest.mark.parametrize("damage", ["bit_flip", "truncated_with_valid_checksum"])
def test_a_damaged_snapshot_is_evaluated_again(
    model_path: Path, tmp_path: Path, damage: str
) -> None:
    """A snapshot file that fails its checksum, or that llama.cpp refuses, costs the
    evaluation it would have saved, never a wrong answer; a sound one replaces it."""
    text, prompt_tokens, _ = _answer(_state_runtime(model_path, tmp_path), _answer_prompt(QUERY))
    (snapshot,) = tmp_path.glob("*.kv")
    stored = snapshot.read_bytes()
    digest = hashlib.sha256().digest_size
    if damage == "bit_flip":
        snapshot.write_bytes(stored[:-1] + bytes([stored[-1] ^ 1]))
    else:
        data = stored[digest : digest + (len(stored) - digest) // 2]
        snapshot.write_bytes(hashlib.sha256(data).digest() + data)
    again, _, evaluated = _answer(_state_runtime(model_path, tmp_path), _answer_prompt(QUERY))
    assert (again, evaluated) == (text, prompt_tokens)
    third = _state_runtime(model_path, tmp_path)
    assert _answer(third, _answer_prompt(QUERY))[2] == prompt_tokens - _system_part(third)


def test_earlier_turns_of_a_conversation_are_never_written_to_disk(
    model_path: Path, tmp_path: Path
) -> None:
    runtime = _state_runtime(model_path, tmp_path)
    "".join(runtime.stream_chat(_turns_prompt(QUERY), max_tokens=2))
    assert not list(tmp_path.glob("*.kv"))


def _shared_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), len(a))


def test_scorer_protocol_and_empty_batch(runtime: LlamaRuntime) -> None:
    judge: PairScorer = LlmJudge(runtime, "grammar")
    assert judge.name == "llm-grammar"
    assert judge.score(QUERY, []).scores == []


@pytest.mark.parametrize("n", [1, 3, 7])
def test_grammar_mode_returns_exactly_n_scores(runtime: LlamaRuntime, n: int) -> None:
    batch = LlmJudge(runtime, "grammar").score(QUERY, PASSAGES[:n])
    assert batch.warnings == []
    assert len(batch.scores) == n
    assert all(0.0 <= s <= 1.0 for s in batch.scores)


@pytest.mark.parametrize("n", [1, 3])
def test_logprob_mode_returns_n_probabilities(runtime: LlamaRuntime, n: int) -> None:
    batch = LlmJudge(runtime, "logprob").score(QUERY, PASSAGES[:n])
    assert not any("timed out" in w for w in batch.warnings)
    assert len(batch.scores) == n
    assert all(0.0 < s < 1.0 and math.isfinite(s) for s in batch.scores)


@pytest.mark.parametrize("mode", MODES)
def test_timeout_scores_neutral_with_a_warning(runtime: LlamaRuntime, mode: JudgeMode) -> None:
    batch = LlmJudge(runtime, mode, timeout_s=0.0).score(QUERY, PASSAGES[:3])
    assert batch.scores == [0.5, 0.5, 0.5]
    assert len(batch.warnings) == 1 and "timed out" in batch.warnings[0]


def test_truncated_grammar_output_scores_neutral_with_a_warning(model_path: Path) -> None:
    starved = LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=1024, n_threads=1, max_tokens=4)
    batch = LlmJudge(starved, "grammar").score(QUERY, PASSAGES[:3])
    assert batch.scores == [0.5, 0.5, 0.5]
    assert len(batch.warnings) == 1 and "ran out of tokens" in batch.warnings[0]


def test_long_passages_are_truncated_to_fit(runtime: LlamaRuntime) -> None:
    long = "water " * 5000  # far beyond the 2048-token context on its own
    for mode in MODES:
        judge = LlmJudge(runtime, mode, max_passage_tokens=32)
        batch = judge.score(QUERY, [long, PASSAGES[0]])
        assert len(batch.scores) == 2
        assert not any("timed out" in w for w in batch.warnings)


class _Recording:
    """The real runtime, remembering the passages its judge prompts carried."""

    def __init__(self, runtime: LlamaRuntime) -> None:
        self._runtime = runtime
        self.prompts: list[str] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self._runtime, name)

    def answer_logprobs(self, prompts, answers, *, timeout_s=None):  # type: ignore[no-untyped-def]
        self.prompts += [prompt[-1]["content"] for prompt in prompts]
        return self._runtime.answer_logprobs(prompts, answers, timeout_s=timeout_s)


def test_a_focused_judge_reads_the_strips_that_cover_the_query(runtime: LlamaRuntime) -> None:
    filler = "The Eiffel Tower was completed in Paris in the year eighteen eighty-nine. " * 20
    passage = filler + PASSAGES[0]  # the answer lies beyond the whole reading's 256 tokens
    recording = _Recording(runtime)
    whole = LlmJudge(recording, "logprob")  # type: ignore[arg-type]
    focused = LlmJudge(recording, "logprob", focus_tokens=64)  # type: ignore[arg-type]
    assert len(whole.score(QUERY, [passage]).scores) == 1
    assert len(focused.score(QUERY, [passage]).scores) == 1
    read_whole, read_focused = recording.prompts
    assert PASSAGES[0] not in read_whole and PASSAGES[0] in read_focused
    assert runtime.count_tokens(read_focused) < runtime.count_tokens(read_whole)
    with pytest.raises(ValueError, match="focus_tokens"):
        LlmJudge(runtime, focus_tokens=8)


def test_two_threads_share_one_model(runtime: LlamaRuntime) -> None:
    grammar, logprob = LlmJudge(runtime, "grammar"), LlmJudge(runtime, "logprob")
    start = threading.Barrier(2)

    def run(judge: LlmJudge, n: int) -> list[float]:
        start.wait()
        batch = judge.score(QUERY, PASSAGES[:n])
        assert not any("timed out" in w for w in batch.warnings)
        return batch.scores

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.submit(run, grammar, 4), pool.submit(run, logprob, 2)
        assert len(first.result()) == 4
        assert len(second.result()) == 2


def test_missing_model_file_says_how_to_pull(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=f"crag-edge models pull {MODEL_ID}"):
        LlamaRuntime(tmp_path / "absent.gguf", model_id=MODEL_ID)
    with pytest.raises(ModelNotInstalledError, match=f"crag-edge models pull {MODEL_ID}"):
        load_llm(Settings.load(model_dir=tmp_path).models, MODEL_ID)


def test_load_llm_rejects_non_llm_models() -> None:
    with pytest.raises(ValueError, match="not an LLM"):
        load_llm(Settings.load().models, "all-minilm-l6-v2")


def test_random_bytes_are_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "random.gguf"
    path.write_bytes(bytes(range(256)) * 64)
    with pytest.raises(ValueError, match="not a GGUF model"):
        LlamaRuntime(path, model_id=MODEL_ID)


def test_corrupt_gguf_body_is_a_clear_error(tmp_path: Path, model_path: Path) -> None:
    path = tmp_path / "truncated.gguf"
    with model_path.open("rb") as handle:
        path.write_bytes(handle.read(1 << 20))  # a valid header, then the file just ends
    with pytest.raises(ValueError, match="not a loadable GGUF model"):
        LlamaRuntime(path, model_id=MODEL_ID)


def test_missing_llama_cpp_says_how_to_install(
    model_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes `import llama_cpp` fail
    with pytest.raises(LlmUnavailableError, match=r"pip install 'crag-edge\[llm\]'"):
        LlamaRuntime(model_path, model_id=MODEL_ID)


def test_rating_grammar_and_parser_agree() -> None:
    assert rating_grammar(2) == 'root ::= "[1] " r "\\n" "[2] " r\nr ::= [0-9]\n'
    assert parse_ratings("[1] 3\n[2] 9", 2) == [3, 9]
    assert parse_ratings("[1] 3", 2) is None  # too few
    assert parse_ratings("[2] 3\n[1] 9", 2) is None  # out of order
    assert parse_ratings("[1] 3\n[2] x", 2) is None
    with pytest.raises(ValueError):
        rating_grammar(0)


def test_a_cache_kept_around_other_prompts_is_back_whole_after_them(model_path: Path) -> None:
    """An answer paused for its checks: the checks' prompts replace it in the KV cache, and
    after `cache_kept` it carries on with nothing evaluated again but what is new, and the
    same logits a fresh evaluation gives."""
    fresh_runtime = LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=2048, n_threads=1)
    answer = _answer_prompt(QUERY)
    "".join(fresh_runtime.stream_chat(answer, max_tokens=4))
    with fresh_runtime.cache_kept():
        fresh_runtime.next_token_logprobs([LONG_REPLY], [1])  # another prompt, no shared part
    carried = fresh_runtime.answer_logprobs([answer], ["yes", "no"])
    assert carried.evaluated_tokens == 1  # the last position, evaluated for its logits
    cold = LlamaRuntime(model_path, model_id=MODEL_ID, n_ctx=2048, n_threads=1)
    assert carried.rows[0] == pytest.approx(cold.answer_logprobs([answer], ["yes", "no"]).rows[0])
