"""Follow-up questions: which questions lean on the conversation, their standalone rewrite
(the real SmolLM2, and the keyword fallback), and the loop searching the rewrite on a real
corpus with the shipped evaluator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from crag_edge.config import Settings
from crag_edge.correction.followup import (
    depends_on_history,
    standalone_question,
    usable_rewrite,
)
from crag_edge.engine import Engine
from crag_edge.models.llm import LlamaRuntime, load_llm
from tests.live_service import FOLLOW_UP, SETTINGS, WAL, sample_corpus

CONVERSATION = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": WAL},
    {"role": "assistant", "content": "Changes go to a separate WAL file [1]."},
]


def no_llm() -> LlamaRuntime | None:
    return None


@pytest.mark.parametrize(
    ("question", "leans"),
    [
        ("And how do I undo it?", True),
        (FOLLOW_UP, True),
        ("What about checkpoints?", True),
        ("Why?", True),  # too few words to search with
        (WAL, False),
        ("Which Nobel Prize did Karl von Frisch share for bee communication?", False),
    ],
)
def test_which_questions_lean_on_the_conversation(question: str, leans: bool) -> None:
    assert depends_on_history(question) is leans


def test_without_an_llm_the_last_user_turn_lends_its_missing_words() -> None:
    rewritten = standalone_question(FOLLOW_UP, CONVERSATION, no_llm)
    assert rewritten == (f"{FOLLOW_UP} sqlite write-ahead logging", "keywords")


def test_no_rewrite_without_history_or_for_a_standalone_question() -> None:
    assert standalone_question(FOLLOW_UP, [], no_llm) is None
    assert standalone_question(FOLLOW_UP, CONVERSATION[:1], no_llm) is None  # no user turn
    assert standalone_question("How do bees find flowers?", CONVERSATION, no_llm) is None


@pytest.mark.parametrize(
    ("reply", "usable"),
    [
        (
            "Rewritten: Does SQLite WAL work on network file systems?\n",
            "Does SQLite WAL work on network file systems?",
        ),
        ('"Does SQLite WAL work on NFS?"\nmore text', "Does SQLite WAL work on NFS?"),
        ("user: Does SQLite WAL work on NFS?", "Does SQLite WAL work on NFS?"),  # a role echoed
        (f"  {FOLLOW_UP.lower()} ", None),  # the question again
        ("SQLite WAL is a journal mode.", None),  # an answer, not a question
        ("\n \n", None),
    ],
)
def test_only_a_real_rewrite_is_taken_from_the_llm(reply: str, usable: str | None) -> None:
    assert usable_rewrite(reply, FOLLOW_UP) == usable


@pytest.mark.models
def test_an_unusable_reply_of_the_small_llm_falls_back_to_keywords() -> None:
    # SmolLM2-135M repeats the question instead of rewriting it (the 1.5B default rewrites
    # it): the keyword rewrite stands in, so a weak model never loses the conversation.
    llm = load_llm(Settings.load().models, "smollm2-135m-instruct")
    rewritten = standalone_question(FOLLOW_UP, CONVERSATION, lambda: llm)
    assert rewritten == standalone_question(FOLLOW_UP, CONVERSATION, no_llm)
    assert rewritten is not None and rewritten[1] == "keywords"


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    return sample_corpus(tmp_path_factory.mktemp("followup"), embedder)


@pytest.mark.models
def test_a_follow_up_is_searched_standalone_and_shown_as_a_rewrite(
    corpus: Path, embedder: Any
) -> None:
    with Engine.open(corpus, Settings.load(**SETTINGS), embedder=embedder) as engine:
        followed = engine.query(FOLLOW_UP, history=CONVERSATION)
        alone = engine.query(FOLLOW_UP)
    first = followed.corrections[0]
    assert first.type == "rewrite" and first.detail["for"] == "follow-up"
    assert first.detail["question"] == FOLLOW_UP and first.detail["by"] == "keywords"
    assert followed.question == first.detail["query"] != FOLLOW_UP
    assert followed.rounds[0].query == followed.question  # retrieval searched the rewrite
    assert followed.context and not followed.insufficient_evidence
    assert followed.context[0].source.endswith("sqlite-wal.md")
    assert alone.question == FOLLOW_UP
    assert not [c for c in alone.corrections if c.detail.get("for") == "follow-up"]
