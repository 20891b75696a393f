"""The commands on a PostgreSQL corpus (`--db postgresql://...` or `CRAG_EDGE_DB_URL`), run as
a user runs them, against the real server of `tests/postgres.py`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import MINI, invoke


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
    for text in ['NEAR("x" AND', "*", "'; DROP TABLE chunks;--", "neutrophil polarization"]:
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
