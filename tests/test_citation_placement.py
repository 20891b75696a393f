"""CitationPlacement on the real SmolLM2-135M vocabulary and runtime: a passage number may
follow the answer's content, never stand in for it in the first sentence."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from llama_cpp import Llama

from crag_edge.models.citation_placement import CitationPlacement
from crag_edge.models.llm import LlamaRuntime
from tests.fixtures import SMOLLM

pytestmark = pytest.mark.models

PROMPT = "Which passage answers the question?"
# A one-shot conversation that makes SmolLM2 answer with a bare passage number.
ONE_SHOT = [
    {"role": "user", "content": "What is 2+2?"},
    {"role": "assistant", "content": "The answer is [4]."},
    {"role": "user", "content": "What is 3+3?"},
]


@pytest.fixture(scope="module")
def runtime(smollm_path: Path) -> LlamaRuntime:
    return LlamaRuntime(smollm_path, model_id=SMOLLM, n_ctx=1024, n_threads=1, timeout_s=120)


@pytest.fixture(scope="module")
def vocabulary(smollm_path: Path) -> Llama:
    return Llama(model_path=str(smollm_path), vocab_only=True, verbose=False)


def _masked_after(llm: Llama, written: str) -> set[str]:
    """The token texts the rule masks once the reply so far is `written`."""
    prompt = llm.tokenize(PROMPT.encode(), add_bos=False, special=False)
    ids = prompt + llm.tokenize(written.encode(), add_bos=False, special=False)
    scores = np.zeros(llm.n_vocab(), dtype=np.single)
    rule = CitationPlacement(llm).processor(len(prompt))
    masked = np.flatnonzero(np.isneginf(rule(np.array(ids, dtype=np.intc), scores)))
    return {llm.detokenize([int(i)]).decode() for i in masked}


@pytest.mark.parametrize(
    "written",
    ["The command to remove a linked working tree is", "You run the", "Use the option:"],
)
def test_a_citation_cannot_complete_the_first_sentence(vocabulary: Llama, written: str) -> None:
    masked = _masked_after(vocabulary, written)
    assert masked and all(text.lstrip().startswith(("[", "([")) for text in masked)


@pytest.mark.parametrize(
    "written",
    [
        "",  # the prompt's own last word is not the reply's
        "The command is `git worktree remove`",  # content written: a citation may follow
        "It is git worktree remove. This is",  # a later sentence may point at a passage
        "It is stated in",
    ],
)
def test_citations_stay_free_elsewhere(vocabulary: Llama, written: str) -> None:
    assert _masked_after(vocabulary, written) == set()


def test_a_cited_reply_states_its_answer_in_words(runtime: LlamaRuntime) -> None:
    bare = "".join(runtime.stream_chat(ONE_SHOT, max_tokens=12))
    cited = "".join(runtime.stream_chat(ONE_SHOT, max_tokens=12, cited=True))
    assert bare.startswith("The answer is [")  # the failure, reproduced without the rule
    assert cited.startswith("The answer is ") and "[" not in cited.split(".")[0]
