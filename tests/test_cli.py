"""Every CLI command, run as a user runs it (in-process via Typer's runner), on real files."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.console.output import print_json
from crag_edge.engine import Engine
from crag_edge.store import SCHEMA_VERSION

MINI = Path(__file__).parent / "data" / "scifact_mini"
SAMPLE = Path(__file__).parent.parent / "sample_corpus"
runner = CliRunner()
# A question the scifact_mini corpus holds evidence for, so `answer` calls the model.
ANSWERABLE = "Does Ly49Q induce neutrophil polarization?"
# The cheap tiers and keyword rewrites only: the LLM has its own tests (test_llm, test_crag).
FAST = {
    "CRAG_EDGE_GRADING_TIERS": '["signals", "cross_encoder"]',
    "CRAG_EDGE_REWRITE_WITH_LLM": "false",
}


def invoke(*args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env=FAST | (env or {}), catch_exceptions=False)


@pytest.fixture(scope="module")
def beir_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("cli") / "mini.db"
    result = invoke(
        "ingest", "--db", str(db), "--format", "beir", str(MINI / "corpus.jsonl"), "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == 40 and report["errors"] == []
    return db


@pytest.mark.parametrize(
    "command",
    [
        [],
        ["models"],
        ["models", "pull"],
        ["models", "list"],
        ["models", "verify"],
        ["ingest"],
        ["query"],
        ["search"],
        ["documents"],
        ["eval"],
        ["eval", "retrieval"],
        ["eval", "crag"],
        ["eval", "pairs"],
        ["eval", "grading"],
        ["eval", "answers"],
        ["eval", "qa"],
        ["answer"],
        ["serve"],
        ["tui"],
        ["evaluator"],
        ["evaluator", "train"],
        ["stats"],
        ["check"],
        ["cache"],
        ["cache", "clear"],
        ["calibrate"],
    ],
)
def test_every_command_explains_itself(command: list[str]) -> None:
    result = invoke(*command, "--help")
    assert result.exit_code == 0
    assert "Usage" in result.stdout and len(result.stdout) > 200


def test_ingest_is_incremental_and_reports_json(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    db = str(tmp_path / "c.db")
    first = json.loads(invoke("ingest", "--db", db, str(docs), "--json").stdout)
    assert first["added"] == 6 and first["chunks_written"] > 6
    assert first["chunks_per_second"] > 0
    (docs / "honeybees.txt").write_text("Bees dance. Changed text.", encoding="utf-8")
    (docs / "sqlite-wal.md").unlink()
    (docs / "notes.xyz").write_text("unknown format")
    second = json.loads(invoke("ingest", "--db", db, str(docs), "--prune", "--json").stdout)
    assert (second["added"], second["updated"], second["unchanged"], second["pruned"]) == (
        0,
        1,
        4,
        1,
    )
    assert [s for s, _ in second["skipped"]] == [str((docs / "notes.xyz").resolve())]


def test_ingest_reports_bad_files_without_aborting(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text("Photosynthesis makes sugar from light.")
    (docs / "bad.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    (docs / "bad.txt").write_bytes(b"not utf-8 \xc3\x28 at all")
    result = invoke("ingest", "--db", str(tmp_path / "c.db"), str(docs))
    assert result.exit_code == 0
    assert "added 1," in result.stdout and "errors 2" in result.stdout
    assert "failed" in result.stderr and "bad.pdf" in result.stderr and "bad.txt" in result.stderr


def test_query_json_shape(beir_db: Path) -> None:
    result = invoke(
        "query", "--db", str(beir_db), "--json", "--top-k", "5", "vitamin D and bone fractures"
    )
    data = json.loads(result.stdout)
    assert data["question"] == "vitamin D and bone fractures"
    assert [h["rank"] for h in data["hits"][:5]] == [1, 2, 3, 4, 5]
    assert data["rounds"][0]["hits"] == 5 and len(data["hits"]) == sum(
        r["hits"] for r in data["rounds"]
    )
    assert data["decision"] in ("CORRECT", "AMBIGUOUS", "INCORRECT")
    assert set(data) >= {"context", "corrections", "fallback", "timings_ms", "tiers", "audit"}
    first = data["hits"][0]
    assert set(first) >= {
        "rank",
        "score",
        "dense_score",
        "dense_rank",
        "bm25_score",
        "bm25_rank",
        "chunk_id",
        "doc_id",
        "source",
        "title",
        "start",
        "end",
        "text",
    }
    assert first["source"].startswith("beir:")


def test_stats_and_cache_clear(beir_db: Path, tmp_path: Path) -> None:
    data = json.loads(invoke("stats", "--db", str(beir_db), "--json").stdout)
    assert data["documents"] == 40 and data["chunks"] >= 40
    assert data["schema_version"] == SCHEMA_VERSION and data["cached_scores"] >= 0
    assert data["embedder_id"] == "all-minilm-l6-v2"
    assert "documents" in invoke("stats", "--db", str(beir_db)).stdout
    # Earlier queries of this module may have cached cross-encoder scores: all are removed.
    assert json.loads(invoke("cache", "clear", "--db", str(beir_db), "--json").stdout) == {
        "removed": data["cached_scores"]
    }
    assert json.loads(invoke("stats", "--db", str(beir_db), "--json").stdout)["cached_scores"] == 0
    missing = invoke("stats", "--db", str(tmp_path / "nope.db"))
    assert missing.exit_code != 0 and "nope.db" in missing.output


@pytest.mark.parametrize("mode", ["bm25", "dense", "hybrid"])
def test_query_modes_and_hostile_text(beir_db: Path, mode: str) -> None:
    for text in ['NEAR("x" AND', "a* OR", "'; DROP TABLE chunks;--", "why???"]:
        result = invoke("query", "--db", str(beir_db), "--mode", mode, "--json", text)
        assert result.exit_code == 0, result.output
        assert isinstance(json.loads(result.stdout)["hits"], list)
    for wordless in ("*", "???"):  # nothing to search for: refused before any search
        assert invoke("query", "--db", str(beir_db), "--mode", mode, wordless).exit_code == 2


def test_eval_retrieval_json_shape(beir_db: Path) -> None:
    result = invoke(
        "eval",
        "retrieval",
        "--db",
        str(beir_db),
        "--queries",
        str(MINI / "queries.jsonl"),
        "--qrels",
        str(MINI / "qrels.tsv"),
        "--mode",
        "hybrid",
        "--json",
    )
    data = json.loads(result.stdout)
    assert data["queries"] == 12
    assert set(data) >= {"ndcg@10", "recall@10", "recall@100", "queries"}
    assert 0.5 < data["ndcg@10"] <= 1.0  # 40 documents: the gold abstracts are easy to find
    assert data["recall@100"] == 1.0


def test_readable_errors_for_bad_databases(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.txt"
    foreign.write_text("just text")
    before = hashlib.sha256(foreign.read_bytes()).hexdigest()
    result = invoke("query", "--db", str(foreign), "x")
    assert result.exit_code == 1
    assert "not a SQLite database" in result.stderr and "Traceback" not in result.stderr
    assert hashlib.sha256(foreign.read_bytes()).hexdigest() == before
    missing = invoke("query", "--db", str(tmp_path / "nope.db"), "x")
    assert missing.exit_code == 1 and "no such corpus" in missing.stderr


def test_expected_error_is_one_line_and_debug_adds_its_traceback(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.txt"
    foreign.write_text("just text")
    plain = invoke("query", "--db", str(foreign), "x")
    assert plain.exit_code == 1
    assert plain.stderr.strip().splitlines() == [
        f"error: {foreign}: not a SQLite database (bad file header)"
    ]
    for args, env in [(["--debug"], {}), ([], {"CRAG_EDGE_DEBUG": "1"})]:
        debugged = invoke(*args, "query", "--db", str(foreign), "x", env=env)
        assert debugged.exit_code == 1
        assert "Traceback" in debugged.stderr and "CorruptCorpusError" in debugged.stderr
        assert debugged.stderr.strip().splitlines()[-1] == plain.stderr.strip()


@pytest.mark.parametrize("bug", [ZeroDivisionError, ValueError, KeyError])
def test_a_bug_is_not_reduced_to_one_line(
    beir_db: Path, bug: type[Exception], monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise bug("a bug in the engine")

    monkeypatch.setattr(Engine, "query", broken)
    result = runner.invoke(app, ["query", "--db", str(beir_db), "x"], env=FAST)
    assert isinstance(result.exception, bug)  # left to Python to print with its traceback
    assert result.exit_code == 1 and "error:" not in result.stderr


def test_a_bug_prints_its_traceback_from_the_console_script(beir_db: Path) -> None:
    program = (
        "import sys; from crag_edge.store import Corpus; from crag_edge.cli import main\n"
        "def broken(self, **kwargs): raise ValueError('a bug in stats')\n"
        "Corpus.stats = broken; sys.argv = ['crag-edge', 'stats', '--db', sys.argv[1]]; main()"
    )
    run = subprocess.run(
        [sys.executable, "-c", program, str(beir_db)], capture_output=True, text=True, check=False
    )
    assert run.returncode == 1
    assert "Traceback" in run.stderr and "ValueError: a bug in stats" in run.stderr
    assert "error:" not in run.stderr


def test_evaluator_train_without_a_corpus_is_one_line(tmp_path: Path) -> None:
    result = invoke("evaluator", "train", "--db", str(tmp_path / "nope.db"))
    assert result.exit_code == 1
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: ") and "crag-edge ingest --db" in line


@pytest.mark.parametrize("option", [("--epochs", "nan"), ("--lr", "0"), ("--layers", "0")])
def test_evaluator_train_refuses_numbers_out_of_range(
    tmp_path: Path, option: tuple[str, str]
) -> None:
    result = invoke("evaluator", "train", "--db", str(tmp_path / "nope.db"), *option)
    assert result.exit_code == 2 and option[0] in result.stderr


def test_json_output_has_null_where_a_number_is_not_finite(
    capsys: pytest.CaptureFixture[str],
) -> None:
    print_json({"roc_auc": float("nan"), "scores": [1.0, float("inf")], "n": 3})
    assert json.loads(capsys.readouterr().out) == {"roc_auc": None, "scores": [1.0, None], "n": 3}


def test_root_help_renders_every_option() -> None:
    result = invoke("--help")
    assert "[crag_edge]" in result.stdout and "--debug" in result.stdout


def test_unknown_scorer_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("eval", "grading", "--pairs", str(tmp_path / "p.jsonl"), "--scorers", "x")
    assert result.exit_code == 2 and "--scorers" in result.stderr


@pytest.mark.parametrize("command", ["query", "answer"])
def test_a_blank_question_is_a_usage_error(beir_db: Path, command: str) -> None:
    result = invoke(command, "--db", str(beir_db), " \t ")
    assert result.exit_code == 2 and "the question is empty" in result.stderr


def test_invalid_settings_exit_2_naming_the_setting() -> None:
    for variable in ("KB_AGENT_MAX_ITERATIONS", "CRAG_EDGE_MAX_ITERATIONS"):
        result = invoke("query", "--db", "x.db", "q", env={variable: "lots"})
        assert result.exit_code == 2
        assert variable in result.stderr  # the variable that was set, under either name


def test_models_list_and_verify(tmp_path: Path, model_dir: Path) -> None:
    listed = json.loads(invoke("models", "list", "--json").stdout)
    ids = {m["id"]: m for m in listed}
    assert (
        ids["all-minilm-l6-v2"]["present"] is True and ids["all-minilm-l6-v2"]["role"] == "embedder"
    )
    verified = invoke("models", "verify", "all-minilm-l6-v2", "--json")
    assert verified.exit_code == 0 and json.loads(verified.stdout)[0]["ok"] is True


def _toy_model_dir(tmp_path: Path, source: str) -> Path:
    payload = b"toy model weights" * 100
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "manifest.local.toml").write_text(
        f"""[models.toy]
role = "llm-small"
license = "MIT"
[[models.toy.files]]
name = "toy.bin"
size = {len(payload)}
sha256 = "{hashlib.sha256(payload).hexdigest()}"
sources = [{source}]
"""
    )
    (tmp_path / "usb").mkdir()
    (tmp_path / "usb" / "toy.bin").write_bytes(payload)
    return tmp_path / "models"


def test_models_pull_air_gapped(tmp_path: Path) -> None:
    models = _toy_model_dir(tmp_path, '{ kind = "url", url = "http://hub.invalid/toy.bin" }')
    env = {"CRAG_EDGE_MODEL_DIR": str(models)}
    failed = invoke("models", "pull", "toy", env=env)
    assert failed.exit_code == 1
    assert "Air-gapped?" in failed.stderr and "hub.invalid" in failed.stderr
    pulled = invoke("models", "pull", "toy", "--from", str(tmp_path / "usb"), "--json", env=env)
    assert pulled.exit_code == 0
    assert json.loads(pulled.stdout)[0]["files"][0]["state"] == "ok"
    (models / "toy" / "toy.bin").write_bytes(b"tampered")
    tampered = invoke("models", "verify", "toy", env=env)
    assert tampered.exit_code == 1 and "size-mismatch" in tampered.stdout
    unknown = invoke("models", "pull", "no-such-model", env=env)  # a typo: a usage error
    assert unknown.exit_code == 2 and "unknown model 'no-such-model'" in unknown.stderr


# The finished answer's JSON shape (`answer.finished`), the same in every face; `follow_up`
# besides for a follow-up question.
ANSWER_KEYS = (
    "question",
    "decision",
    "meaning",
    "reason",
    "insufficient_evidence",
    "corrections",
    "warnings",
    "answer",
    "finish_reason",
    "note",
    "refusal",
    "citations",
    "sources",
    "support",
    "timings",
)


def test_answer_prints_the_result_and_a_cited_answer(beir_db: Path) -> None:
    env = {"CRAG_EDGE_LLM_MAX_TOKENS": "24", "CRAG_EDGE_LLM_THREADS": "1"}
    result = invoke(
        "answer",
        "--db",
        str(beir_db),
        "--json",
        "Does vitamin D reduce the risk of bone fractures?",
        env=env,
    )
    data = json.loads(result.stdout)
    assert list(data) == list(ANSWER_KEYS)
    assert data["answer"].strip()
    assert data["finish_reason"] in ("stop", "length", "insufficient_evidence", "unsupported")
    # a sentence not shown says why
    assert all(s["shown"] or s["reason"] for s in data["support"]["sentences"])
    assert data["decision"] in ("CORRECT", "AMBIGUOUS", "INCORRECT")
    cited = {s["n"] for s in data["sources"] if s["cited"]}
    assert cited == {c["n"] for c in data["citations"]}
    assert all(f"[{c['n']}]" in data["answer"] and c["text"] for c in data["citations"])
    text = invoke("answer", "--db", str(beir_db), "What is the capital of Australia?", env=env)
    assert text.exit_code == 0
    assert "answer:" in text.stdout and "hits of round" in text.stdout
    assert re.search(r"^evidence \d+\.\d s · .*answer \d+\.\d s", text.stderr, re.M)


def test_answer_json_times_the_wait_for_the_first_word(beir_db: Path) -> None:
    env = {"CRAG_EDGE_LLM_MAX_TOKENS": "8", "CRAG_EDGE_LLM_THREADS": "1"}
    result = invoke("answer", "--db", str(beir_db), "--json", ANSWERABLE, env=env)
    data = json.loads(result.stdout)
    assert data["sources"]  # the model was asked
    timings = data["timings"]
    assert 0 < timings["first_token_s"] <= timings["answer_s"]
    assert timings["retrieval_grading_s"] > 0
    assert timings["total_s"] == pytest.approx(
        timings["retrieval_grading_s"] + timings["answer_s"], abs=0.002
    )
    assert 0 < timings["evaluated_tokens"] <= timings["prompt_tokens"]


def test_answer_cut_at_max_tokens_says_so(beir_db: Path) -> None:
    env = {"CRAG_EDGE_LLM_MAX_TOKENS": "2", "CRAG_EDGE_LLM_THREADS": "1"}
    cut = invoke("answer", "--db", str(beir_db), "--json", ANSWERABLE, env=env)
    data = json.loads(cut.stdout)
    assert cut.exit_code == 0 and data["sources"]  # the model was asked
    assert data["finish_reason"] == "length" and data["answer"].strip()
    text = invoke("answer", "--db", str(beir_db), ANSWERABLE, env=env)
    assert text.exit_code == 0
    assert "the answer was cut at 2 tokens; raise CRAG_EDGE_LLM_MAX_TOKENS" in text.stderr


def test_answer_that_stalls_empty_exits_1_with_one_line(beir_db: Path) -> None:
    # Any elapsed time is a stall at this limit: the model is stopped before its first token.
    env = {"CRAG_EDGE_LLM_STALL_TIMEOUT_S": "1e-9", "CRAG_EDGE_LLM_THREADS": "1"}
    stalled = invoke("answer", "--db", str(beir_db), ANSWERABLE, env=env)
    assert stalled.exit_code == 1
    lines = stalled.stderr.strip().splitlines()
    assert len(lines) == 1, stalled.stderr
    assert lines[0].startswith("error: no answer: the model made no progress")
    assert "raise CRAG_EDGE_LLM_STALL_TIMEOUT_S" in lines[0]
    as_json = invoke("answer", "--db", str(beir_db), "--json", ANSWERABLE, env=env)
    assert as_json.exit_code == 1
    data = json.loads(as_json.stdout)
    assert data["finish_reason"] == "timeout" and data["answer"] == ""


def test_answer_prompt_too_long_for_the_context_exits_1_with_one_line(beir_db: Path) -> None:
    env = {"CRAG_EDGE_LLM_CONTEXT": "512", "CRAG_EDGE_CONTEXT_BUDGET_TOKENS": "4096"}
    question = ANSWERABLE + " Ly49Q neutrophil polarization." * 60
    long = invoke("answer", "--db", str(beir_db), question, env=env)
    assert long.exit_code == 1
    lines = long.stderr.strip().splitlines()
    assert len(lines) == 1, long.stderr
    assert "does not fit the 512-token context" in lines[0]
    assert "raise CRAG_EDGE_LLM_CONTEXT" in lines[0]


def test_text_from_documents_and_file_names_is_printed_as_written(tmp_path: Path) -> None:
    """Titles, chunk text and file names are other people's text: a `[/]` in them is not
    markup (it raised mid-print), `:smile:` is not an emoji code, an escape is dropped."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "bees.md").write_text(
        "# Dances [/] and [link=https://example.com]links[/link]\n\n"
        "Honeybees dance [bold]to tell[/] their sisters :smile: where the flowers are.\n"
    )
    (docs / "[bold]broken.pdf").write_bytes(b"%PDF-1.4 this is not really a pdf")
    db = tmp_path / "c.db"
    ingested = invoke("ingest", "--db", str(db), str(docs))
    assert ingested.exit_code == 0, ingested.output
    assert "[bold]broken.pdf" in ingested.stderr
    result = invoke("query", "--db", str(db), "Why do honeybees dance?")
    assert result.exit_code == 0, result.output
    assert "Dances [/] and [link=https://example.com]links[/link]" in result.stdout
    assert "dance [bold]to tell[/] their sisters :smile: where" in result.stdout


def test_sigterm_stops_an_ingest_in_one_line_and_the_rerun_completes(tmp_path: Path) -> None:
    """A service manager stopping an ingest (SIGTERM) stops it as Ctrl+C does: one line,
    exit 143, only whole documents stored, and the same command then finishes the job."""
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(40):
        (docs / f"part{n:02}.txt").write_text(f"Part {n}. " + "Bees dance to find flowers. " * 400)
    db = tmp_path / "c.db"
    command = [sys.executable, "-m", "crag_edge.cli", "ingest", "--db", str(db), str(docs)]
    running = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=os.environ | FAST
    )
    while not db.exists() and running.poll() is None:
        time.sleep(0.05)
    running.send_signal(signal.SIGTERM)
    _, stderr = running.communicate(timeout=120)
    assert running.returncode == 143, stderr
    assert stderr.strip().splitlines()[-1] == "terminated" and "Traceback" not in stderr
    assert invoke("check", "--db", str(db)).exit_code == 0
    rerun = invoke("ingest", "--db", str(db), str(docs), "--json")
    report = json.loads(rerun.stdout)
    assert report["added"] + report["unchanged"] == 40 and report["added"] > 0


WIKIQA_ROWS = [
    (
        "Q1",
        "How do honey bees communicate the location of food?",
        "Honey bees dance the waggle dance to communicate the direction and distance of food.",
        1,
    ),
    (
        "Q1",
        "How do honey bees communicate the location of food?",
        "The hive is made of wax produced by worker bees.",
        0,
    ),
    (
        "Q1",
        "How do honey bees communicate the location of food?",
        "Beekeeping is practised on every continent except Antarctica.",
        0,
    ),
    (
        "Q2",
        "When was the Eiffel Tower completed?",
        "The Eiffel Tower was completed in 1889 for the World's Fair.",
        1,
    ),
    ("Q2", "When was the Eiffel Tower completed?", "Paris is the capital of France.", 0),
    ("Q3", "What is the boiling point of mercury?", "Mercury is the closest planet to the Sun.", 0),
    ("Q3", "What is the boiling point of mercury?", "The planet has no moons.", 0),
]


def test_eval_pairs_then_grading_json_shape(tmp_path: Path) -> None:
    tsv = tmp_path / "WikiQA-tiny.tsv"
    header = "QuestionID\tQuestion\tDocumentID\tDocumentTitle\tSentenceID\tSentence\tLabel\n"
    tsv.write_text(
        header
        + "".join(
            f"{q}\t{text}\tD{q}\tT\tS{i}\t{s}\t{y}\n"
            for i, (q, text, s, y) in enumerate(WIKIQA_ROWS)
        ),
        encoding="utf-8",
    )
    pairs = tmp_path / "pairs.jsonl"
    made = invoke("eval", "pairs", "--from", "wikiqa", str(tsv), "--out", str(pairs))
    assert made.exit_code == 0 and "wrote 7 pairs (2 relevant)" in made.stderr
    result = invoke(
        "eval", "grading", "--pairs", str(pairs), "--scorers", "cosine,coverage,signals", "--json"
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (report["pairs"], report["positives"], report["queries"]) == (7, 2, 3)
    assert set(report["scorers"]) == {"cosine", "coverage", "signals"}
    for row in [*report["scorers"].values(), report["cascade"]]:
        assert set(row) >= {
            "roc_auc",
            "answerable_auc",
            "accuracy_at_discard_below",
            "accuracy_at_correct",
            "items_per_s",
        }
    # The relevant sentences repeat their question's words; Q3 has no answer at all.
    assert report["scorers"]["coverage"]["roc_auc"] == 1.0
    assert report["scorers"]["cosine"]["answerable_auc"] == 1.0
    assert report["cascade"]["tier_share"]["signals"] == 1.0
    table = invoke("eval", "grading", "--pairs", str(pairs), "--scorers", "cosine")
    assert "answerable AUC" in table.stdout and "cascade" in table.stdout


def test_query_says_its_corrections_in_words(beir_db: Path) -> None:
    """The corrections line reads as the TUI's Decision panel does: each rewrite with the
    query it searched, never a dict of its details."""
    result = invoke("query", "--db", str(beir_db), "What is the capital of Australia?")
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stdout.splitlines() if line.startswith("corrections: ")]
    assert len(lines) == 1, result.stdout
    assert "rewrite → 'capital australia'" in lines[0] and "{" not in lines[0]
