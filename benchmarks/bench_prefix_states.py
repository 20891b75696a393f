"""The first answer of a new process (a one-shot `crag-edge ask`): its system prompt's KV
snapshot read from disk against evaluating the system prompt again. Group
`first-answer-new-process`; each round loads a fresh runtime (not timed) and times the prompt
up to the answer's first token. The prompt is an answer prompt over three demo passages.

CI runs it once untimed with the tests' small LLM (SmolLM2); the default LLM is opt-in:
CRAG_EDGE_BENCH_DEFAULT_LLM=1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from crag_edge.answer.generation import answer_messages
from crag_edge.config import ModelSettings, Settings
from crag_edge.models.llm import LlamaRuntime
from crag_edge.models.manifest import load_manifest
from crag_edge.models.registry import installed_file
from crag_edge.result import ContextItem

DEFAULT_LLM = os.environ.get("CRAG_EDGE_BENCH_DEFAULT_LLM") == "1"
PASSAGES = (
    "In the waggle run the bee moves straight ahead while shaking her abdomen from side to "
    "side, then circles back to the start and repeats.",
    "The angle of the waggle run relative to vertical encodes the direction of the food "
    "source relative to the sun.",
    "The duration of the waggle run encodes distance: roughly one second of waggling "
    "corresponds to about one kilometre of flight.",
)
CONTEXT = [
    ContextItem(n, n, 1, "bees.md", "Honeybees", 0, len(text), text, "search", 0.9)
    for n, text in enumerate(PASSAGES, start=1)
]
PROMPT = answer_messages("How does the waggle dance tell other bees the distance?", CONTEXT)


def _model_path() -> tuple[str, Path]:
    models = Settings.load().models
    model_id = ModelSettings.model_fields["llm"].default if DEFAULT_LLM else "smollm2-135m-instruct"
    spec = load_manifest(models.model_dir).get(model_id)
    return model_id, installed_file(models, model_id, spec.files[0].name)


def _first_token(runtime: LlamaRuntime) -> int | None:
    reply = runtime.stream_chat(PROMPT, max_tokens=1)
    "".join(reply)
    return reply.usage.evaluated_tokens


@pytest.mark.benchmark(group="first-answer-new-process")
@pytest.mark.parametrize("snapshot", [False, True], ids=["evaluated", "snapshot-from-disk"])
def test_first_answer_of_a_new_process(benchmark: Any, tmp_path: Path, snapshot: bool) -> None:
    model_id, path = _model_path()
    threads = 0 if DEFAULT_LLM else 1

    def fresh_runtime() -> tuple[tuple[LlamaRuntime], dict[str, Any]]:
        state_dir = tmp_path if snapshot else None  # None: snapshots in memory only
        runtime = LlamaRuntime(path, model_id=model_id, n_threads=threads, state_dir=state_dir)
        return (runtime,), {}

    if snapshot:  # a process before this one answered and left the snapshot
        _first_token(fresh_runtime()[0][0])
    evaluated = benchmark.pedantic(_first_token, setup=fresh_runtime, rounds=3, iterations=1)
    prompt_tokens = len(fresh_runtime()[0][0].chat_tokens(PROMPT))
    assert evaluated is not None and (evaluated < prompt_tokens) == snapshot
    benchmark.extra_info["evaluated_tokens"] = evaluated
    benchmark.extra_info["prompt_tokens"] = prompt_tokens
