"""`Engine.answer` reports its stages as `Engine.query` does, then the answer's own."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.progress import StageEvent

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
FAST: dict[str, Any] = {"grading_tiers": ["signals"], "rewrite_with_llm": False}
BEES = "How does the waggle dance tell other bees the distance to food?"
PHOTOSYNTHESIS = "What does photosynthesis turn light into?"
UNANSWERABLE = "The Zorblat reactor in Quentaris is cooled with chilled lemon juice every Tuesday."


def test_answer_reports_the_loop_then_the_answer_stage(tmp_path: Path, embedder: Any) -> None:
    events: list[StageEvent] = []
    with Engine.open(
        tmp_path / "kb.db", Settings.load(**FAST), create=True, embedder=embedder
    ) as engine:
        engine.ingest([SAMPLE])
        result, stream = engine.answer(UNANSWERABLE, progress=events.append)
        before_reading = [(e.stage, e.status) for e in events]
        text = "".join(stream)
    assert result.insufficient_evidence and text.startswith("No answer: nothing relevant")
    assert ("retrieve", "start") in before_reading
    assert before_reading[-1] == ("answer", "start")
    assert ("answer", "end") not in before_reading
    last = events[-1]
    assert (last.stage, last.status) == ("answer", "end") and last.ms is not None
    answer = stream.answer
    assert answer.finish_reason == "insufficient_evidence" and answer.text == text
    assert answer.timings.prompt_tokens is None  # no model was called
    assert answer.refusal is not None and answer.refusal.kind == "nothing_found"
    assert answer.citations == () and not answer.support.sentences


def test_answer_times_the_wait_for_its_first_word(tmp_path: Path, embedder: Any) -> None:
    """The small LLM writes the answer; its timings add up and its prompt counts are the
    runtime's: the first answer evaluates at most its whole prompt (its system prompt may come
    from a snapshot on disk), the second (same system prompt, nothing else between) reuses
    the cached part."""
    settings = Settings.load(**FAST, llm_max_tokens=8, llm_threads=1)
    events: list[StageEvent] = []
    with Engine.open(tmp_path / "kb.db", settings, create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
        answers = []
        for question in (BEES, PHOTOSYNTHESIS):
            result, stream = engine.answer(question, progress=events.append)
            text = "".join(stream)
            assert result.context and text.strip(), "the model was asked"
            answers.append(stream.answer.timings)
    first, second = answers
    for timings in answers:
        assert timings.first_token_s is not None
        assert 0 < timings.first_token_s <= timings.answer_s
        assert timings.total_s == timings.retrieval_grading_s + timings.answer_s
        assert timings.retrieval_grading_s > 0
    assert first.prompt_tokens is not None and first.evaluated_tokens is not None
    assert 0 < first.evaluated_tokens <= first.prompt_tokens
    assert second.prompt_tokens is not None and second.evaluated_tokens is not None
    assert 0 < second.evaluated_tokens < second.prompt_tokens
    assert events[-1].ms == round(second.answer_s * 1000, 3)


@pytest.fixture(scope="module")
def sample_engine(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Engine]:
    """One engine over the sample corpus, shared by the tests that only read it."""
    db = tmp_path_factory.mktemp("api") / "kb.db"
    with Engine.open(db, Settings.load(**FAST), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
        yield engine


def test_a_closed_engine_says_so_and_closing_again_is_harmless(
    tmp_path: Path, embedder: Any
) -> None:
    with Engine.open(
        tmp_path / "kb.db", Settings.load(**FAST), create=True, embedder=embedder
    ) as engine:
        engine.ingest([SAMPLE])
    engine.close()
    calls: list[Callable[[], object]] = [
        lambda: engine.query(BEES),
        lambda: engine.search(BEES),
        lambda: engine.answer(BEES),
        lambda: engine.ingest([SAMPLE]),
        lambda: engine.calibrate(),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="the engine is closed"):
            call()


@pytest.mark.parametrize("inputs", [str(SAMPLE), SAMPLE, bytes(SAMPLE), None, 3])
def test_ingest_wants_a_list_of_paths_not_one_path(sample_engine: Engine, inputs: Any) -> None:
    """A lone path is not read as a list of its characters (which adds nothing, silently)."""
    with pytest.raises(TypeError, match="a list of paths"):
        sample_engine.ingest(inputs)


@pytest.mark.parametrize("item", [None, bytes(SAMPLE), 3])
def test_ingest_refuses_an_item_that_is_not_a_path(sample_engine: Engine, item: Any) -> None:
    with pytest.raises(TypeError, match="not a path"):
        sample_engine.ingest([SAMPLE, item])


def test_ingest_takes_any_iterable_of_paths(sample_engine: Engine) -> None:
    report = sample_engine.ingest(path for path in [SAMPLE])
    assert report.unchanged == 6 and not report.errors


@pytest.mark.parametrize("top_k", [0, -1, 10**9, 2.5, True, "5"])
def test_top_k_outside_the_settings_range_is_refused(sample_engine: Engine, top_k: Any) -> None:
    """0 was the default depth, -1 cut the fused list from its end, a float or str failed
    deep in retrieval: each is now refused where it enters."""
    for call in (sample_engine.search, sample_engine.query):
        with pytest.raises((TypeError, ValueError), match="top_k"):
            call(BEES, top_k=top_k)


@pytest.mark.parametrize(
    ("groups", "error"),
    [("finance", TypeError), ({1}, TypeError), ({""}, ValueError), ({"a b"}, ValueError)],
)
def test_groups_must_be_a_set_of_valid_names(
    sample_engine: Engine, groups: Any, error: type[Exception]
) -> None:
    """A str was read as a set of its letters; a bad name matched nothing, silently, or
    failed in the store's CHECK constraint at ingest."""
    with pytest.raises(error, match="group"):
        sample_engine.search(BEES, groups=groups)
    with pytest.raises(error, match="group"):
        sample_engine.query(BEES, groups=groups)
    with pytest.raises(error, match="group"):
        sample_engine.ingest([SAMPLE], groups=groups)
    with pytest.raises(error, match="group"):
        sample_engine.ingest([SAMPLE], caller=groups)


def test_a_view_or_its_groups_but_not_both(sample_engine: Engine) -> None:
    """`groups=` is short for `view=CorpusView.of(groups)`: the two find the same; given
    both, which one wins would be a guess; a set where a view belongs is refused, not read
    as its groups (nor None as everything: it is the default, the owner's view)."""
    view = CorpusView.of({"hr"})
    assert sample_engine.search(BEES, view=view) == sample_engine.search(
        BEES, groups=frozenset({"hr"})
    )
    with pytest.raises(TypeError, match="not both"):
        sample_engine.search(BEES, view=view, groups=frozenset({"hr"}))
    with pytest.raises(TypeError, match="not both"):
        sample_engine.query(BEES, view=view, groups=frozenset())
    with pytest.raises(TypeError, match="expected a CorpusView"):
        sample_engine.search_passages(BEES, view=frozenset({"hr"}))  # type: ignore[arg-type]


def test_a_keyword_the_lookup_does_not_name_is_a_type_error(sample_engine: Engine) -> None:
    """The four searches share their keyword arguments (`arguments.Lookup`); a misspelt one
    is refused as a spelt-out signature would refuse it, not silently ignored."""
    typo: Any = {"topk": 3}
    for call in (
        sample_engine.search,
        sample_engine.search_passages,
        sample_engine.query,
        sample_engine.answer,
    ):
        with pytest.raises(TypeError, match="unexpected keyword argument 'topk'"):
            call(BEES, **typo)


@pytest.mark.parametrize("question", [None, b"bees", 3])
def test_a_question_that_is_not_text_is_a_type_error(sample_engine: Engine, question: Any) -> None:
    for call in (sample_engine.search, sample_engine.query):
        with pytest.raises(TypeError, match="question must be a str"):
            call(question)


@pytest.mark.parametrize(
    ("history", "error"),
    [
        (None, TypeError),
        ("user: hi", TypeError),
        (["hi", "there"], TypeError),
        ([{"a": "b"}], ValueError),
        ([{"role": "user", "content": 5}], TypeError),
        ([{"role": "user"}], ValueError),
        ([{"role": None, "content": "hi"}], TypeError),
    ],
)
def test_history_must_be_turns_of_role_and_content_text(
    sample_engine: Engine, history: Any, error: type[Exception]
) -> None:
    """A wrong shape failed inside the text repair."""
    with pytest.raises(error, match="history"):
        sample_engine.query(BEES, history=history)


@pytest.mark.parametrize("questions", [0, 1, 2.5, "5", True])
def test_calibrate_wants_at_least_two_questions(sample_engine: Engine, questions: Any) -> None:
    """As `corpus calibrate --questions` does; a str or float failed inside the sampling."""
    with pytest.raises((TypeError, ValueError), match="questions"):
        sample_engine.calibrate(questions)


@pytest.mark.parametrize(
    ("db", "error"),
    [
        ("", ValueError),
        ("http://host/corpus.db", ValueError),
        (":memory:", ValueError),
        ("kb\0.db", ValueError),
        (None, TypeError),
        (b"kb.db", TypeError),
    ],
)
def test_open_refuses_a_location_that_names_no_corpus_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, embedder: Any, db: Any, error: type[Exception]
) -> None:
    """As `--db` does: ':memory:' would have made a file of that name, '' meant the working
    directory, and None or a NUL failed inside pathlib."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match="corpus"):
        Engine.open(db, Settings.load(**FAST), create=True, embedder=embedder)
    assert not list(tmp_path.iterdir())


def test_open_wants_settings_not_a_dict(tmp_path: Path, embedder: Any) -> None:
    with pytest.raises(TypeError, match=r"Settings\.load"):
        Engine.open(tmp_path / "kb.db", {"top_k": 3}, create=True, embedder=embedder)  # type: ignore[arg-type]
