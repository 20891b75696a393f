"""The commands on a PostgreSQL corpus (`--db postgresql://...` or `CRAG_EDGE_DB_URL`), run as
a user runs them, against the real server of `tests/postgres.py`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crag_edge.locations import corpus_name, shown_location
from crag_edge.store.postgres import PostgresCorpus
from crag_edge.store.postgres.schema import SCHEMA
from tests.postgres import create_database
from tests.test_cli import MINI, invoke
from tests.test_storage_faults import FAST, crag_edge, write_docs
from tests.test_training import needs_torch


@pytest.fixture(scope="module")
def pg_db(postgres_database: str) -> str:
    result = invoke(
        "ingest",
        "--db",
        postgres_database,
        "--format",
        "beir",
        str(MINI / "corpus.jsonl"),
        "--json",
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["added"] == 40 and report["errors"] == []
    return postgres_database


def eval_retrieval(db: str) -> dict[str, float]:
    result = invoke(
        "eval",
        "retrieval",
        "--db",
        db,
        "--queries",
        str(MINI / "queries.jsonl"),
        "--qrels",
        str(MINI / "qrels.tsv"),
        "--mode",
        "hybrid",
        "--json",
    )
    assert result.exit_code == 0, result.output
    return dict(json.loads(result.stdout))


def test_a_second_ingest_finds_every_document_unchanged(pg_db: str) -> None:
    again = invoke(
        "ingest", "--db", pg_db, "--format", "beir", str(MINI / "corpus.jsonl"), "--json"
    )
    report = json.loads(again.stdout)
    assert (report["added"], report["updated"], report["unchanged"]) == (0, 0, 40)


def test_stats_query_and_eval_work_on_postgres_as_on_sqlite(pg_db: str, tmp_path: Path) -> None:
    stats = json.loads(invoke("stats", "--db", pg_db, "--json").stdout)
    assert stats["documents"] == 40 and stats["path"].startswith("postgresql://")
    for text in ['NEAR("x" AND', "a* OR", "'; DROP TABLE chunks;--", "neutrophil polarization"]:
        result = invoke("query", "--db", pg_db, "--json", text)
        assert result.exit_code == 0, result.output
    sqlite_db = str(tmp_path / "mini.db")
    invoke("ingest", "--db", sqlite_db, "--format", "beir", str(MINI / "corpus.jsonl"))
    on_postgres, on_sqlite = eval_retrieval(pg_db), eval_retrieval(sqlite_db)
    assert on_postgres["ndcg@10"] == pytest.approx(on_sqlite["ndcg@10"], abs=0.05)


def test_the_db_url_setting_names_the_corpus_when_db_is_not_given(pg_db: str) -> None:
    result = invoke("stats", "--json", env={"CRAG_EDGE_DB_URL": pg_db})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["documents"] == 40
    assert invoke("stats").exit_code == 2  # neither: a usage error


def test_an_unreachable_database_is_one_line_and_exit_1(tmp_path: Path) -> None:
    url = f"postgresql://nobody:secret@/nodb?host={tmp_path}"
    result = invoke("stats", "--db", url)
    assert result.exit_code == 1
    assert "cannot connect" in result.output and "secret" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    bad = invoke("stats", env={"CRAG_EDGE_DB_URL": "mysql://x"})
    assert bad.exit_code == 2 and "db_url" in bad.output


def test_pairs_from_retrieval_read_a_postgres_corpus(pg_db: str, tmp_path: Path) -> None:
    out = tmp_path / "pairs.jsonl"
    result = invoke(
        "eval", "pairs", "--from", "retrieval", "--db", pg_db, "--out", str(out),
        "--queries", str(MINI / "queries.jsonl"), "--qrels", str(MINI / "qrels.tsv"),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    pairs = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert pairs and any(pair["label"] == 1 for pair in pairs)


# Every grade falls short of CORRECT and of the fast path: each question asks the fallback.
ALWAYS_FALLBACK = {
    "CRAG_EDGE_CORRECT_THRESHOLD": "1.0",
    "CRAG_EDGE_INCORRECT_THRESHOLD": "1.0",
    "CRAG_EDGE_VECTOR_SCORE_THRESHOLD": "1.0",
}


def test_a_postgres_corpus_serves_as_the_local_fallback(pg_db: str) -> None:
    env = ALWAYS_FALLBACK | {"CRAG_EDGE_FALLBACK_DB": pg_db}
    result = invoke("query", "--db", pg_db, "--json", "neutrophil polarization", env=env)
    assert result.exit_code == 0, result.output
    fallback = json.loads(result.stdout)["fallback"]
    assert fallback["used"] == ["local"] and fallback["failures"] == []
    report = invoke(
        "eval", "crag", "--db", pg_db, "--fallback-db", pg_db, "--limit", "1", "--json",
        "--queries", str(MINI / "queries.jsonl"), "--qrels", str(MINI / "qrels.tsv"),
        env=ALWAYS_FALLBACK,
    )  # fmt: skip
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["fallback_rate"] == 1.0


def test_the_tui_opens_a_postgres_corpus_and_answers(pg_db: str) -> None:
    pytest.importorskip("textual")
    from crag_edge.tui import CragApp
    from tests.test_tui import QUESTION, busy, run, tui_settings, wait_for

    app = CragApp(db=pg_db, settings=tui_settings())

    async def body(pilot: Any) -> None:
        await wait_for(pilot, lambda: app.engine is not None)
        assert "40 documents" in str(app.sub_title)
        await pilot.press(*QUESTION, "enter")
        screen = app.main_screen
        await wait_for(pilot, lambda: screen.result is not None and not busy(app))
        assert screen.result is not None and screen.result.hits
        assert "signals" in [stage.name for stage in screen.stages.stages]

    run(app, body, (120, 40))


@needs_torch
def test_the_evaluator_trains_on_a_postgres_corpus(pg_db: str, tmp_path: Path) -> None:
    out = tmp_path / "evaluator"
    args = ["evaluator", "train", "--db", pg_db, "--out", str(out), "--no-register"]
    args += ["--layers", "1", "--vocab-size", "3000", "--epochs", "1", "--max-pairs", "60"]
    result = invoke(*args, "--budget-minutes", "1", "--no-llm-labels", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["data"]["db"] == corpus_name(pg_db) and report["data"]["pairs"] > 0
    assert report["model_id"] == f"evaluator-{corpus_name(pg_db)}"
    card = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert shown_location(pg_db) in card  # the command to reproduce it, password masked


@pytest.fixture
def reader_url(pg_db: str) -> Iterator[str]:
    """`pg_db` reached as a role that may only read its tables (a reporting account)."""
    role = "crag_edge_reader"
    with psycopg.connect(pg_db, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role} LOGIN")
        conn.execute(f"GRANT USAGE ON SCHEMA {SCHEMA} TO {role}")
        conn.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA {SCHEMA} TO {role}")
    url = pg_db.replace("//postgres:", f"//{role}:", 1)
    assert url != pg_db
    try:
        yield url
    finally:
        with psycopg.connect(pg_db, autocommit=True) as conn:
            conn.execute(f"DROP OWNED BY {role}")
            conn.execute(f"DROP ROLE {role}")


def test_a_role_that_may_only_read_opens_the_corpus_read_only(
    reader_url: str, tmp_path: Path
) -> None:
    """As a file without write access does: reads work, the caches are not written (a query
    of the evaluator's tier never fails for it), an ingest is one line and exit 1."""
    assert json.loads(invoke("stats", "--db", reader_url, "--json").stdout)["documents"] == 40
    with PostgresCorpus.open(reader_url) as corpus:
        assert corpus.readonly
        assert not corpus.score_cache().put("scorer", "query", {corpus.chunk_ids()[0]: 0.5})
    (tmp_path / "new.txt").write_text("A document the reader may not add.")
    refused = invoke("ingest", "--db", reader_url, str(tmp_path))
    assert refused.exit_code == 1
    assert refused.output.strip().startswith("error:") and "read-only" in refused.output
    assert "role may not write" in refused.output and "file" not in refused.output
    assert len(refused.output.strip().splitlines()) == 1


def stored_documents(url: str) -> int:
    """How many documents the corpus at `url` holds (0 before it exists)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass(%s)", (f"{SCHEMA}.documents",)).fetchone() == (None,):
            return 0
        row = conn.execute(f"SELECT count(*) FROM {SCHEMA}.documents").fetchone()
        return int(row[0]) if row is not None else 0


def test_connections_cut_mid_ingest_are_one_line_and_the_rerun_completes(
    postgres_server: Any, tmp_path: Path
) -> None:
    """The server drops the ingest's connections (a restart does): one error line, exit 1,
    and what was committed stays for the next run to complete, with no document twice."""
    url = create_database(postgres_server)
    docs = write_docs(tmp_path / "docs", 30)
    ingest = subprocess.Popen(
        [sys.executable, "-m", "crag_edge.cli", "ingest", "--db", url, str(docs)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ | FAST,
    )
    deadline = time.monotonic() + 300
    while stored_documents(url) == 0 and ingest.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    _, stderr = ingest.communicate(timeout=300)
    assert ingest.returncode == 1, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), stderr
    assert 0 < stored_documents(url) < 30
    assert crag_edge("check", "--db", url).returncode == 0
    assert crag_edge("ingest", "--db", url, str(docs)).returncode == 0
    assert stored_documents(url) == 30
