"""Fast-path rules, the cascade's routing between tiers, and the three-way decision."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from crag_edge.config import GradingSettings, Settings
from crag_edge.engine import Engine
from crag_edge.grading import Calibrations, Evidence, Grader, Platt, first_matching_rule
from crag_edge.grading.result import ItemGrade
from crag_edge.observability import AuditLog, Metrics
from crag_edge.types import Action, Chunk, Decision, Hit, ScoredBatch

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
NO_RULES: dict[str, object] = {"fast_path_rules": []}
# Margin 0: the signals settle what is past a threshold, the evaluator sees the band between.
BANDED: dict[str, object] = NO_RULES | {"confidence_margin": 0.0}


class ScriptedScorer:
    """A model tier with known answers (by passage text), recording what it was asked.

    The cascade's routing is what is under test here; the real models have tests of their own.
    """

    def __init__(self, name: str, answers: dict[str, float], warnings: Sequence[str] = ()) -> None:
        self._name = name
        self.answers = answers
        self.warnings = list(warnings)
        self.calls: list[list[str]] = []

    @property
    def name(self) -> str:
        return self._name

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        self.calls.append(list(passages))
        return ScoredBatch([self.answers[p] for p in passages], list(self.warnings))


def hit(
    i: int, text: str, dense: float | None = 0.5, origin: str = "search", source: str | None = None
) -> Hit:
    chunk = Chunk(i, i, 0, text, 0, len(text), source or f"doc{i}.txt", token_count=80)
    return Hit(chunk=chunk, rank=i, score=1 / (60 + i), dense_score=dense, origin=origin)


def evidence(hits: list[Hit]) -> Evidence:
    sims = np.array([np.nan if h.dense_score is None else h.dense_score for h in hits])
    return Evidence(hits, sims, np.array([h.chunk.token_count for h in hits], dtype=np.int64))


def settings(**overrides: object) -> GradingSettings:
    """The grading section with model tiers uncalibrated (identity) unless a test says
    otherwise: scripted scores are then the probabilities the routing sees."""
    uncalibrated = {"calibration_cross_encoder": None, "calibration_llm": None}
    return Settings.load(**(uncalibrated | WIDE_BAND | overrides)).grading  # type: ignore[arg-type]


# The routing tests place their scripted scores around a 0.3-0.7 band of uncertainty.
WIDE_BAND: dict[str, object] = {"correct_threshold": 0.7, "aggregation": "rank_weighted"}


# -- fast-path rules -------------------------------------------------------------------------


def test_few_context_needs_at_least_one_item_and_honours_the_item_limit() -> None:
    s = settings(auto_approve_max_items=2)
    assert first_matching_rule([hit(1, "a"), hit(2, "b")], s) == "few_context"
    assert first_matching_rule([hit(1, "a"), hit(2, "b"), hit(3, "c")], s) is None
    assert first_matching_rule([], s) is None


def test_high_vector_score_needs_every_item_from_vector_search_above_threshold() -> None:
    s = settings(auto_approve_max_items=0, vector_score_threshold=0.8)
    assert (
        first_matching_rule([hit(i, "x", dense=0.85) for i in range(5)], s) == "high_vector_score"
    )
    assert first_matching_rule([hit(1, "x", 0.9), hit(2, "y", 0.79), hit(3, "z", 0.9)], s) is None
    assert first_matching_rule([hit(1, "x", 0.9), hit(2, "y", None), hit(3, "z", 0.9)], s) is None


def test_read_file_and_rule_configuration() -> None:
    hits = [hit(i, "x", origin="read_file") for i in range(4)]
    assert first_matching_rule(hits, settings()) == "read_file"
    assert first_matching_rule(hits, settings(fast_path_rules=[])) is None
    few = [hit(1, "x", dense=0.95)]
    assert (
        first_matching_rule(few, settings(fast_path_rules=["high_vector_score", "few_context"]))
        == "high_vector_score"
    )


def test_fast_path_scores_everything_one_and_calls_no_model() -> None:
    judge = ScriptedScorer("llm", {})
    grader = Grader(settings(), llm_judge=judge)
    audit = AuditLog()
    grading = grader.grade("q", evidence([hit(1, "a"), hit(2, "b")]), audit)
    assert (grading.decision, grading.action, grading.rule) == (
        Decision.CORRECT,
        Action.GENERATE,
        "few_context",
    )
    assert [i.score for i in grading.items] == [1.0, 1.0] and judge.calls == []
    assert audit.named("fast_path_hit")[0].fields["rule_name"] == "few_context"


# -- cascade routing -------------------------------------------------------------------------


def test_only_uncertain_items_reach_the_expensive_tiers() -> None:
    texts = ["certain yes", "certain no", "unsure one", "unsure two"]
    # Signals calibrated so the raw signal score decides: identity-ish through a steep Platt.
    signal_scores = {"certain yes": 0.95, "certain no": 0.05, "unsure one": 0.5, "unsure two": 0.45}
    cross = ScriptedScorer("ce", {"unsure one": 0.9, "unsure two": 0.5})
    judge = ScriptedScorer("llm", {"unsure two": 0.1})
    grader = Grader(
        settings(**BANDED, tier_fusion="last"),
        cross_encoder=cross,
        llm_judge=judge,
    )
    grader._signals_tier = _fixed_signals(signal_scores)  # type: ignore[method-assign]
    grading = grader.grade("q", evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    assert cross.calls == [["unsure one", "unsure two"]]
    assert judge.calls == [["unsure two"]]
    by_text = dict(zip(texts, grading.items, strict=True))
    assert by_text["unsure one"].decided_by == "cross_encoder"
    assert by_text["unsure two"].decided_by == "llm" and by_text["unsure two"].score == 0.1
    assert grading.tier_items == {"signals": 4, "cross_encoder": 2, "llm": 1}
    assert set(grading.timings_ms) >= {"rules", "signals", "cross_encoder", "llm", "decide"}


def test_the_best_items_reach_the_cross_encoder_even_when_signals_reject_them() -> None:
    texts = ["low best", "lower", "lowest"]
    signal_scores = {"low best": 0.2, "lower": 0.1, "lowest": 0.05}
    cross = ScriptedScorer("ce", {"low best": 0.9, "lower": 0.2})
    grader = Grader(
        settings(**BANDED, escalate_top=2, grading_tiers=["signals", "cross_encoder"]),
        cross_encoder=cross,
    )
    grader._signals_tier = _fixed_signals(signal_scores)  # type: ignore[method-assign]
    grading = grader.grade("q", evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    assert cross.calls == [["low best", "lower"]]  # every one below 0.3, the two best checked
    assert grading.items[0].kept and grading.items[0].decided_by == "cross_encoder"
    assert grading.decision != Decision.INCORRECT
    off = Grader(
        settings(**BANDED, escalate_top=0, grading_tiers=["signals", "cross_encoder"]),
        cross_encoder=cross,
    )
    off._signals_tier = _fixed_signals(signal_scores)  # type: ignore[method-assign]
    rejected = off.grade("q", evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    assert len(cross.calls) == 1 and rejected.decision == Decision.INCORRECT


def test_the_judge_spends_its_share_of_the_list_on_the_best_items_not_yet_trusted() -> None:
    texts = ["trusted", "best", "second", "third", "fourth", "fifth", "sixth", "seventh"]
    signal_scores = dict(zip(texts, [0.9, 0.5, 0.45, 0.4, 0.35, 0.15, 0.1, 0.05], strict=True))
    # The cross-encoder rejects everything it sees; "third" ends above "second" and "fifth".
    cross = ScriptedScorer("ce", {"best": 0.25, "second": 0.05, "third": 0.2, "fourth": 0.01})
    judge = ScriptedScorer("llm", {"third": 0.8, "best": 0.6, "second": 0.1, "fifth": 0.2})
    grader = Grader(
        settings(**BANDED, judge_share=0.25, escalate_top=0),
        cross_encoder=cross,
        llm_judge=judge,
    )
    grader._signals_tier = _fixed_signals(signal_scores)  # type: ignore[method-assign]
    grading = grader.grade("q", evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    assert cross.calls == [["best", "second", "third", "fourth"]]  # the uncertain band
    # 25 % of 8 = 2 items: the two best by the latest tier, skipping the trusted one.
    assert judge.calls == [["best", "third"]]
    by_text = dict(zip(texts, grading.items, strict=True))
    assert by_text["trusted"].decided_by == "signals" and by_text["trusted"].kept
    assert by_text["third"].decided_by == "llm" and by_text["third"].kept
    assert by_text["second"].decided_by == "cross_encoder" and not by_text["second"].kept
    assert grading.tier_items == {"signals": 8, "cross_encoder": 4, "llm": 2}
    # A short list (25 % of 3 rounds down to none) goes unjudged, even heading for rejection...
    short = Grader(settings(**NO_RULES, judge_share=0.25), llm_judge=judge)
    short._signals_tier = _fixed_signals(signal_scores)  # type: ignore[method-assign]
    rejected = ["fifth", "sixth", "seventh"]
    grading = short.grade("q", evidence([hit(i, t) for i, t in enumerate(rejected)]), AuditLog())
    assert len(judge.calls) == 1 and grading.decision == Decision.INCORRECT
    assert grading.tier_items == {"signals": 3}
    # ...while a list of four has a share: its best item, though every item is rejected.
    signal_scores["eighth"] = 0.02
    grading = short.grade(
        "q", evidence([hit(i, t) for i, t in enumerate([*rejected, "eighth"])]), AuditLog()
    )
    assert judge.calls[-1] == ["fifth"]
    assert grading.items[0].decided_by == "llm"


def _fused_grades(
    fusion: str,
    signal_scores: dict[str, float],
    cross: ScriptedScorer,
    judge: ScriptedScorer,
    *,
    judge_floor: bool = False,
) -> dict[str, ItemGrade]:
    """Grade the texts of `signal_scores` (in order) with these scripted tiers and fusion."""
    grader = Grader(
        settings(**BANDED, tier_fusion=fusion, escalate_top=0, judge_floor=judge_floor),
        cross_encoder=cross,
        llm_judge=judge,
    )
    grader._signals_tier = _fixed_signals(signal_scores)  # type: ignore[method-assign]
    texts = list(signal_scores)
    grading = grader.grade("q", evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    return dict(zip(texts, grading.items, strict=True))


def test_mean_fusion_averages_the_model_tiers_that_scored_an_item() -> None:
    signal_scores = {"certain yes": 0.95, "unsure one": 0.5, "unsure two": 0.45, "low": 0.1}
    cross = ScriptedScorer("ce", {"unsure one": 0.95, "unsure two": 0.5})
    judge = ScriptedScorer("llm", {"unsure two": 0.2})
    by_text = _fused_grades("mean", signal_scores, cross, judge)
    assert by_text["certain yes"].score == 0.95  # settled by signals alone
    assert by_text["low"].score == 0.1
    # Once a model has seen an item, the signals no longer count: a pre-filter, not a judge.
    assert by_text["unsure one"].score == 0.95  # confidently CORRECT: the judge skips it
    assert by_text["unsure two"].score == pytest.approx((0.5 + 0.2) / 2)
    assert judge.calls == [["unsure two"]]  # 25 % of 4: the best item not yet trusted


def test_mean_with_signals_fusion_counts_the_signals_among_the_tiers() -> None:
    signal_scores = {"unsure one": 0.45, "unsure two": 0.35, "low": 0.1, "lower": 0.05}
    cross = ScriptedScorer("ce", {"unsure one": 0.3, "unsure two": 0.35})
    judge = ScriptedScorer("llm", {"unsure one": 0.9})
    by_text = _fused_grades("mean_with_signals", signal_scores, cross, judge)
    # The evaluator alone would rank "unsure two" first; with the signals, "unsure one" leads
    # and gets the judge's one call.
    assert judge.calls == [["unsure one"]]
    assert by_text["unsure one"].score == pytest.approx((0.45 + 0.3 + 0.9) / 3)
    assert by_text["unsure two"].score == pytest.approx((0.35 + 0.35) / 2)
    assert by_text["lower"].score == 0.05  # settled by the signals: no model saw it


def test_with_the_judge_floor_the_cheaper_tiers_cannot_push_a_judged_item_under_the_cut() -> None:
    """The table-row case: the judge finds the row relevant, the signals and the evaluator
    (which read a run of cells as noise) do not. Their mean would drop it under
    `discard_below`; the judge keeps it at the cut (not at its own, yes-biased score), and
    the cheaper tiers still order the items it did not read. A judge that is not sure (a
    calibrated score under one half) does not keep it: on SciFact's claims with no evidence
    that kept weak abstracts and answered them."""
    signal_scores = {"money 8 bytes currency amount": 0.07, "prose": 0.06, "low": 0.05, "x": 0.04}
    cross = ScriptedScorer("ce", {})
    judge = ScriptedScorer("llm", {"money 8 bytes currency amount": 0.5})
    fused = _fused_grades("mean_with_signals", signal_scores, cross, judge)
    floored = _fused_grades("mean_with_signals", signal_scores, cross, judge, judge_floor=True)
    row = "money 8 bytes currency amount"
    assert judge.calls[0] == [row]
    assert fused[row].score < 0.3 and not fused[row].kept
    assert floored[row].score == pytest.approx(0.3) and floored[row].kept  # discard_below
    assert floored["prose"].score == fused["prose"].score  # unjudged: the mean, as before
    for unsure in (0.4, 0.05):  # under one half: the cheaper tiers' mean decides
        doubted = _fused_grades(
            "mean_with_signals", signal_scores, cross, ScriptedScorer("llm", {row: unsure}),
            judge_floor=True,
        )  # fmt: skip
        assert doubted[row].score == pytest.approx((0.07 + unsure) / 2)


MACADDR8_ROW = (
    "Table 8.21. Network Address Types — Name: macaddr8; Storage Size: 8 bytes; Description: "
    "MAC addresses (EUI-64 format)"
)
INET_ROW = "Table 8.21. Network Address Types — Name: inet; Storage Size: 7 or 19 bytes"


def test_the_judge_reads_a_table_row_the_question_names_beside_its_share() -> None:
    """The macaddr8 case of the table set: the judge's share (one item of four) went to the
    prose the signals liked best, and the row answering the question, 0.23 by the signals,
    was never read: nothing was kept. A row the question names by its subject is read
    beside the share (a row it does not name is not), and the judge's floor keeps it."""
    signal_scores = {
        "The macaddr8 type stores MAC addresses in EUI-64 format.": 0.4,
        INET_ROW: 0.25,
        MACADDR8_ROW: 0.23,
        "The value is stored as an 8-byte IEEE floating point number.": 0.2,
    }
    prose = next(iter(signal_scores))
    judge = ScriptedScorer("llm", {prose: 0.2, MACADDR8_ROW: 0.86})
    grader = Grader(
        settings(**BANDED, escalate_top=0, judge_floor=True),
        cross_encoder=ScriptedScorer("ce", {prose: 0.3}),
        llm_judge=judge,
    )
    grader._signals_tier = _fixed_signals(signal_scores)  # type: ignore[method-assign]
    texts = list(signal_scores)
    question = "How many bytes of storage does the macaddr8 type use?"
    grading = grader.grade(question, evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    assert judge.calls == [[prose, MACADDR8_ROW]]
    by_text = dict(zip(texts, grading.items, strict=True))
    assert by_text[MACADDR8_ROW].kept and not by_text[INET_ROW].kept


BERTH_ROWS = (
    "Berth | Length | Depth\n"
    "Berth: A1; Length: 12 m; Depth: 3.1 m\n"
    "Berth: B7; Length: 18 m; Depth: 4.4 m"
)
FAMILY_ROW = "Family name: poisson; Link functions: identity, log, sqrt"


@pytest.mark.parametrize(
    ("question", "kept"),
    [
        ("How deep is the water at berth B7?", {BERTH_ROWS}),
        # An identifier the rows do not hold names none of them.
        ("How deep is the water at berth B8?", set()),
        # A word names many things a question may ask about: the tiers decide.
        ("Which link functions can the poisson family use?", set()),
    ],
)
def test_a_row_the_question_names_by_an_identifier_is_kept_at_the_cut(
    question: str, kept: set[str]
) -> None:
    """The judge did not tie "deep" to "Depth" (raw 0.46) and every tier put the berth
    rows under the cut: the question names the very row, so it is kept, at the cut."""
    texts = [BERTH_ROWS, FAMILY_ROW, "Boats moor at the eastern pier after sunset."]
    judge = ScriptedScorer("llm", dict.fromkeys(texts, 0.1))
    grader = Grader(settings(**BANDED, escalate_top=0, judge_floor=True), llm_judge=judge)
    grader._signals_tier = _fixed_signals(dict.fromkeys(texts, 0.1))  # type: ignore[method-assign]
    grading = grader.grade(question, evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    by_text = dict(zip(texts, grading.items, strict=True))
    assert {text for text, item in by_text.items() if item.kept} == kept
    for text in kept:
        assert by_text[text].score == pytest.approx(0.3)  # discard_below, not above


def _fixed_signals(scores: dict[str, float]):  # type: ignore[no-untyped-def]
    def tier(query: str, ev: Evidence, items: list) -> None:  # type: ignore[type-arg]
        for h, item in zip(ev.hits, items, strict=True):
            item.score = item.tiers["signals"] = scores[h.chunk.text]
            item.decided_by = "signals"

    return tier


def test_missing_tiers_are_reported_and_skipped() -> None:
    grader = Grader(settings(**NO_RULES))
    grading = grader.grade(
        "bees", evidence([hit(i, f"bees dance {i}") for i in range(3)]), AuditLog()
    )
    assert grading.tiers == {"signals": "ok", "cross_encoder": "unavailable", "llm": "unavailable"}
    disabled = Grader(
        settings(**NO_RULES, grading_tiers=["signals"]), cross_encoder=ScriptedScorer("ce", {})
    )
    assert disabled.tier_status()["cross_encoder"] == "disabled"


def test_model_warnings_become_audit_events_and_metrics() -> None:
    judge = ScriptedScorer("llm", {"x": 0.5, "y": 0.5}, warnings=["unparseable output; 0.5 each"])
    metrics = Metrics()
    grader = Grader(
        settings(**NO_RULES, grading_tiers=["llm"], judge_share=1.0),
        llm_judge=judge,
        metrics=metrics,
    )
    audit = AuditLog()
    grading = grader.grade("q", evidence([hit(1, "x"), hit(2, "y"), hit(3, "x")]), audit)
    assert grading.warnings == ["llm: unparseable output; 0.5 each"]
    assert audit.named("grading_warning")[0].fields["tier"] == "llm"
    assert b'crag_grading_warnings_total{kind="llm"} 1.0' in metrics.exposition()


# -- the decision ----------------------------------------------------------------------------


def graded(scores: list[float], **overrides: object):  # type: ignore[no-untyped-def]
    texts = [f"passage {i}" for i in range(len(scores))]
    judge = ScriptedScorer("llm", dict(zip(texts, scores, strict=True)))
    grader = Grader(
        settings(**NO_RULES, grading_tiers=["llm"], judge_share=1.0, **overrides),
        llm_judge=judge,
    )
    audit = AuditLog()
    return grader.grade("q", evidence([hit(i, t) for i, t in enumerate(texts)]), audit), audit


@pytest.mark.parametrize(
    ("aggregation", "scores", "decision"),
    [
        ("max", [0.9, 0.35, 0.4], Decision.CORRECT),
        ("mean", [0.9, 0.35, 0.4], Decision.AMBIGUOUS),
        ("min", [0.9, 0.8, 0.75], Decision.CORRECT),
        ("min", [0.9, 0.8, 0.35], Decision.AMBIGUOUS),
        ("mean", [0.2, 0.25, 0.28], Decision.INCORRECT),
        # variance check: in the ambiguous band, a consistent list above 0.5 is CORRECT...
        ("rank_weighted", [0.65, 0.6, 0.62], Decision.CORRECT),
        # ...an inconsistent one (variance > 0.1) stays AMBIGUOUS
        ("rank_weighted", [0.4, 0.99, 0.31, 0.99], Decision.AMBIGUOUS),
    ],
)
def test_aggregations(aggregation: str, scores: list[float], decision: Decision) -> None:
    grading, _ = graded(scores, aggregation=aggregation)
    assert grading.decision == decision, grading.reason


@pytest.mark.parametrize(
    ("scores", "decision"),
    [
        ([0.35, 0.55, 0.1], Decision.CORRECT),  # one item more likely relevant than not
        ([0.45, 0.49, 0.4], Decision.AMBIGUOUS),  # kept, but none past 0.5
        ([0.1, 0.29], Decision.INCORRECT),  # nothing kept
    ],
)
def test_the_default_rule_is_the_best_kept_item_against_one_half(
    scores: list[float], decision: Decision
) -> None:
    defaults = Settings.load().grading
    assert (defaults.aggregation, defaults.correct_threshold) == ("max", 0.5)
    rule = {"aggregation": defaults.aggregation, "correct_threshold": defaults.correct_threshold}
    grading, _ = graded(scores, **rule)
    assert grading.decision == decision, grading.reason


def test_items_below_discard_are_dropped_and_audited() -> None:
    grading, audit = graded([0.9, 0.1, 0.29, 0.5], aggregation="mean")
    assert [i.kept for i in grading.items] == [True, False, False, True]
    assert grading.score == pytest.approx(0.7) and grading.decision == Decision.CORRECT
    dropped = audit.named("item_discarded")
    assert [e.fields["chunk_id"] for e in dropped] == [1, 2]


def test_everything_dropped_is_incorrect_and_re_retrieves() -> None:
    grading, audit = graded([0.1, 0.2])
    assert (grading.decision, grading.action) == (Decision.INCORRECT, Action.RE_RETRIEVE)
    assert "every item" in grading.reason
    assert audit.named("decision")[0].fields["decision"] == "INCORRECT"
    empty = Grader(settings(**NO_RULES)).grade("q", evidence([]), AuditLog())
    assert empty.decision == Decision.INCORRECT and empty.reason == "no evidence"


def test_calibration_is_applied_before_thresholds() -> None:
    texts = ["a", "b", "c"]
    judge = ScriptedScorer("llm", {"a": 0.99, "b": 0.95, "c": 0.90})
    steep = Calibrations(llm=Platt(a=40.0, b=-38.0))  # the judge's "yes for everything" skew
    grader = Grader(
        settings(**NO_RULES, grading_tiers=["llm"], judge_share=1.0),
        llm_judge=judge,
        calibrations=steep,
    )
    grading = grader.grade("q", evidence([hit(i, t) for i, t in enumerate(texts)]), AuditLog())
    assert [round(i.score, 2) for i in grading.items] == [0.83, 0.5, 0.12]
    assert grading.items[0].tiers["llm_raw"] == 0.99


# -- through the engine ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:  # type: ignore[no-untyped-def]
    db = tmp_path_factory.mktemp("grading") / "sample.db"
    with Engine.open(db, Settings.load(), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
    return db


def test_engine_query_grades_and_audits(sample_db: Path, embedder, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    log = tmp_path / "audit.jsonl"
    s = Settings.load(audit_log=log, fast_path_rules=[], grading_tiers=["signals"])
    with Engine.open(sample_db, s, embedder=embedder) as engine:
        result = engine.query("How do honeybees communicate where flowers are?")
    data = json.loads(json.dumps(result.to_dict()))  # JSON-serialisable end to end
    assert data["decision"] in ("CORRECT", "AMBIGUOUS", "INCORRECT")
    assert data["hits"][0]["source"].endswith("honeybees.txt")
    grade = data["hits"][0]["grade"]
    assert set(grade["signals"]) == {"similarity", "coverage", "length", "diversity"}
    assert data["rounds"][0]["hits"] == 10 and data["iterations"] == len(data["rounds"])
    events = [json.loads(line) for line in log.read_text().splitlines()]
    assert [e["event"] for e in events].count("decision") == data["iterations"]
    assert all(e["question"].startswith("How do") for e in events)


def test_engine_fast_path(sample_db: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    with Engine.open(sample_db, Settings.load(), embedder=embedder) as engine:
        result = engine.query("waggle dance", top_k=2)
    assert result.rule == "few_context" and result.decision == Decision.CORRECT
    assert result.iterations == 1 and result.context
    assert b'crag_fast_path_hits_total{rule="few_context"} 1.0' in engine.metrics.exposition()


@pytest.mark.parametrize(
    ("score", "decision", "kept"),
    [
        (0.7, Decision.CORRECT, True),  # CORRECT is >= correct_threshold
        (0.6999, Decision.AMBIGUOUS, True),
        (0.3, Decision.AMBIGUOUS, True),  # INCORRECT is < incorrect_threshold; kept is >=
        (0.2999, Decision.INCORRECT, False),
    ],
)
def test_thresholds_at_their_boundaries(score: float, decision: Decision, kept: bool) -> None:
    grading, _ = graded([score], aggregation="mean")
    assert grading.decision == decision and grading.items[0].kept is kept
