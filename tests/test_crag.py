"""The corrective loop end to end on real corpora: fallback, insufficient evidence, limits,
refinement offsets, expansion and the cited answer."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from crag_edge.answer.generation import INSUFFICIENT, cited, stream_answer, uncited
from crag_edge.config import Settings
from crag_edge.correction.expand import (
    DEFAULT_SYNONYMS,
    SynonymTableError,
    expand,
    keywords,
    load_synonyms,
    rewrite,
    shares_a_term,
)
from crag_edge.engine import Engine
from crag_edge.progress import StageEvent
from crag_edge.result import ContextItem
from crag_edge.types import Decision

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
CANBERRA = (
    "# Canberra\n\nCanberra is the capital city of Australia. It was chosen as the site of the "
    "capital in 1908 as a compromise between Sydney and Melbourne, and Parliament first met "
    "there in 1927.\n"
)
# The cheap, deterministic tier only: the loop's routing is under test, not the LLM.
SIGNALS_ONLY: dict[str, object] = {"grading_tiers": ["signals"], "fast_path_rules": []}


@pytest.fixture(scope="module")
def corpora(tmp_path_factory: pytest.TempPathFactory, embedder) -> tuple[Path, Path]:  # type: ignore[no-untyped-def]
    folder = tmp_path_factory.mktemp("crag")
    main, spare = folder / "main.db", folder / "spare.db"
    (folder / "canberra.md").write_text(CANBERRA, encoding="utf-8")
    for db, inputs in ((main, [SAMPLE]), (spare, [folder / "canberra.md"])):
        with Engine.open(db, Settings.load(), create=True, embedder=embedder) as engine:
            engine.ingest(inputs)
    return main, spare


def run(db: Path, embedder, question: str, **overrides: object):  # type: ignore[no-untyped-def]
    settings = Settings.load(**(SIGNALS_ONLY | overrides))  # type: ignore[arg-type]
    with Engine.open(db, settings, embedder=embedder) as engine:
        return engine.query(question)


def test_missing_evidence_reaches_the_local_fallback(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, spare = corpora
    result = run(main, embedder, "What is the capital city of Australia?", fallback_db=spare)
    assert result.rounds[0].decision == Decision.INCORRECT
    assert result.rounds[1].strategy == "fallback"
    assert result.fallback["used"] == ["local"] and result.fallback["reason"]
    assert result.decision == Decision.CORRECT and not result.insufficient_evidence
    assert {c.origin for c in result.context} == {"fallback:local"}
    assert any("Canberra is the capital" in c.text for c in result.context)
    types = [c.type for c in result.corrections]
    assert types.index("discard") < types.index("rewrite") < types.index("fallback")
    data = json.loads(json.dumps(result.to_dict()))
    assert data["rounds"][1]["strategy"] == "fallback"


# Every round AMBIGUOUS with every item kept: the routing of partial evidence, alone.
ALWAYS_AMBIGUOUS: dict[str, object] = {
    "correct_threshold": 1.0,
    "incorrect_threshold": 0.0,
    "discard_below": 0.0,
}


@pytest.mark.parametrize("on_ambiguous", [True, False])
def test_ambiguous_evidence_asks_the_fallback_unless_told_to_save_it(  # type: ignore[no-untyped-def]
    corpora, embedder, on_ambiguous: bool
) -> None:
    main, spare = corpora
    result = run(
        main,
        embedder,
        "How does reciprocal rank fusion combine two retrievers?",
        fallback_db=spare,
        fallback_on_ambiguous=on_ambiguous,
        **ALWAYS_AMBIGUOUS,
    )
    assert result.rounds[0].decision == Decision.AMBIGUOUS and result.rounds[0].kept >= 2
    if on_ambiguous:
        assert result.fallback["used"] == ["local"]
        assert result.fallback["reason"] == "retrieval graded AMBIGUOUS"
    else:
        assert result.fallback["used"] == []


def test_no_fallback_means_insufficient_evidence_never_a_guess(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, _ = corpora
    result = run(main, embedder, "What is the capital city of Australia?")
    assert result.insufficient_evidence and result.context == []
    assert result.decision == Decision.INCORRECT
    assert any(c.type == "rewrite" for c in result.corrections)  # tried another strategy first
    assert any(e["event"] == "insufficient_evidence" for e in result.audit)
    answer = "".join(stream_answer(None, result))
    assert answer == INSUFFICIENT.format(fallback="")


@pytest.mark.parametrize("with_fallback", [False, True])
def test_an_empty_corpus_is_insufficient_or_falls_back(  # type: ignore[no-untyped-def]
    corpora, embedder, tmp_path: Path, with_fallback: bool
) -> None:
    _, spare = corpora
    empty = tmp_path / "empty.db"
    Engine.open(empty, Settings.load(), create=True, embedder=embedder).close()
    extra = {"fallback_db": spare} if with_fallback else {}
    result = run(empty, embedder, "What is the capital city of Australia?", **extra)
    assert result.rounds[0].hits == 0 and result.rounds[0].decision == Decision.INCORRECT
    if with_fallback:
        assert result.fallback["used"] == ["local"] and not result.insufficient_evidence
        assert any("Canberra" in c.text for c in result.context)
    else:
        assert result.insufficient_evidence and result.context == []
        assert result.reason.startswith("insufficient evidence")


def test_a_failing_fallback_is_recorded_not_raised(corpora, embedder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main, _ = corpora
    result = run(
        main,
        embedder,
        "What is the capital city of Australia?",
        fallback_providers=["searxng"],
        searxng_url="http://127.0.0.1:9",
        fallback_timeout_s=2.0,
    )
    assert result.insufficient_evidence
    assert result.fallback["failures"][0]["provider"] == "searxng"
    assert any(e["event"] == "fallback_failure" for e in result.audit)


def test_answerable_question_is_refined_with_offsets_into_the_document(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, _ = corpora
    result = run(
        main, embedder, "How does the waggle dance encode the distance to food?", max_iterations=1
    )
    assert result.iterations == 1
    assert result.context, result.reason
    with Engine.open(main, Settings.load(**SIGNALS_ONLY), embedder=embedder) as engine:  # type: ignore[arg-type]
        for item in result.context:
            text = engine.corpus.document_text(item.doc_id)
            assert text[item.start : item.end] == item.text
    refine = next(c for c in result.corrections if c.type == "refine")
    assert refine.detail["strips_kept"] <= refine.detail["strips_total"]


def test_a_tight_context_budget_leaves_strips_out_and_says_so(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, _ = corpora
    question = "How does the waggle dance encode the distance to food?"
    roomy = run(main, embedder, question, max_iterations=1, context_budget_tokens=4096)
    tight = run(main, embedder, question, max_iterations=1, context_budget_tokens=64)
    assert not any(c.type == "cap" for c in roomy.corrections)
    cap = next(c for c in tight.corrections if c.type == "cap")
    assert cap.detail["budget_tokens"] == 64 and cap.detail["strips_left_out"] > 0
    assert any("context_budget_tokens" in warning for warning in tight.warnings)
    assert 0 < len(tight.context) <= len(roomy.context)
    for item in tight.context:  # whole strips of the roomy context, none cut
        assert any(item.text in wide.text for wide in roomy.context if wide.doc_id == item.doc_id)


def test_the_fast_path_keeps_whole_chunks_within_the_budget(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, _ = corpora
    question = "How does the waggle dance encode the distance to food?"
    fast = {"fast_path_rules": ["few_context"], "top_k": 2}
    both = run(main, embedder, question, context_budget_tokens=4096, **fast)
    best = run(main, embedder, question, context_budget_tokens=64, **fast)
    assert both.rule == best.rule == "few_context" and len(both.context) == 2
    assert [item.n for item in best.context] == [1]  # the best chunk, whole, renumbered
    assert best.context[0].text in {item.text for item in both.context}
    cap = next(c for c in best.corrections if c.type == "cap")
    assert cap.detail["chunks_left_out"] == 1 and len(cap.detail["chunk_ids"]) == 1


def test_progress_hears_every_stage_in_order(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, spare = corpora
    events: list[StageEvent] = []
    settings = Settings.load(**(SIGNALS_ONLY | {"fallback_db": spare}))  # type: ignore[arg-type]
    with Engine.open(main, settings, embedder=embedder) as engine:
        result = engine.query("What is the capital city of Australia?", progress=events.append)
    seen = [(e.stage, e.status) for e in events]
    assert seen[:6] == [
        ("embed", "start"),
        ("embed", "end"),
        ("retrieve", "start"),
        ("retrieve", "end"),
        ("grade", "start"),
        ("grade:signals", "start"),
    ]
    decisions = [e.detail.split()[0] for e in events if e.stage == "decision"]
    assert decisions == [str(r.decision) for r in result.rounds]
    assert ("fallback", "event") in seen and ("refine", "end") in seen
    for stage in {e.stage for e in events if e.status == "start"}:
        starts = [e for e in events if e.stage == stage and e.status == "start"]
        ends = [e for e in events if e.stage == stage and e.status == "end"]
        assert len(starts) == len(ends) and all(e.ms is not None and e.ms >= 0 for e in ends)
    discard = next(e for e in events if e.stage == "discard")
    assert re.fullmatch(r"\d+ items, iteration=1", discard.detail), discard.detail


@pytest.mark.parametrize(
    ("question", "correction"),
    [("honeybee waggle dance distance", "expand"), ("How do honeybees use the sun?", "rewrite")],
)
def test_ambiguous_expands_with_synonyms_or_else_rewrites(  # type: ignore[no-untyped-def]
    corpora, embedder, tmp_path: Path, question: str, correction: str
) -> None:
    main, _ = corpora
    synonyms = tmp_path / "synonyms.toml"
    synonyms.write_text('waggle = ["figure-eight"]\n', encoding="utf-8")
    result = run(
        main, embedder, question, max_iterations=2, top_k=3, synonyms_file=synonyms, **FORCED
    )
    assert [r.decision for r in result.rounds] == [Decision.AMBIGUOUS, Decision.AMBIGUOUS]
    widened = [c for c in result.corrections if c.type in ("expand", "rewrite")]
    assert [c.type for c in widened] == [correction]
    second = (result.rounds[1].query, result.rounds[1].strategy)
    assert second == (widened[0].detail["query"], widened[0].detail.get("strategy", "hybrid"))
    assert second != (question, "hybrid")


# AMBIGUOUS whatever the scores: every round must widen the search.
FORCED: dict[str, object] = {
    "correct_threshold": 0.99,
    "incorrect_threshold": 0.0,
    "discard_below": 0.0,
    "rewrite_with_llm": False,
}


def test_no_query_is_run_twice_for_one_question(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    """ "sunlight angle bees comb" is its own keyword rewrite: the loop must not search it
    again the same way; it tries the other strategy, then stops and says why."""
    main, _ = corpora
    result = run(main, embedder, "sunlight angle bees comb", max_iterations=5, top_k=3, **FORCED)
    widened = [c.detail for c in result.corrections if c.type in ("expand", "rewrite")]
    tried = [(d["query"].lower(), d.get("strategy", "hybrid")) for d in widened]
    searches = [("sunlight angle bees comb", "hybrid"), *tried]
    assert len(searches) == len(set(searches)), searches
    assert ("sunlight angle bees comb", "bm25") in tried
    assert result.iterations < 5
    assert result.stop_reason in ("no_untried_query", "no_new_evidence")
    stop = [c for c in result.corrections if c.type == "stop"]
    assert len(stop) == 1 and stop[0].detail["why"] == result.stop_reason
    assert stop[0].detail["detail"] in result.reason and not result.max_iterations_reached
    assert result.action == "GENERATE" and result.context


def test_a_search_that_finds_nothing_new_ends_the_loop(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    """With every chunk of the corpus in the first round, no widening can bring new
    evidence: one round, answered from what is kept, no re-grading."""
    main, _ = corpora
    result = run(main, embedder, "honeybee waggle dance distance", top_k=200, **FORCED)
    assert result.iterations == 1 and result.stop_reason == "no_new_evidence"
    assert result.decision == Decision.AMBIGUOUS and result.context
    assert "found nothing not graded already" in result.reason
    assert len(result.hits) == result.rounds[0].hits  # graded once


def test_kept_items_carry_their_grades_into_later_rounds(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    """A widened round grades only chunks not graded yet; the items kept before join its
    decision with the grades they earned (a re-grade would lose the judge's score)."""
    main, _ = corpora
    result = run(
        main, embedder, "How do honeybees use the sun?", max_iterations=2, top_k=3, **FORCED
    )
    assert result.iterations == 2
    graded_ids = [grade.chunk_id for _, grade in result.hits]
    assert len(graded_ids) == len(set(graded_ids)) == sum(r.hits for r in result.rounds)
    assert result.rounds[1].kept == len(graded_ids)  # everything is kept under FORCED
    assert {c.chunk_id for c in result.context} <= set(graded_ids)


def test_the_fallback_is_asked_once_per_question(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, spare = corpora
    never = {
        "correct_threshold": 1.0,
        "incorrect_threshold": 1.0,
        "discard_below": 1.0,
        "rewrite_with_llm": False,
    }
    result = run(
        main,
        embedder,
        "What is the capital city of Australia?",
        fallback_db=spare,
        max_iterations=6,
        **never,
    )
    assert [c.type for c in result.corrections].count("fallback") == 1
    assert result.insufficient_evidence and result.stop_reason == "insufficient_evidence"
    searches = [(r.query.lower(), r.strategy) for r in result.rounds]
    assert len(searches) == len(set(searches)) and len(searches) <= 3, searches


def test_max_iterations_is_reported(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, _ = corpora
    result = run(
        main,
        embedder,
        "sunlight angle bees comb",
        max_iterations=1,
        correct_threshold=0.99,
        incorrect_threshold=0.0,
        discard_below=0.0,
    )
    assert result.decision == Decision.AMBIGUOUS and result.max_iterations_reached
    assert "max_iterations" in result.reason and result.context


def test_expansion_rewrite_and_synonym_files(tmp_path: Path) -> None:
    assert expand("fix the error", DEFAULT_SYNONYMS) == "fix the error exception failure"
    assert expand("nothing to add", DEFAULT_SYNONYMS) == "nothing to add"
    assert keywords("What is the capital city of Australia?") == "capital city australia"
    assert rewrite("What is the capital city of Australia?", None) == (
        "capital city australia",
        "keywords",
    )
    assert shares_a_term("bee communication", "How do honeybees tell where flowers are?")
    assert shares_a_term("git-archive tar zip", "Which archive formats can git archive write?")
    assert not shares_a_term("5432", "What is the default port of a PostgreSQL server?")
    assert not shares_a_term("rm -rf", "Which command removes a linked working tree?")
    assert shares_a_term("gc prune", "How long does git gc keep loose objects?")  # short: equal
    table = tmp_path / "syn.toml"
    table.write_text('bee = ["honeybee", "apis"]\n')
    assert expand("a bee dance", load_synonyms(table)) == "a bee dance honeybee apis"
    table.write_text('bee = "honeybee"\n')
    with pytest.raises(SynonymTableError, match="list of strings"):
        load_synonyms(table)
    with pytest.raises(SynonymTableError, match="not found"):
        load_synonyms(tmp_path / "absent.toml")


def test_citations_resolve_and_unknown_numbers_are_ignored() -> None:
    context = [ContextItem(n, n, 1, "doc.md", "Doc", 0, 5, "text", "search", 0.9) for n in (1, 2)]
    assert [c.n for c in cited("A [2] and B [1][2] and C [7].", context)] == [2, 1]


def test_small_llm_streams_an_answer(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    main, _ = corpora
    settings = Settings.load(**(SIGNALS_ONLY | {"llm_threads": 1, "llm_max_tokens": 24}))  # type: ignore[arg-type]
    with Engine.open(main, settings, embedder=embedder) as engine:
        result, pieces = engine.answer("How does the waggle dance encode distance?")
        text = "".join(pieces)
    assert result.context and text.strip()  # SmolLM2 is a plumbing model: any text will do
    assert uncited("An answer without numbers.", result)
    assert not uncited(f"A traced answer [{result.context[0].n}].", result)
    assert not uncited("Anything.", replace(result, context=[]))


def test_trusted_evidence_carries_the_top_hits_whole_to_read_again(corpora, embedder) -> None:  # type: ignore[no-untyped-def]
    """CORRECT evidence comes with the search's top hits, whole, in their order and numbered
    after the context, within their budget; AMBIGUOUS evidence with none, and none of it is in
    the result's JSON until an answer reads it."""
    main, _ = corpora
    question = "How does the waggle dance encode the distance to food?"
    trusting = {"correct_threshold": 0.01, "incorrect_threshold": 0.0, "discard_below": 0.0}
    trusted = run(main, embedder, question, top_k=3, **trusting)
    assert trusted.decision == Decision.CORRECT
    hits = list(dict.fromkeys(hit.chunk.chunk_id for hit, _ in trusted.hits))[:3]
    assert [item.chunk_id for item in trusted.reread] == hits
    first = len(trusted.context) + 1
    assert [item.n for item in trusted.reread] == list(range(first, first + len(hits)))
    by_id = {hit.chunk.chunk_id: hit.chunk for hit, _ in trusted.hits}
    assert all(item.text == by_id[item.chunk_id].text for item in trusted.reread)  # whole
    assert "reread" not in trusted.to_dict()
    tight = run(main, embedder, question, top_k=3, reread_budget_tokens=64, **trusting)
    assert len(tight.reread) < len(trusted.reread)
    doubtful = run(main, embedder, question, **ALWAYS_AMBIGUOUS)
    assert doubtful.decision == Decision.AMBIGUOUS and doubtful.reread == []
