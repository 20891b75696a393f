"""Hostile or clumsy input, on real files and a real corpus: odd paths, text that is not valid
Unicode, a missing input under --prune, a file swapped for a link after the service checked
it, and documents too large to index. Each case is one clear line, never a traceback."""

from __future__ import annotations

import json
import os
from collections.abc import Generator, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.ingest import IngestReport, ProgressEvent, ingest
from crag_edge.models.chat_model import TextStream
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.server.security import expand_confined
from crag_edge.store import Corpus
from crag_edge.text_boundary import (
    QuestionError,
    asked_question,
    printable_path,
    repair,
)

runner = CliRunner()
FAST = {
    "CRAG_EDGE_GRADING_TIERS": '["signals"]',
    "CRAG_EDGE_REWRITE_WITH_LLM": "false",
}
BEES = "Honeybees dance to tell their sisters where the flowers are."


def invoke(*args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, list(args), env=FAST | (env or {}), catch_exceptions=False)


def ingest_json(db: Path, *inputs: Path | str, env: dict[str, str] | None = None) -> Any:
    result = invoke("ingest", "--db", str(db), *map(str, inputs), "--json", env=env)
    return result.exit_code, json.loads(result.stdout) if result.stdout.strip() else None


def reasons(report: dict[str, Any]) -> dict[str, str]:
    return {Path(source).name: reason for source, reason in report["errors"]}


def stored_sources(db: Path) -> list[str]:
    with Corpus.open(db, readonly=True) as corpus:
        return corpus.list_sources()


# -- 1. paths --------------------------------------------------------------------------------


def test_symlink_loops_fifos_and_undecodable_names_are_reported_per_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(BEES)
    (docs / "a.txt").symlink_to("b.txt")
    (docs / "b.txt").symlink_to("a.txt")
    os.mkfifo(docs / "pipe.txt")
    (docs / "gone.md").symlink_to(tmp_path / "deleted")
    (docs / os.fsdecode(b"caf\xe9.txt")).write_text("A Latin-1 file name.")
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert code == 0 and report["added"] == 1
    errors = reasons(report)
    assert "link" in errors["a.txt"] and "link" in errors["b.txt"]
    assert "not a regular file" in errors["pipe.txt"]
    assert errors["gone.md"] == f"a broken symbolic link (to {tmp_path / 'deleted'})"
    assert "UTF-8" in errors["caf\\xe9.txt"]
    assert stored_sources(tmp_path / "c.db") == [str((docs / "good.txt").resolve())]


def test_printable_path_shows_undecodable_bytes_and_control_characters() -> None:
    assert printable_path(Path(os.fsdecode(b"/d/caf\xe9.txt"))) == "/d/caf\\xe9.txt"
    assert printable_path(Path("/d/café.txt")) == "/d/café.txt"
    assert printable_path("/d/\x1b[2Jx\n.txt") == "/d/\\x1b[2Jx\\x0a.txt"


def test_a_file_name_with_control_characters_is_refused_per_file(tmp_path: Path) -> None:
    """Stored as the document's source, such a name would reach every terminal that lists
    sources: refused like a name that is not UTF-8, and named with its characters escaped."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "good.txt").write_text(BEES)
    (docs / "\x1b]0;owned\x07.txt").write_text(BEES)
    code, report = ingest_json(tmp_path / "c.db", docs)
    assert code == 0 and report["added"] == 1
    assert reasons(report) == {
        "\\x1b]0;owned\\x07.txt": "file name holds control characters; rename it"
    }
    assert stored_sources(tmp_path / "c.db") == [str((docs / "good.txt").resolve())]


# -- 2. text that is not valid Unicode -------------------------------------------------------


def test_repair_keeps_valid_text_and_replaces_lone_surrogates() -> None:
    assert repair("wal \ud800 and \udcff") == "wal \ufffd and \ufffd"
    assert repair("pair \ud83d\ude00") == "pair \U0001f600"
    assert repair("plain café") == "plain café"


def test_repair_drops_control_characters_and_keeps_line_breaks() -> None:
    assert repair("red\x1b[31m alert\x07\x08\x7f\x9b") == "red[31m alert"
    assert repair("page one\x0cpage two\x0bthree\x85four") == "page one\npage two\nthree\nfour"
    assert repair("tab\tand\r\nline") == "tab\tand\r\nline"


def test_documents_lose_their_control_characters_at_ingest(tmp_path: Path) -> None:
    """Escape sequences in a file would reach the terminal through quotes and sources, and
    the models through every chunk: each loader hands on text without them."""
    escapes = "\x1b[2J\x1b]0;owned\x07"
    (tmp_path / "bees.txt").write_text(f"{BEES}{escapes}\x0cPage two.")
    (tmp_path / "bees.html").write_text(f"<title>T{escapes}</title><p>{BEES}{escapes}</p>")
    beir = {"_id": "d1", "title": f"T{escapes}", "text": f"{BEES}{escapes}"}
    (tmp_path / "corpus.jsonl").write_text(json.dumps(beir) + "\n")
    db = tmp_path / "c.db"
    code, report = ingest_json(
        db, *(tmp_path / n for n in ("bees.txt", "bees.html", "corpus.jsonl"))
    )
    assert code == 0 and report["added"] == 3, report
    stored = stored_documents(db)
    assert stored[str((tmp_path / "bees.txt").resolve())][1] == f"{BEES}[2J]0;owned\nPage two."
    assert all(repair(title + text) == title + text for title, text in stored.values()), stored


def test_model_output_loses_its_control_characters() -> None:
    """Whatever prints an answer (the CLI, a log) gets it without escape sequences."""

    def pieces() -> Generator[str, None, str]:
        yield "Bees\x1b[2J dance"
        yield "\x07.\n"
        return "stop"

    stream = TextStream(pieces())
    assert list(stream) == ["Bees[2J dance", ".\n"]
    assert stream.text == "Bees[2J dance.\n" and stream.finish_reason == "stop"


def stored_documents(db: Path) -> dict[str, tuple[str, str]]:
    """Each stored document's (title, text) by source."""
    with Corpus.open(db, readonly=True) as corpus:
        documents = [corpus.document(source) for source in corpus.list_sources()]
        return {d.source: (d.title, corpus.document_text(d.id)) for d in documents if d}


def test_a_question_needs_a_letter_or_digit_in_any_script() -> None:
    assert asked_question("  wal? ") == "wal?"
    assert asked_question("¿Qué es 42?") == "¿Qué es 42?"
    assert asked_question("蜜蜂") == "蜜蜂"
    for blank in ("", " \t\n"):
        with pytest.raises(QuestionError, match="the question is empty"):
            asked_question(blank)
    for wordless in ("\x00", '"""', "?!", "\ud800", "🐝"):
        with pytest.raises(QuestionError, match="no words"):
            asked_question(wordless)


@pytest.mark.parametrize("question", ["\x01", '"""'])
def test_a_question_without_words_is_a_usage_error_everywhere(bees_db: Path, question: str) -> None:
    result = invoke("query", question, "--db", str(bees_db))
    assert result.exit_code == 2 and "the question has no words" in result.stderr
    with (
        Engine.open(bees_db, Settings.load(), readonly=True) as engine,
        pytest.raises(QuestionError),
    ):
        engine.query(question)


@pytest.fixture(scope="module")
def bees_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("bees")
    (folder / "bees.txt").write_text(BEES)
    code, _ = ingest_json(folder / "c.db", folder / "bees.txt")
    assert code == 0
    return folder / "c.db"


@pytest.mark.parametrize("question", ["wal \ud800", "wal \udcff", "bees \ud83d\ude00 dance"])
def test_questions_that_are_not_valid_unicode_are_repaired(bees_db: Path, question: str) -> None:
    """A lone surrogate from JSON (`\\ud800`) or a non-UTF-8 argv byte (`\\udcff`)."""
    result = invoke("query", question, "--db", str(bees_db), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["question"] == repair(question)


def test_file_contents_with_escaped_surrogates_are_repaired(tmp_path: Path) -> None:
    corpus_file = tmp_path / "corpus.jsonl"
    corpus_file.write_text('{"_id": "d\\udc80", "title": "T\\ud800", "text": "bees \\ud800"}\n')
    code, report = ingest_json(tmp_path / "c.db", corpus_file)
    assert code == 0 and report["added"] == 1, report
    assert stored_sources(tmp_path / "c.db") == ["beir:d\ufffd"]


@pytest.mark.parametrize(
    ("metadata", "reason"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ("NaN", "NaN is not a finite number"),
        ("-Infinity", "-Infinity is not a finite number"),
        ("1e400", "1e400 is not a finite number"),
    ],
    ids=["nested-100k", "nan", "-infinity", "1e400"],
)
def test_a_beir_line_json_cannot_hold_is_that_lines_error(
    tmp_path: Path, metadata: str, reason: str
) -> None:
    """JSON's parser recurses once per nested array, and Python's reads NaN, Infinity and
    1e400 as floats JSON has no words for (kept as metadata, they failed the corpus's JSON
    check when written): each is that line's error, not a traceback that stops the run."""
    corpus_file = tmp_path / "corpus.jsonl"
    corpus_file.write_text(
        '{"_id": "1", "text": "Bees dance."}\n'
        f'{{"_id": "2", "text": "Odd.", "metadata": {{"x": {metadata}}}}}\n'
        '{"_id": "3", "text": "Ants march."}\n'
    )
    code, report = ingest_json(tmp_path / "c.db", corpus_file)
    assert code == 0 and report["added"] == 2, report
    assert reasons(report) == {"corpus.jsonl:2": f"invalid JSON line ({reason})"}
    assert stored_sources(tmp_path / "c.db") == ["beir:1", "beir:3"]


def test_a_beir_id_is_a_name_like_a_files(tmp_path: Path) -> None:
    """A record's `_id` becomes its source, stored and shown like a file name: one holding a
    line break or an escape is refused as such a file name is, and `true` is no id."""
    corpus_file = tmp_path / "corpus.jsonl"
    corpus_file.write_text(
        '{"_id": "1", "text": "Bees dance."}\n'
        '{"_id": "j\\n\\u001b[2Jx", "text": "Escapes."}\n'
        '{"_id": true, "text": "A flag."}\n'
        '{"_id": 7, "text": "Ants march."}\n'
    )
    code, report = ingest_json(tmp_path / "c.db", corpus_file)
    assert code == 0 and report["added"] == 2, report
    assert reasons(report) == {
        "corpus.jsonl:2": "_id 'j\\n\\x1b[2Jx' holds control characters",
        "corpus.jsonl:3": "missing or empty _id (a string or an integer)",
    }
    assert stored_sources(tmp_path / "c.db") == ["beir:1", "beir:7"]


def test_the_ingest_report_prints_names_as_they_are(tmp_path: Path) -> None:
    """A name is shown verbatim, never read as terminal markup: `[/x]` in a path would end
    the run in a traceback, and the `:a:` of `beir:a: reason` would be an emoji."""
    corpus_file = tmp_path / "corpus.jsonl"
    corpus_file.write_text('{"_id": "a", "text": "Bees."}\n{"_id": "a", "text": "Ants."}\n')
    gone = tmp_path / "gone[/x].txt"
    result = invoke("ingest", "--db", str(tmp_path / "c.db"), str(corpus_file), str(gone))
    assert result.exit_code == 0
    assert f"failed {gone}: no such file or directory" in result.stderr
    assert f"failed beir:a: duplicate _id in {corpus_file}" in result.stderr


# -- 4. data loss on --prune -----------------------------------------------------------------


def test_prune_never_deletes_under_a_missing_input(tmp_path: Path) -> None:
    share = tmp_path / "share"
    share.mkdir()
    for name in ("one.txt", "two.txt"):
        (share / name).write_text(f"{BEES} ({name})")
    db = tmp_path / "c.db"
    assert ingest_json(db, share)[0] == 0
    share.rename(tmp_path / "unmounted")
    code, report = ingest_json(db, share, share / "one.txt", "--prune")
    assert code == 1 and report["pruned"] == 0
    assert len(stored_sources(db)) == 2


def test_prune_of_beir_files_keeps_the_documents_of_a_missing_file(tmp_path: Path) -> None:
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text('{"_id": "1", "text": "Bees dance."}\n')
    second.write_text('{"_id": "2", "text": "Ants march."}\n')
    db = tmp_path / "c.db"
    assert ingest_json(db, first, second)[0] == 0
    second.unlink()
    code, report = ingest_json(db, first, second, "--prune")
    assert code == 0 and report["pruned"] == 0 and report["errors"]
    assert stored_sources(db) == ["beir:1", "beir:2"]


# -- 5. ingest-root escape -------------------------------------------------------------------


def ingest_confined(
    db: Path, embedder: OnnxEmbedder, files: Sequence[Path], root: Path
) -> tuple[IngestReport, list[str]]:
    """Ingest `files` confined to `root` into a new corpus; the report and the stored texts."""
    with Corpus.create(db, embedder.model_id, embedder.dim) as corpus:
        report = ingest(
            corpus,
            embedder,
            embedder.tokenizer,
            list(files),
            settings=Settings.load().ingest,
            roots=(root.resolve(),),
        )
        documents = [corpus.document(source) for source in corpus.list_sources()]
        texts = [corpus.document_text(d.id) for d in documents if d is not None]
    return report, texts


def test_file_swapped_for_a_link_after_the_check_is_not_read(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text("The launch code is 0000.")
    (root / "docs" / "note.md").write_text("A harmless note.")
    (root / "docs" / "kept.md").write_text(BEES)
    checked = expand_confined(["docs"], (root.resolve(),))
    (root / "docs" / "note.md").unlink()
    (root / "docs" / "note.md").symlink_to(outside / "secret.md")
    report, texts = ingest_confined(tmp_path / "c.db", embedder, checked.files, root)
    assert report.added == 1 and "link" in dict(report.errors)[str(checked.files[1])]
    assert not any("launch code" in text for text in texts)


def test_folder_swapped_for_a_link_after_the_check_is_not_read(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    (root / "docs").mkdir(parents=True)
    outside.mkdir()
    (outside / "note.md").write_text("The launch code is 0000.")
    (root / "docs" / "note.md").write_text("A harmless note.")
    checked = expand_confined(["docs"], (root.resolve(),))
    (root / "docs").rename(root / "old")
    (root / "docs").symlink_to(outside, target_is_directory=True)
    report, texts = ingest_confined(tmp_path / "c.db", embedder, checked.files, root)
    assert texts == [] and report.added == 0 and len(report.errors) == 1


# -- 10. size limits -------------------------------------------------------------------------


def test_a_document_over_the_size_cap_is_refused_per_file(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "small.txt").write_text(BEES)
    (docs / "huge.txt").write_text("word " * 5000)
    (docs / "lines.jsonl").write_text(
        json.dumps({"_id": "big", "text": "word " * 5000}) + "\n" + '{"_id": "ok", "text": "x"}\n'
    )
    env = {"CRAG_EDGE_MAX_DOCUMENT_BYTES": "10000"}
    code, report = ingest_json(tmp_path / "c.db", docs / "small.txt", docs / "huge.txt", env=env)
    assert code == 0 and report["added"] == 1
    assert "max_document_bytes" in reasons(report)["huge.txt"]
    code, report = ingest_json(tmp_path / "d.db", docs / "lines.jsonl", env=env)
    assert code == 0 and report["added"] == 1
    assert "max_document_bytes" in reasons(report)["lines.jsonl:1"]


def test_an_empty_file_is_reported_as_empty(tmp_path: Path) -> None:
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.md").write_text("  \n\n ")
    code, report = ingest_json(tmp_path / "c.db", tmp_path / "empty.txt", tmp_path / "blank.md")
    assert code == 0
    warnings = {Path(s).name: r for s, r in report["warnings"]}
    assert warnings == {"empty.txt": "empty file", "blank.md": "no text to index"}


def test_progress_is_reported_within_a_large_file(tmp_path: Path, embedder: OnnxEmbedder) -> None:
    big = tmp_path / "big.txt"
    big.write_text(" ".join(f"Sentence number {i} about bees." for i in range(600)))
    events: list[ProgressEvent] = []
    with Corpus.create(tmp_path / "c.db", embedder.model_id, embedder.dim) as corpus:
        ingest(
            corpus,
            embedder,
            embedder.tokenizer,
            [big],
            settings=Settings.load().ingest,
            progress=events.append,
            group_chunks=8,
        )
    within = [e for e in events if e.stage == "chunks"]
    assert len(within) >= 3 and all(e.source == str(big.resolve()) for e in within)
    assert [e.done for e in within] == sorted({e.done for e in within})
    assert within[-1].done == within[-1].total


def test_http_questions_with_lone_surrogates_are_answered(
    bees_db: Path, embedder: OnnxEmbedder
) -> None:
    from crag_edge.server import ServerConfig
    from tests.test_server import factory_for, running

    body = '{"question": "wal \\ud800 bees"}'
    headers = {"Content-Type": "application/json"}
    with (
        running(ServerConfig(db=bees_db), factory_for(bees_db, embedder)) as server,
        server.client() as client,
    ):
        query = client.post("/v1/query", content=body, headers=headers)
        answer = client.post("/v1/answer", content=body, headers=headers)
    assert query.status_code == 200, query.text
    assert query.json()["question"] == "wal \ufffd bees"
    assert answer.status_code == 200, answer.text


# -- files given to commands ------------------------------------------------------------------


def judged(folder: Path, qrels_text: str) -> tuple[Path, Path]:
    (folder / "q.jsonl").write_text('{"_id": "1", "text": "bees dance"}\n', encoding="utf-8")
    (folder / "qrels.tsv").write_text(qrels_text, encoding="utf-8")
    return folder / "q.jsonl", folder / "qrels.tsv"


def test_an_output_file_never_overwrites_a_corpus(bees_db: Path, tmp_path: Path) -> None:
    queries, qrels = judged(tmp_path, "query-id\tcorpus-id\tscore\n1\tbees\t1\n")
    before = bees_db.read_bytes()
    retrieval = ("eval", "pairs", "--from", "retrieval", "--db", str(bees_db))
    labelled = ("--queries", str(queries), "--qrels", str(qrels))
    onto_corpus = invoke(*retrieval, *labelled, "--out", str(bees_db))
    assert onto_corpus.exit_code == 2 and "SQLite" in onto_corpus.stderr
    assert bees_db.read_bytes() == before
    for out in (tmp_path, tmp_path / "missing" / "pairs.jsonl"):
        assert invoke(*retrieval, *labelled, "--out", str(out)).exit_code == 2


def test_unreadable_data_files_and_settings_files_are_one_line(
    bees_db: Path, tmp_path: Path
) -> None:
    queries, qrels = judged(tmp_path, "\ufeffquery-id\tcorpus-id\tscore\n1\tbees\t1\n")
    evaluate = ("eval", "retrieval", "--db", str(bees_db), "--qrels", str(qrels))
    assert invoke(*evaluate, "--queries", str(queries)).exit_code == 0  # a BOM is no data
    folder = invoke(*evaluate, "--queries", str(tmp_path))
    assert folder.exit_code == 1 and folder.stderr.strip() == f"error: {tmp_path}: Is a directory"
    unjudged = judged(tmp_path, "query-id\tcorpus-id\tscore\n7\tbees\t1\n")[1]
    none = invoke(
        "eval",
        "retrieval",
        "--db",
        str(bees_db),
        "--queries",
        str(queries),
        "--qrels",
        str(unjudged),
    )
    assert none.exit_code == 1 and "has a judgement" in none.stderr
    synonyms = invoke(
        "query", "--db", str(bees_db), "bees", env={"CRAG_EDGE_SYNONYMS_FILE": str(tmp_path)}
    )
    assert synonyms.exit_code == 2 and "synonyms file" in synonyms.stderr
    assert invoke("eval", "grading", "--pairs", str(queries), "--limit", "0").exit_code == 2


@pytest.mark.parametrize("location", ["", "  ", "http://host/corpus.db"])
def test_a_db_that_names_no_file_or_database_is_a_usage_error(location: str) -> None:
    result = invoke("stats", "--db", location)
    assert result.exit_code == 2 and "postgresql://" in result.stderr
