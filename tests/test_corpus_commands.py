"""The corpus commands of every day, run as a user runs them on real files: ingest's progress
frames (by chunks, with a rate and an ETA, and a last frame that says what was done),
`--exclude`, `documents`, `stats` for a person, and warnings printed beside the output."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.console.readable import age, readable_size
from crag_edge.engine import Engine
from crag_edge.ingest import ProgressEvent, ingest
from crag_edge.ingest.exclude import checked_globs, is_excluded
from crag_edge.ingest.pipeline import IngestReport
from crag_edge.ingest.rate import Frame, IngestMeter
from crag_edge.store.factory import open_or_create_corpus

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
MINI = Path(__file__).parent / "data" / "scifact_mini"
FAST = {"CRAG_EDGE_GRADING_TIERS": '["signals"]', "CRAG_EDGE_REWRITE_WITH_LLM": "false"}
RAW_TIMESTAMP = re.compile(r"\b1[6-9]\d{8}(\.\d+)?\b")  # unix seconds, 2020s-2030s
runner = CliRunner()


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, list(args), env=FAST | (env or {}), catch_exceptions=False)


class Clock:
    """A clock the test advances by hand, so rates and ETAs are exact."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


# -- progress ----------------------------------------------------------------------------------


def test_the_meter_shows_chunks_a_rate_and_an_eta_per_stage() -> None:
    clock = Clock()
    meter = IngestMeter(clock)
    first = meter.update(ProgressEvent(1, 16, "/d/ch01.html", "added", chunks=30, expected=300))
    assert (first.done, first.total, first.eta_s) == (30, 300, None)  # no rate in warm-up
    assert first.describe() == "embedding · 30/~300 chunks · 1/16 documents · ch01.html"
    clock.now += 10.0
    frame = meter.update(ProgressEvent(4, 16, "/d/ch04.html", "added", chunks=100, expected=320))
    assert frame.per_second == pytest.approx(10.0) and frame.eta_s == pytest.approx(22.0)
    assert frame.describe() == (
        "embedding · 100/~320 chunks · 10.0 chunks/s · 4/16 documents · ETA 0:22 · ch04.html"
    )
    clock.now += 2.0  # the evaluator's stage has its own clock and counts passages
    reading = meter.update(ProgressEvent(64, 320, "evaluator", "encoded", "passages"))
    assert (reading.stage, reading.done, reading.total, reading.per_second) == (
        "evaluator",
        64,
        320,
        0.0,
    )
    clock.now += 4.0
    assert meter.update(ProgressEvent(128, 320, "ev", "encoded", "passages")).per_second == 32


def test_the_last_frame_comes_from_the_report() -> None:
    report = IngestReport(added=14, unchanged=1, chunks_written=3412, seconds=72.6)
    report.errors.append(("bad.html", "unreadable"))
    last = IngestMeter().final(report)
    assert (last.done, last.total, last.files, last.file_total) == (3412, 3412, 16, 16)
    assert last.describe() == "ingested 3,412 chunks from 16 documents · 47.0 chunks/s"
    one = IngestMeter().final(IngestReport(added=1, chunks_written=1, seconds=0.5))
    assert one.describe() == "ingested 1 chunk from 1 document · 2.0 chunks/s"


def test_a_real_ingest_reports_chunks_expected_and_ends_exact(
    tmp_path: Path, embedder: Any
) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    (docs / "big.md").write_text("# Big\n\n" + "Honeybees dance to show flowers. " * 400)
    frames: list[Frame] = []
    events: list[ProgressEvent] = []
    meter = IngestMeter()

    def hear(event: ProgressEvent) -> None:
        events.append(event)
        frames.append(meter.update(event))

    with open_or_create_corpus(tmp_path / "c.db", embedder.model_id, embedder.dim) as corpus:
        report = ingest(
            corpus,
            embedder,
            embedder.tokenizer,
            [docs],
            settings=Settings().ingest,
            progress=hear,
            group_chunks=4,
        )
    done = [frame.done for frame in frames]
    assert done == sorted(done) and done[-1] == report.chunks_written
    assert all(frame.total >= frame.done for frame in frames)
    written = [e for e in events if e.stage == "documents"]
    assert [e.done for e in written] == list(range(1, 8)) and written[-1].total == 7
    assert written[-1].expected == report.chunks_written  # exact once every file is read
    assert any(e.stage == "chunks" for e in events)  # the large file within itself


def test_the_cli_ingest_ends_on_a_frame_that_says_what_was_done(tmp_path: Path) -> None:
    result = invoke("ingest", "--db", str(tmp_path / "c.db"), str(SAMPLE))
    assert result.exit_code == 0, result.output
    report = re.search(r"([\d,]+) chunks in", result.stdout)
    assert report is not None
    last = f"ingested {report.group(1)} chunks from 6 documents"
    assert last in result.stderr, result.stderr
    assert "0/6" not in result.stderr


# -- --exclude ---------------------------------------------------------------------------------


def test_exclude_globs_match_the_end_of_a_path() -> None:
    globs = checked_globs(["*.fr.html", "toc/", "print/*.html"])
    assert globs == ("*.fr.html", "toc/*", "print/*.html")
    assert is_excluded(Path("/m/ch01.fr.html"), globs)
    assert is_excluded(Path("/m/deep/toc/index.html"), globs)
    assert is_excluded(Path("/m/print/a/b.html"), globs)  # `*` crosses folders
    assert not is_excluded(Path("/m/ch01.en.html"), globs)
    assert not is_excluded(Path("/m/toc.html"), globs)
    for bad in ("", "  ", "/abs/*", "a\x00b"):
        with pytest.raises(ValueError):
            checked_globs([bad])


def test_ingest_exclude_leaves_files_out_and_prune_removes_them(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(SAMPLE, docs)
    (docs / "toc").mkdir()
    (docs / "toc" / "index.md").write_text("# Contents\n\nEvery chapter.\n")
    (docs / "honeybees.fr.txt").write_text("Les abeilles dansent.\n")
    db = str(tmp_path / "c.db")
    everything = json.loads(invoke("ingest", "--db", db, str(docs), "--json").stdout)
    assert everything["added"] == 8 and everything["excluded"] == 0
    globs = ["--exclude", "*.fr.txt", "--exclude", "toc/"]
    pruned = invoke("ingest", "--db", db, str(docs), *globs, "--prune")
    assert pruned.exit_code == 0, pruned.output
    assert "pruned 2, skipped 0, excluded 2, errors 0" in pruned.stdout
    listed = json.loads(invoke("documents", "--db", db, "--json").stdout)
    assert sorted(Path(d["source"]).name for d in listed) == sorted(
        path.name for path in SAMPLE.iterdir()
    )
    wrong = invoke("ingest", "--db", db, str(docs), "--exclude", "/abs/*")
    assert wrong.exit_code == 2 and "absolute" in wrong.output


def test_engine_exclude_is_a_list_of_globs(tmp_path: Path, embedder: Any) -> None:
    db = tmp_path / "c.db"
    with Engine.open(db, Settings.load(), create=True, embedder=embedder) as engine:
        with pytest.raises(TypeError, match="list of globs"):
            engine.ingest([SAMPLE], exclude="*.md")  # type: ignore[arg-type]
        report = engine.ingest([SAMPLE], exclude=["*.md"])
    assert (report.added, report.excluded) == (3, 3)


# -- documents and stats ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def tagged_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("listing")
    (base / "secret").mkdir()
    (base / "secret" / "plan.md").write_text("# Plan\n\nThe launch is in spring.\n")
    db = base / "c.db"
    assert invoke("ingest", "--db", str(db), str(SAMPLE)).exit_code == 0
    tagged = invoke("ingest", "--db", str(db), str(base / "secret"), "--groups", "staff")
    assert tagged.exit_code == 0
    return db


def test_documents_lists_each_document_for_a_person(tagged_db: Path) -> None:
    result = invoke("documents", "--db", str(tagged_db))
    assert result.exit_code == 0, result.output
    header, *rows, total = result.stdout.splitlines()
    assert header.split() == ["type", "chunks", "groups", "size", "ingested", "source"]
    plan = next(row for row in rows if "plan.md" in row)
    assert re.match(r"md\s+1\s+staff\s+\d+ bytes\s+\d{4}-\d\d-\d\d \d\d:\d\d  /\S+/plan.md$", plan)
    assert re.fullmatch(r"7 documents, \d+ chunks", total)
    assert not RAW_TIMESTAMP.search(result.stdout)


def test_documents_json_keeps_machine_values_and_groups_filter(tagged_db: Path) -> None:
    listed = json.loads(invoke("documents", "--db", str(tagged_db), "--json").stdout)
    stats = json.loads(invoke("stats", "--db", str(tagged_db), "--json").stdout)
    assert sum(d["chunks"] for d in listed) == stats["chunks"] and len(listed) == 7
    plan = next(d for d in listed if d["source"].endswith("plan.md"))
    assert plan["groups"] == ["staff"] and plan["type"] == "md"
    assert isinstance(plan["ingested_at"], float) and plan["size"] > 0
    html = next(d for d in listed if d["source"].endswith(".html"))
    assert html["type"] == "html" and html["groups"] == []
    outsider = json.loads(
        invoke("documents", "--db", str(tagged_db), "--json", "--groups", "x").stdout
    )
    assert len(outsider) == 6 and not any(d["source"].endswith("plan.md") for d in outsider)


def test_stats_reads_as_a_person_reads_and_json_keeps_machine_values(tagged_db: Path) -> None:
    plain = invoke("stats", "--db", str(tagged_db))
    assert plain.exit_code == 0, plain.output
    rows = dict(re.split(r"\s{2,}", line.strip(), maxsplit=1) for line in plain.stdout.splitlines())
    assert re.fullmatch(r"\d+(\.\d)? (kB|MB)", rows["size"]), rows["size"]
    assert re.fullmatch(
        r"\d{4}-\d\d-\d\d \d\d:\d\d \((just now|\d+ minutes? ago)\)", rows["created"]
    )
    assert rows["documents"] == "7" and rows["embedder"].endswith("(384 dimensions)")
    assert not RAW_TIMESTAMP.search(plain.stdout)
    machine = json.loads(invoke("stats", "--db", str(tagged_db), "--json").stdout)
    assert isinstance(machine["created_at"], float) and isinstance(machine["db_bytes"], int)


def test_readable_numbers() -> None:
    assert [readable_size(n) for n in (None, 1, 999, 1000, 1_234_567, 5 * 10**9)] == [
        "-",
        "1 byte",
        "999 bytes",
        "1.0 kB",
        "1.2 MB",
        "5.0 GB",
    ]
    assert [age(s) for s in (5, 60, 7200, 86400 * 3)] == [
        "just now",
        "1 minute ago",
        "2 hours ago",
        "3 days ago",
    ]


# -- warnings ----------------------------------------------------------------------------------


def test_a_warning_that_changed_the_context_is_printed_without_json(tmp_path: Path) -> None:
    db = tmp_path / "mini.db"
    beir = invoke("ingest", "--db", str(db), "--format", "beir", str(MINI / "corpus.jsonl"))
    assert beir.exit_code == 0
    tight = {"CRAG_EDGE_CONTEXT_BUDGET_TOKENS": "64"}
    question = "Does Ly49Q induce neutrophil polarization?"
    machine = json.loads(invoke("query", question, "--db", str(db), "--json", env=tight).stdout)
    [cut] = [w for w in machine["warnings"] if "left out of the answer's context" in w]
    plain = invoke("query", question, "--db", str(db), env=tight)
    assert plain.exit_code == 0
    assert f"warning: {cut}" in " ".join(plain.stderr.split())
