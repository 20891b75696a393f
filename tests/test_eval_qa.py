"""`eval qa`: the question file's reader, the phrase check, the outcomes and truthfulness on
hand-made records, and the command end to end on a real corpus with the real small models
(records resume and are scored again)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag_edge.answer.generation import INSUFFICIENT
from crag_edge.cli import app
from crag_edge.evaluation.beir import EvalDataError
from crag_edge.evaluation.qa import (
    OUTCOMES,
    QaRecord,
    Question,
    Reply,
    check_seconds,
    contains,
    judge_calls,
    matches,
    outcome,
    read_questions,
    run_qa,
    summarise,
    supported_share,
    truthfulness,
)
from crag_edge.evaluation.records import RecordLog

SAMPLES = Path(__file__).resolve().parent.parent / "sample_corpus"
DATA = Path(__file__).resolve().parent.parent / "docs" / "data"
BEES = Question("bees", "How is distance encoded?", True, (("waggle",), ("second", "duration")))
OFF = Question("capital", "What is the capital of Australia?", False, (), "far")


def line(**fields: object) -> str:
    base: dict[str, object] = {"id": "q1", "question": "Why?", "in_corpus": True,
                               "must": [["because"]]}  # fmt: skip
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def test_read_questions_keeps_order_kinds_and_ignores_notes(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(
        line(evidence="a note") + "\n\n" + line(id=7, in_corpus=False, must=[], kind="near") + "\n",
        encoding="utf-8",
    )
    assert read_questions(path) == [
        Question("q1", "Why?", True, (("because",),)),
        Question("7", "Why?", False, (), "near"),
    ]


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("{not json\n", r"q\.jsonl:1: not JSON"),
        ("[1, 2]\n", r"q\.jsonl:1: expected an object"),
        (line(must=None) + "\n", r"q\.jsonl:1: missing must"),
        (line(id=True) + "\n", "id must be a non-empty string or a number"),
        (line(question=" ") + "\n", "question must be a non-empty string"),
        (line(in_corpus="yes") + "\n", "in_corpus must be true or false"),
        (line(must=["because"]) + "\n", "must must be a list of lists"),
        (line(must=[[""]]) + "\n", "must must be a list of lists"),
        (line(must=[]) + "\n", "a question in the corpus needs must groups"),
        (line(in_corpus=False) + "\n", r"not in the corpus has no must groups \(\[\]\)"),
        (line(kind=3) + "\n", "kind must be a string"),
        (line() + "\n" + line() + "\n", r"q\.jsonl:2: id 'q1' is used twice"),
        ("\n", "no questions"),
    ],
)
def test_read_questions_errors_name_file_and_line(
    tmp_path: Path, text: str, complaint: str
) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(EvalDataError, match=complaint):
        read_questions(path)
    with pytest.raises(EvalDataError, match="file not found"):
        read_questions(tmp_path / "absent.jsonl")


def test_the_git_doc_grading_questions_read() -> None:
    questions = read_questions(DATA / "git-doc-questions.jsonl")
    assert sum(q.in_corpus for q in questions) >= 16
    assert sum(not q.in_corpus for q in questions) >= 6


def test_contains_matches_from_the_start_of_a_word() -> None:
    assert contains("It negates the pattern", "negat")
    assert not contains("an implementation of gzip", "zip")
    assert contains("use `-d` too", "-d") and not contains("use --dry-run", "-d")
    assert contains("Run GIT BISECT GOOD", "bisect good")
    assert matches("the waggle run's duration", BEES.must)
    assert not matches("the waggle run", BEES.must)  # every group needs one alternative


@pytest.mark.parametrize(
    ("question", "answer", "finish", "expected"),
    [
        (BEES, "The duration of the waggle run [1].", "stop", "right"),
        (BEES, "By the angle of the dance [1].", "stop", "wrong"),
        (BEES, "The evidence is insufficient to answer.", "stop", "refused"),
        (BEES, "Not enough information: waggle duration, perhaps.", "stop", "refused"),
        (BEES, "The waggle run's duration [1].", "unsupported", "refused"),
        (BEES, "", "timeout", "refused"),
        (OFF, INSUFFICIENT.format(fallback=""), "insufficient_evidence", "off_corpus_refused"),
        (OFF, "Sydney is the capital, as stated in [1].", "stop", "off_corpus_invented"),
    ],
)
def test_outcome(question: Question, answer: str, finish: str, expected: str) -> None:
    assert outcome(question, answer, finish) == expected


def record(
    outcome: str,
    *,
    system: str = "plain",
    kind: str | None = None,
    support: dict[str, Any] | None = None,
    seconds: float = 2.0,
) -> QaRecord:
    return QaRecord(
        question_id=f"{outcome}-{kind}-{support}",
        question="q?",
        in_corpus=not outcome.startswith("off_corpus"),
        system=system,
        model="m",
        answer="a",
        finish_reason="stop",
        outcome=outcome,
        seconds=seconds,
        passages=[],
        cited=[],
        kind=kind,
        support=support,
    )


def test_truthfulness_and_the_report_hand_computed() -> None:
    records = [
        record("right", kind="doc"),
        record("right", kind="doc"),
        record("wrong", kind="doc"),
        record("refused", kind="doc"),
        record("off_corpus_refused", kind="near"),
        record("off_corpus_invented", kind="near", seconds=8.0),
        record("right", system="crag"),
    ]
    assert truthfulness(records[:6]) == pytest.approx((2 - 1 + 0 + 0 - 1) / 6)
    assert truthfulness([]) is None
    report = summarise(records, ["plain", "crag"])
    plain = report["plain"]
    assert {o: plain[o] for o in OUTCOMES} == {
        "right": 2,
        "wrong": 1,
        "refused": 1,
        "off_corpus_refused": 1,
        "off_corpus_invented": 1,
    }
    assert plain["questions"] == 6 and plain["answerable"] == 4 and plain["off_corpus"] == 2
    assert plain["truthfulness"] == 0.0
    assert plain["truthfulness_by_kind"] == {"doc": 0.25, "near": -0.5}
    assert plain["seconds_per_question"] == 3.0 and plain["supported_share"] is None
    assert report["crag"]["truthfulness"] == 1.0 and report["crag"]["truthfulness_by_kind"] == {}


def report_of(
    *sentences: tuple[bool, bool], seconds: float = 1.0, judge_calls: int = 2
) -> dict[str, Any]:
    """A support report as `SupportReport.to_dict` writes it: (shown, supported) per sentence."""
    return {
        "mode": "flag",
        "seconds": seconds,
        "held_s": seconds + 1,
        "judge_calls": judge_calls,
        "sentences": [{"shown": shown, "supported": ok} for shown, ok in sentences],
    }


def test_supported_share_pools_the_shown_sentences_and_check_times_are_medians() -> None:
    records = [
        record("right", support=report_of((True, True), (True, True), (True, False), seconds=1)),
        record("wrong", support=report_of((True, False), (False, False), seconds=3)),
        record("right"),  # no support report: not counted
    ]
    assert supported_share(records) == 0.5
    assert supported_share([record("right", support=report_of((False, False)))]) is None
    assert check_seconds(records, "seconds") == 2.0
    assert check_seconds(records, "held_s") == 3.0
    assert judge_calls(records) == 2.0
    many = record("right", support=report_of((True, True), judge_calls=5))
    assert judge_calls([*records, many]) == 3.0
    older = report_of((True, True))
    del older["judge_calls"]  # a record written before the count was kept
    assert judge_calls([record("right", support=older)]) is None


def test_reused_records_are_scored_against_the_questions_as_they_are_now(
    tmp_path: Path,
) -> None:
    asked: list[str] = []

    def plain(question: str) -> Reply:
        asked.append(question)
        return Reply("The waggle run's duration [1].", "stop", [])

    path = tmp_path / "records.jsonl"
    first = run_qa([BEES], {"plain": plain}, RecordLog(path, "m", QaRecord))
    assert [r.outcome for r in first] == ["right"] and asked == [BEES.text]
    stricter = dataclasses.replace(BEES, must=(("angle",),))
    again = run_qa([stricter], {"plain": plain}, RecordLog(path, "m", QaRecord))
    assert [r.outcome for r in again] == ["wrong"] and asked == [BEES.text]  # not re-asked


# -- the command end to end ------------------------------------------------------------------

runner = CliRunner()
FAST = {
    "CRAG_EDGE_GRADING_TIERS": '["signals", "cross_encoder"]',
    "CRAG_EDGE_REWRITE_WITH_LLM": "false",
    "CRAG_EDGE_LLM_THREADS": "1",
    "CRAG_EDGE_LLM_MAX_TOKENS": "40",
    "CRAG_EDGE_TOP_K": "3",  # short prompts: the plumbing is under test, not the quality
}
QUESTIONS = [
    {"id": "bees", "question": "What does the duration of the waggle run encode?",
     "in_corpus": True, "must": [["distance"]], "kind": "doc"},
    {"id": "wal", "question": "In WAL mode, do readers block the writer?",
     "in_corpus": True, "must": [["not", "no"]], "kind": "doc"},
    {"id": "capital", "question": "What is the capital city of Australia?",
     "in_corpus": False, "must": [], "kind": "far"},
]  # fmt: skip


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env=FAST, catch_exceptions=False)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two sample documents ingested, and three questions about them (one off the corpus)."""
    folder = tmp_path_factory.mktemp("qa")
    db = folder / "qa.db"
    files = [str(SAMPLES / "honeybees.txt"), str(SAMPLES / "sqlite-wal.md")]
    result = invoke("ingest", "--db", str(db), *files, "--json")
    assert json.loads(result.stdout)["added"] == 2
    questions = folder / "q.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS), encoding="utf-8")
    return db, questions


@pytest.mark.models
def test_eval_qa_reports_both_systems_and_rescores_saved_answers(
    corpus: tuple[Path, Path], tmp_path: Path
) -> None:
    db, questions = corpus
    records = tmp_path / "records.jsonl"
    args = ("eval", "qa", "--db", str(db), "--questions", str(questions), "--records", str(records))
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == ["plain", "crag"]
    for row in report.values():
        assert row["questions"] == 3 and row["answerable"] == 2 and row["off_corpus"] == 1
        assert sum(row[o] for o in OUTCOMES) == 3
        assert -1.0 <= row["truthfulness"] <= 1.0 and row["seconds_per_question"] > 0
        assert set(row["truthfulness_by_kind"]) == {"doc", "far"}
    lines = [json.loads(ln) for ln in records.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 6 and {ln["system"] for ln in lines} == {"plain", "crag"}
    plain = [ln for ln in lines if ln["system"] == "plain"]
    assert all(len(ln["passages"]) == 3 and ln["decision"] is None for ln in plain)
    assert all(ln["decision"] for ln in lines if ln["system"] == "crag")

    # The saved answers are reused and scored again: every answer made right (or refused,
    # off the corpus) gives a perfect score, which a run that asked the model again could not.
    for ln in lines:
        ln["answer"] = "distance, not blocked" if ln["in_corpus"] else "insufficient evidence"
        ln["finish_reason"] = "stop"
    records.write_text("".join(json.dumps(ln) + "\n" for ln in lines), encoding="utf-8")
    again = json.loads(invoke(*args, "--systems", "crag", "--limit", "2", "--json").stdout)
    assert list(again) == ["crag"]
    assert again["crag"]["right"] == 2 and again["crag"]["truthfulness"] == 1.0
    assert len(records.read_text(encoding="utf-8").splitlines()) == 6

    table = invoke(*args, "--systems", "plain")
    assert table.exit_code == 0 and "truthfulness" in table.stdout


def test_eval_qa_bad_input_is_one_line(tmp_path: Path) -> None:
    db, questions = tmp_path / "unread.db", tmp_path / "q.jsonl"
    questions.write_text(json.dumps(QUESTIONS[0]) + "\n", encoding="utf-8")
    unknown = invoke("eval", "qa", "--db", str(db), "--questions", str(questions),
                     "--systems", "closed_book")  # fmt: skip
    assert unknown.exit_code == 2 and "--systems" in unknown.output
    for text, complaint in [("{oops\n", "q.jsonl:1: not JSON"), ('{"id": "x"}\n', "missing")]:
        questions.write_text(text, encoding="utf-8")
        broken = invoke("eval", "qa", "--db", str(db), "--questions", str(questions))
        assert broken.exit_code == 1 and complaint in broken.stderr
        assert "Traceback" not in broken.output and not db.exists()
    absent = invoke("eval", "qa", "--db", str(db), "--questions", str(tmp_path / "no.jsonl"))
    assert absent.exit_code == 1 and "file not found" in absent.stderr
