"""Answer-level evaluation: the metrics on hand-made records, the SciFact claims reader, the
verdict prompt on the real SmolLM2, and `eval answers` end to end (records resume)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crag_edge.answer.generation import cited
from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.evaluation.answers import (
    SYSTEMS,
    Record,
    RecordLog,
    accuracy,
    citation_precision,
    macro_f1,
    nei_refused,
    summarise,
)
from crag_edge.evaluation.beir import EvalDataError
from crag_edge.evaluation.choices import parse_choices
from crag_edge.evaluation.claims import Claim, read_claims
from crag_edge.evaluation.verdict import (
    CLOSED_BOOK_GRAMMAR,
    VERDICTS,
    ask_verdict,
    fit_passages,
    parse_verdict,
    verdict_grammar,
)
from crag_edge.models.llm import LlamaRuntime, load_llm
from crag_edge.result import ContextItem

MINI = Path(__file__).parent / "data" / "scifact_mini"
S, C, N = VERDICTS
HEADER = "id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids\n"
# Three SciFact train claims whose evidence is in tests/data/scifact_mini: SUPPORT,
# CONTRADICT (three evidence rows, two documents) and NOT ENOUGH INFO.
CLAIMS_CSV = HEADER + (
    "114,Anthrax spores are very difficult to dispose once they are dispersed.,"
    "33872649,SUPPORT,[6],[33872649]\n"
    "263,Citrullinated proteins externalized in neutrophil extracellular traps act "
    "indirectly to disrupt the inflammatory cycle.,11328820,CONTRADICT,[7 9],"
    "[11328820 30041340 14853989]\n"
    "263,Citrullinated proteins externalized in neutrophil extracellular traps act "
    "indirectly to disrupt the inflammatory cycle.,30041340,CONTRADICT,[0 1],"
    "[11328820 30041340 14853989]\n"
    "263,Citrullinated proteins externalized in neutrophil extracellular traps act "
    "indirectly to disrupt the inflammatory cycle.,30041340,CONTRADICT,[11],"
    "[11328820 30041340 14853989]\n"
    "89,Adult tissue-resident macrophages stem from the embryonal yolk sac and fetal liver.,"
    ",,[],[ 7521113 22406695]\n"
)
TINY_CORPUS_IDS = {"33872649", "11328820", "30041340", "14853989", "7521113", "22406695"}


def record(
    gold: str,
    verdict: str | None,
    *,
    cited: tuple[str, ...] = (),
    evidence: tuple[str, ...] = (),
    system: str = "plain",
    seconds: float = 1.0,
) -> Record:
    return Record(
        claim_id=f"{gold}-{verdict}-{cited}",
        claim="a claim",
        system=system,
        model="m",
        gold=gold,
        verdict=verdict,
        answer="",
        passages=list(cited),
        cited=list(cited),
        evidence=list(evidence),
        seconds=seconds,
        finish_reason="stop",
    )


# -- metrics -----------------------------------------------------------------------------------


def test_accuracy_counts_a_missing_verdict_as_wrong() -> None:
    records = [record(S, S), record(C, S), record(N, N), record(S, None)]
    assert accuracy(records) == 0.5
    assert accuracy([]) is None


def test_macro_f1_hand_computed() -> None:
    records = [record(S, S), record(S, S), record(C, S), record(N, None)]
    # SUPPORTS: TP 2, FP 1, FN 0 -> 0.8; CONTRADICTS: 0; NOT ENOUGH INFO: 0 (missed)
    assert macro_f1(records) == pytest.approx((0.8 + 0 + 0) / 3)
    # a label that is neither gold nor predicted is left out of the average
    assert macro_f1([record(S, S), record(C, C)]) == 1.0
    assert macro_f1([record(S, S), record(S, C)]) == pytest.approx((2 / 3 + 0) / 2)


def test_nei_refused_only_looks_at_unanswerable_claims() -> None:
    records = [record(N, N), record(N, S), record(N, None), record(S, N)]
    assert nei_refused(records) == pytest.approx(1 / 3)
    assert nei_refused([record(S, N)]) is None


def test_citation_precision_pools_citations_of_claims_with_evidence() -> None:
    records = [
        record(S, S, cited=("a", "b"), evidence=("a",)),
        record(C, C, cited=("c",), evidence=("c", "d")),
        record(N, S, cited=("x", "y")),  # no evidence: not counted
    ]
    assert citation_precision(records) == pytest.approx(2 / 3)
    assert citation_precision([record(S, S, system="closed_book")]) is None


def test_summarise_one_entry_per_system() -> None:
    records = [
        record(S, S, system="closed_book", seconds=1.0),
        record(N, S, system="closed_book", seconds=3.0),
        record(S, S, cited=("a",), evidence=("a",), system="crag", seconds=2.0),
        dataclasses.replace(record(C, None, system="crag"), finish_reason="timeout"),
    ]
    report = summarise(records, ["closed_book", "crag"])
    assert list(report) == ["closed_book", "crag"]
    book = report["closed_book"]
    assert book["questions"] == 2 and book["accuracy"] == 0.5 and book["nei_refused"] == 0.0
    assert book["citation_precision"] is None and book["seconds_per_question"] == 2.0
    assert book["gold"] == {S: 1, N: 1} and book["predicted"] == {S: 2}
    crag = report["crag"]
    assert crag["citation_precision"] == 1.0 and crag["citations"] == 1
    assert crag["predicted"] == {S: 1, "none": 1} and crag["timeouts"] == 1
    assert book["timeouts"] == 0


def test_parse_choices() -> None:
    assert parse_choices("crag, plain,crag", SYSTEMS) == ["crag", "plain"]
    for bad in ("rag", "", "plain,bm25"):
        with pytest.raises(ValueError, match="takes names from"):
            parse_choices(bad, SYSTEMS)


# -- claims and records -----------------------------------------------------------------------


def test_read_claims_merges_rows_and_reads_nei(tmp_path: Path) -> None:
    path = tmp_path / "claims.csv"
    path.write_text(CLAIMS_CSV, encoding="utf-8")
    claims = read_claims(path)
    assert [c.claim_id for c in claims] == ["114", "263", "89"]
    assert [c.label for c in claims] == [S, C, N]
    assert claims[1].evidence == {"11328820", "30041340"}
    assert claims[2].evidence == set()


@pytest.mark.parametrize(
    ("body", "complaint"),
    [
        ("id,claim\n1,x\n", "missing column"),
        (HEADER + "1,x,55,MAYBE,[],[55]\n", r"claims.csv:2: evidence_label must be"),
        (HEADER + "1,x,55,SUPPORT,[],[55]\n1,x,56,CONTRADICT,[],[56]\n", "labelled both ways"),
        (HEADER + ",x,,,[],[]\n", "needs an id and a claim"),
        (HEADER, "no claims"),
    ],
)
def test_read_claims_errors_name_the_problem(tmp_path: Path, body: str, complaint: str) -> None:
    path = tmp_path / "claims.csv"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(EvalDataError, match=complaint):
        read_claims(path)
    with pytest.raises(EvalDataError, match="not found"):
        read_claims(tmp_path / "absent.csv")


def test_record_log_reloads_and_refuses_foreign_records(tmp_path: Path) -> None:
    path = tmp_path / "records.jsonl"
    log = RecordLog(path, "m")
    made = record(S, C, cited=("a",), evidence=("a",))
    log.add(made)
    claim = Claim(made.claim_id, made.claim, S, {"a"})
    assert RecordLog(path, "m").get(claim, "plain") == made
    assert RecordLog(path, "m").get(claim, "crag") is None
    assert RecordLog(None, "m").get(claim, "plain") is None
    with pytest.raises(EvalDataError, match="answered by m, not other"):
        RecordLog(path, "other")
    with pytest.raises(EvalDataError, match="use another --records file"):
        RecordLog(path, "m").get(Claim(made.claim_id, "another claim"), "plain")
    path.write_text('{"claim_id": "1"}\n', encoding="utf-8")
    with pytest.raises(EvalDataError, match=r"records\.jsonl:1: not an answer record"):
        RecordLog(path, "m")


# -- the verdict prompt on the real small LLM -------------------------------------------------


@pytest.fixture(scope="module")
def runtime() -> LlamaRuntime:
    settings = Settings.load(llm_threads=1, llm_context=1024)
    return load_llm(settings.models)


def passage(n: int, text: str) -> ContextItem:
    return ContextItem(n, n, n, f"beir:{n}", f"title {n}", 0, len(text), text, "search", 0.5)


def test_parse_verdict_whole_and_cut_short() -> None:
    assert parse_verdict('{"verdict": "CONTRADICTS", "answer": "No, see [2]."}') == (
        C,
        "No, see [2].",
    )
    assert parse_verdict('{"verdict": "NOT ENOUGH INFO", "answer": "The pass') == (N, "The pass")
    assert parse_verdict('{"verdict": "SUPP') == (None, "")


def test_grammar_offers_exactly_the_shown_passage_numbers() -> None:
    assert verdict_grammar([]) == CLOSED_BOOK_GRAMMAR
    grammar = verdict_grammar([7, 3, 7])
    assert 'cite ::= "[" ("7" | "3") "]"' in grammar


@pytest.mark.models
def test_every_reply_is_a_verdict_and_definite_ones_cite(runtime: LlamaRuntime) -> None:
    runtime.check_grammar(verdict_grammar([]))
    runtime.check_grammar(verdict_grammar([1, 2, 10]))
    passages = [
        passage(3, "At sea level, pure water boils at 100 degrees Celsius."),
        passage(7, "Bananas turn yellow as they ripen."),
    ]
    claims = ["Water boils at 100 degrees Celsius at sea level.", "Bananas are yellow."]
    definite = 0
    for claim in claims:
        assert ask_verdict(runtime, claim, None, max_tokens=40).verdict in VERDICTS
        reply = ask_verdict(runtime, claim, passages, max_tokens=60)
        assert reply.verdict in VERDICTS
        if reply.verdict != N:
            definite += 1
            assert {item.n for item in cited(reply.answer, passages)} & {3, 7}, reply
            assert re.match(r"\[[37]\]", reply.answer), reply  # opens with a shown passage
    assert definite, "no definite verdict: the citation rule went untested"


@pytest.mark.models
def test_long_passages_are_cut_to_fit_the_context(runtime: LlamaRuntime) -> None:
    long_text = "Mitochondria make ATP in the cell. " * 200  # ~1,600 tokens each
    passages = [passage(n, long_text) for n in (1, 2, 3)]
    fitted = fit_passages(runtime, "Mitochondria make ATP.", passages, 40)
    assert [p.n for p in fitted] == [1, 2, 3]
    assert all(0 < len(p.text) < len(long_text) for p in fitted)
    reply = ask_verdict(runtime, "Mitochondria make ATP.", passages, max_tokens=40)
    assert reply.verdict in VERDICTS
    with pytest.raises(ValueError, match="no room"):
        fit_passages(runtime, "Mitochondria make ATP.", passages * 200, 40)


# -- the command end to end ----------------------------------------------------------------------

runner = CliRunner()
FAST = {
    "CRAG_EDGE_GRADING_TIERS": '["signals", "cross_encoder"]',
    "CRAG_EDGE_REWRITE_WITH_LLM": "false",
    "CRAG_EDGE_LLM_THREADS": "1",
    "CRAG_EDGE_TOP_K": "3",  # short prompts: the plumbing is under test, not the quality
}
METRICS = {"accuracy", "macro_f1", "nei_refused", "citation_precision", "seconds_per_question"}


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env=FAST, catch_exceptions=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A corpus of the three claims' cited abstracts, and the claims file."""
    folder = tmp_path_factory.mktemp("answers")
    lines = (MINI / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    corpus = folder / "corpus.jsonl"
    corpus.write_text(
        "\n".join(ln for ln in lines if json.loads(ln)["_id"] in TINY_CORPUS_IDS) + "\n",
        encoding="utf-8",
    )
    db = folder / "tiny.db"
    result = invoke("ingest", "--db", str(db), "--format", "beir", str(corpus), "--json")
    assert json.loads(result.stdout)["added"] == len(TINY_CORPUS_IDS)
    claims = folder / "claims.csv"
    claims.write_text(CLAIMS_CSV, encoding="utf-8")
    return db, claims


@pytest.mark.models
def test_eval_answers_reports_every_system_and_resumes(
    tiny: tuple[Path, Path], tmp_path: Path
) -> None:
    db, claims = tiny
    records = tmp_path / "records.jsonl"
    args = ("eval", "answers", "--db", str(db), "--claims", str(claims), "--records", str(records))
    result = invoke(*args, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert list(report) == ["closed_book", "plain", "crag"]
    for system, row in report.items():
        assert set(row) >= METRICS | {"questions", "gold", "predicted"}, system
        assert row["questions"] == 3 and row["gold"] == {S: 1, C: 1, N: 1}
        assert 0.0 <= row["accuracy"] <= 1.0 and row["nei_refused"] in (0.0, 1.0)
        assert row["seconds_per_question"] > 0
    assert report["closed_book"]["citation_precision"] is None
    lines = [json.loads(ln) for ln in records.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 9 and {ln["system"] for ln in lines} == {"closed_book", "plain", "crag"}
    assert all(ln["verdict"] in VERDICTS for ln in lines)
    for line in lines:
        if line["system"] == "plain":
            assert set(line["passages"]) <= TINY_CORPUS_IDS and line["passages"]
            assert set(line["cited"]) <= set(line["passages"])
        if line["system"] == "crag" and line["finish_reason"] == "no_evidence":
            assert line["verdict"] == N and line["passages"] == []

    # Resume: answers in the records file are reused, not asked again. Mark every closed-book
    # answer right; a re-run that re-asked the model could not report a perfect score.
    for line in lines:
        if line["system"] == "closed_book":
            line["verdict"] = line["gold"]
    records.write_text("".join(json.dumps(ln) + "\n" for ln in lines), encoding="utf-8")
    again = json.loads(invoke(*args, "--systems", "closed_book", "--limit", "2", "--json").stdout)
    assert list(again) == ["closed_book"]
    assert again["closed_book"]["questions"] == 2 and again["closed_book"]["accuracy"] == 1.0
    assert len(records.read_text(encoding="utf-8").splitlines()) == 9

    table = invoke(*args)
    assert table.exit_code == 0 and "citation_precision" in table.stdout


def test_eval_answers_bad_input_is_one_line(tmp_path: Path) -> None:
    db, claims = tmp_path / "unread.db", tmp_path / "claims.csv"
    claims.write_text(CLAIMS_CSV, encoding="utf-8")
    unknown = invoke("eval", "answers", "--db", str(db), "--claims", str(claims), "--systems", "x")
    assert unknown.exit_code == 2 and "--systems" in unknown.output
    bad = tmp_path / "bad.csv"
    bad.write_text("id,claim\n1,x\n", encoding="utf-8")
    broken = invoke("eval", "answers", "--db", str(db), "--claims", str(bad))
    assert broken.exit_code == 1 and "missing column" in broken.stderr
    assert "Traceback" not in broken.output and not db.exists()
