"""Storage faults on real files, in real child processes: a full disk (a file-size limit), a
read-only corpus, a creation cut short, two creators or upgraders at once, another writer
holding the lock, a file replaced while open, and damaged pages. Each is one clear line and
exit 1, and no committed document is ever lost."""

from __future__ import annotations

import multiprocessing
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import pytest
import sqlite_vec

from crag_edge.groups import CorpusView
from crag_edge.store import SCHEMA_VERSION, Corpus, CorpusReplacedError, CorruptCorpusError
from crag_edge.store.jobs import JobRecord
from crag_edge.store.sqlite.schema import JOBS_VERSION

EVERYTHING = CorpusView.everything()  # the owner's view: every document

FAST = {
    "CRAG_EDGE_GRADING_TIERS": '["signals"]',
    "CRAG_EDGE_REWRITE_WITH_LLM": "false",
}
WORDS = ["alpha", "beta", "gamma", "delta", "bees", "honey", "sqlite", "wal", "page", "index"]


def crag_edge(
    *args: str, preexec: Callable[[], None] | None = None, prefix: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """The real command line in a child process (limits and privileges apply to it alone)."""
    return subprocess.run(
        [*prefix, sys.executable, "-m", "crag_edge.cli", *args],
        capture_output=True,
        text=True,
        env=os.environ | FAST,
        preexec_fn=preexec,
        timeout=600,
    )


def assert_one_line_error(result: subprocess.CompletedProcess[str], *words: str) -> None:
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert all(word in lines[0] for word in words), lines[0]


def file_size_limit(limit: int) -> Callable[[], None]:
    """A full disk for one process: writes past `limit` bytes fail (EFBIG), as ENOSPC would."""

    def apply() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return apply


def write_docs(folder: Path, count: int, words: int = 3000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        text = " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(words))
        (folder / f"doc{i}.txt").write_text(f"Document {i}. {text}")
    return folder


@pytest.fixture(scope="module")
def small_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("small")
    result = crag_edge("ingest", "--db", str(folder / "c.db"), str(write_docs(folder / "d", 2)))
    assert result.returncode == 0, result.stderr
    return folder / "c.db"


def documents(db: Path) -> int:
    with Corpus.open(db, readonly=True) as corpus:
        return corpus.stats(view=EVERYTHING).documents


# -- disk full -------------------------------------------------------------------------------


def test_disk_full_during_ingest_is_one_line_and_loses_nothing(
    small_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "c.db"
    shutil.copy(small_db, db)
    docs = write_docs(tmp_path / "many", 60)
    limit = db.stat().st_size + 400_000
    full = crag_edge("ingest", "--db", str(db), str(docs), preexec=file_size_limit(limit))
    assert_one_line_error(full, str(db), "disk")
    assert crag_edge("check", "--db", str(db)).returncode == 0
    kept = documents(db)
    assert 2 < kept < 62
    resumed = crag_edge("ingest", "--db", str(db), str(docs), "--json")
    assert resumed.returncode == 0, resumed.stderr
    assert documents(db) == 62


def test_disk_full_while_creating_leaves_no_stub(small_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "new.db"
    docs = write_docs(tmp_path / "d", 1)
    cut = crag_edge("ingest", "--db", str(db), str(docs), preexec=file_size_limit(20_000))
    assert_one_line_error(cut, "disk")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d"]
    again = crag_edge("ingest", "--db", str(db), str(docs))
    assert again.returncode == 0, again.stderr
    assert documents(db) == 1


def create_at_once(path: Path) -> list[BaseException]:
    """Two threads creating the same new corpus at the same moment; what either raised."""
    barrier = threading.Barrier(2)
    failures: list[BaseException] = []

    def create() -> None:
        barrier.wait()
        try:
            Corpus.open_or_create(path, "embedder", 4).close()
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=create) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return failures


def test_two_creators_of_one_new_corpus_both_succeed(tmp_path: Path) -> None:
    for attempt in range(20):
        path = tmp_path / f"race{attempt}.db"
        assert create_at_once(path) == []
        assert documents(path) == 0


def at_once(work: Callable[..., None], *arguments: tuple[Any, ...]) -> list[str]:
    """`work(*args, barrier, failures)` in a process of its own for each `args`, all starting
    at the same moment; what they put in `failures`."""
    processes = multiprocessing.get_context("spawn")
    barrier, failures = processes.Barrier(len(arguments)), processes.Queue()
    running = [processes.Process(target=work, args=(*a, barrier, failures)) for a in arguments]
    for process in running:
        process.start()
    for process in running:
        process.join(timeout=120)
    assert [process.exitcode for process in running] == [0] * len(running)
    found = []
    while not failures.empty():
        found.append(failures.get())
    return found


def open_at_once(path: Path, barrier: Any, failures: Any) -> None:
    """One of several processes opening `path` read-write at the same moment."""
    barrier.wait()
    try:
        Corpus.open(path).close()
    except Exception as exc:
        failures.put(repr(exc))


def test_openers_of_an_older_corpus_all_succeed_and_one_upgrades_it(tmp_path: Path) -> None:
    """Replicas (or commands) started together after an upgrade of crag-edge: the one that
    upgrades the file first holds the others back until it is done, then they find it new."""
    for attempt in range(3):
        path = tmp_path / f"old{attempt}.db"
        Corpus.create(path, "embedder", 4).close()
        older = apsw.Connection(str(path))
        older.execute("DROP TABLE reached_paths; DROP TABLE jobs")
        older.execute(f"PRAGMA user_version = {JOBS_VERSION - 1}")
        older.close()
        assert at_once(open_at_once, *[(path,)] * 4) == []
        with Corpus.open(path, readonly=True) as corpus:
            assert corpus.stats(view=EVERYTHING).schema_version == SCHEMA_VERSION


# -- read-only corpora -----------------------------------------------------------------------


def without_write_access() -> tuple[str, ...]:
    """A prefix that runs a child unable to write read-only files, even as root."""
    if os.geteuid() != 0:
        return ()
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: read-only files cannot be simulated")
    return (setpriv, "--bounding-set=-dac_override,-dac_read_search,-fowner")


@pytest.mark.parametrize("read_only", ["file", "folder"])
def test_read_only_corpus_opens_read_only_for_reading(
    small_db: Path, tmp_path: Path, read_only: str
) -> None:
    folder = tmp_path / "share"
    folder.mkdir()
    db = folder / "c.db"
    shutil.copy(small_db, db)
    db.chmod(0o444)
    if read_only == "folder":
        folder.chmod(0o555)
    prefix = without_write_access()
    try:
        stats = crag_edge("stats", "--db", str(db), "--json", prefix=prefix)
        query = crag_edge("query", "bees", "--db", str(db), "--json", prefix=prefix)
        check = crag_edge("check", "--db", str(db), prefix=prefix)
        write = crag_edge("ingest", "--db", str(db), str(tmp_path), prefix=prefix)
    finally:
        folder.chmod(0o755)
    assert stats.returncode == 0 and '"documents": 2' in stats.stdout, stats.stderr
    assert query.returncode == 0 and '"hits"' in query.stdout, query.stderr
    assert check.returncode == 0, check.stderr
    assert_one_line_error(write, str(db), "read-only")
    assert not stat.S_IMODE(db.stat().st_mode) & 0o222


# -- another writer --------------------------------------------------------------------------


@pytest.mark.parametrize("documents_are", ["unchanged", "new"])
def test_a_write_lock_held_by_another_process_is_one_line(
    small_db: Path, tmp_path: Path, documents_are: str
) -> None:
    """An ingest waits for the lock only so long (an open `sqlite3` session holds it here);
    whether it then meets the lock in a document's write or in its last bookkeeping, it says
    so in one line, exit 1, and what was stored stays as it was."""
    db = tmp_path / "c.db"
    shutil.copy(small_db, db)
    docs = small_db.parent / "d" if documents_are == "unchanged" else write_docs(tmp_path / "d", 1)
    holder = apsw.Connection(str(db))
    holder.execute("BEGIN IMMEDIATE; UPDATE meta SET value = value")
    try:
        locked = crag_edge("ingest", "--db", str(db), str(docs))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert_one_line_error(locked, str(db), "locked")
    assert documents(db) == 2
    assert crag_edge("ingest", "--db", str(db), str(docs)).returncode == 0


def write_over_and_over(path: Path, what: str, barrier: Any, failures: Any) -> None:
    """One of several processes writing `path` over and over: retagging its first document
    (a read, then a write), adding a job and failing the stale ones (a read, then a write,
    as a service replica does), or noting a meta value (a write alone)."""
    with Corpus.open(path) as corpus:
        source, jobs = corpus.list_sources()[0], corpus.jobs()
        barrier.wait()
        for round_ in range(1500):
            try:
                if what == "retag":
                    corpus.set_groups(source, frozenset({f"group{round_ % 3}"}))
                elif what == "stale":
                    jobs.add(JobRecord(f"{os.getpid()}-{round_}", ["/docs"], "replica"))
                    jobs.fail_stale(-1.0, "its replica stopped")
                else:
                    corpus.set_meta({"note": str(round_)})
            except Exception as exc:
                failures.put(repr(exc))
                return


@pytest.mark.parametrize("reader", ["retag", "stale"])
def test_a_write_that_reads_first_waits_its_turn_beside_other_writers(
    small_db: Path, tmp_path: Path, reader: str
) -> None:
    """A retag (`ingest --groups` of an unchanged document) or a replica failing stale jobs
    reads before it writes; beside other writers it waits for the lock like any write,
    never failing at once because one of them committed in between."""
    db = tmp_path / "c.db"
    shutil.copy(small_db, db)
    assert at_once(write_over_and_over, (db, reader), (db, "note"), (db, reader)) == []


# -- a file replaced while open -------------------------------------------------------------


def test_a_corpus_replaced_while_open_writes_nothing_more_and_says_so(
    small_db: Path, tmp_path: Path
) -> None:
    """`mv new.db c.db` while a service has c.db open: SQLite finds the WAL by name, so what
    the old connection committed from then on would be read as part of the new file. Its
    commits are refused (a best-effort cache write is skipped) and readiness says why; the
    new file holds none of them. (What it committed before the move and had not merged yet
    SQLite leaves in that WAL: stop the service before replacing its file.)"""
    db, replacement = tmp_path / "c.db", tmp_path / "new.db"
    shutil.copy(small_db, db)
    shutil.copy(small_db, replacement)
    with Corpus.open(db) as corpus:
        corpus.set_meta({"note": "before"})
        os.replace(replacement, db)
        with pytest.raises(CorpusReplacedError, match="replaced"):
            corpus.set_meta({"note": "after"})
        with pytest.raises(CorpusReplacedError, match="restart"):
            corpus.ping(1.0)
        assert not corpus.score_cache().put("scorer", "query", {corpus.chunk_ids()[0]: 0.5})
    assert crag_edge("check", "--db", str(db)).returncode == 0
    with Corpus.open(db, readonly=True) as reopened:
        assert reopened.meta()["note"] != "after"
        assert reopened.score_cache().count() == 0


# -- damaged pages ---------------------------------------------------------------------------


def damage(db: Path) -> None:
    """Overwrite the start of every fifth page after the schema with noise: there sit the
    b-tree page headers (or overflow-chain pointers), which `quick_check` reads whatever
    tables the schema holds, so the damage is structural and not only inside row data."""
    size = db.stat().st_size
    noise = bytes(range(256)) * 2
    with db.open("r+b") as fh:
        for page in range(5, size // 4096, 5):
            fh.seek(page * 4096)
            fh.write(noise)


def test_damaged_pages_are_found_and_reported(small_db: Path, tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    shutil.copy(small_db, db)
    healthy = crag_edge("check", "--db", str(db))
    assert healthy.returncode == 0 and "ok" in healthy.stdout, healthy.stderr
    damage(db)
    before = db.read_bytes()
    assert_one_line_error(crag_edge("check", "--db", str(db)), str(db), "damaged")
    assert_one_line_error(crag_edge("query", "bees", "--db", str(db)), str(db), "damaged")
    assert_one_line_error(
        crag_edge("ingest", "--db", str(db), str(write_docs(tmp_path / "d", 1))), "damaged"
    )
    assert db.read_bytes() == before
    with pytest.raises(CorruptCorpusError, match="damaged"), Corpus.open(db) as corpus:
        corpus.check()


@pytest.mark.parametrize(
    ("index", "what"),
    [
        ("DELETE FROM chunks_fts WHERE rowid = (SELECT min(id) FROM chunks)", "full-text rows"),
        ("DELETE FROM chunk_bits WHERE chunk_id = (SELECT min(id) FROM chunks)", "sign-bit rows"),
        ("DELETE FROM chunks_vec WHERE rowid = (SELECT min(id) FROM chunks)", "vectors"),
    ],
)
def test_a_chunk_missing_from_an_index_is_found(
    small_db: Path, tmp_path: Path, index: str, what: str
) -> None:
    """A lost index row hides its chunk from one retriever and raises nothing: `check`
    counts every index against the chunks."""
    db = tmp_path / "c.db"
    shutil.copy(small_db, db)
    conn = apsw.Connection(str(db))
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.execute(index)
    conn.close()
    assert_one_line_error(crag_edge("check", "--db", str(db)), str(db), what)
