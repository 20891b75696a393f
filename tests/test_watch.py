"""Folder watching on real folders, a real corpus and the MiniLM embedder: `ingest --watch` as
a user runs it (a process, stopped with Ctrl+C), the watcher itself (folders gone and back, an
unmounted share), and `serve --watch-root` on a live service. Each step waits, with a generous
deadline, until the corpus follows the folder."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.ingest.watch import FolderWatcher, nearest_folder, outermost
from crag_edge.store import Corpus

FAST: dict[str, Any] = {"grading_tiers": ["signals"], "rewrite_with_llm": False}
FAST_ENV = {"CRAG_EDGE_GRADING_TIERS": '["signals"]', "CRAG_EDGE_REWRITE_WITH_LLM": "false"}
DEADLINE_S = 180.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll until `condition` holds; the deadline only keeps a broken watcher from hanging."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def sources(db: Path) -> set[str]:
    if not db.exists():
        return set()
    with Corpus.open(db, readonly=True) as corpus:
        return set(corpus.list_sources())


def text_of(db: Path, path: Path) -> str:
    with Corpus.open(db, readonly=True) as corpus:
        stored = corpus.document(str(path))
        return corpus.document_text(stored.id) if stored else ""


def groups_of(db: Path, path: Path) -> frozenset[str]:
    with Corpus.open(db, readonly=True) as corpus:
        stored = corpus.document(str(path))
    assert stored is not None, path
    return stored.groups


def note(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {path.stem}\n\n{text}\n", encoding="utf-8")
    return path.resolve()


@contextmanager
def watching_process(
    db: Path, *folders: Path | str, log: Path, options: tuple[str, ...] = ()
) -> Iterator[subprocess.Popen[str]]:
    """`crag-edge ingest --watch` in its own process; its stderr goes to `log`."""
    command = [sys.executable, "-m", "crag_edge.cli", "ingest", "--watch", "--db", str(db)]
    command += options
    with log.open("w") as stderr:
        process = subprocess.Popen(
            [*command, *map(str, folders)],
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=os.environ | FAST_ENV,
        )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_ingest_watch_follows_edits_renames_and_deletions_and_stops_on_ctrl_c(
    tmp_path: Path,
) -> None:
    """One process watches two folders, one of them given with its own groups (DIR=team)."""
    notes, other, db, log = (
        tmp_path / "notes",
        tmp_path / "other",
        tmp_path / "c.db",
        tmp_path / "log",
    )
    first = note(notes, "first.md", "Bees dance to tell the hive where flowers grow.")
    note(notes, ".hidden/secret.md", "Hidden folders are never indexed.")
    other.mkdir()
    with watching_process(db, notes, f"{other}=team", log=log) as process:
        wait_for(lambda: sources(db) == {str(first)}, "the first sync")

        second = note(notes, "second.md", "Glaciers carve valleys over thousands of years.")
        wait_for(lambda: str(second) in sources(db), "a new file")

        first.write_text("# first\n\nOwls hunt at night with silent feathers.\n")
        wait_for(lambda: "Owls" in text_of(db, first), "an edit")

        renamed = (notes / "renamed.md").resolve()
        second.rename(renamed)
        wait_for(lambda: sources(db) == {str(first), str(renamed)}, "a rename")

        nested = note(notes, "deep/nested.md", "Coral reefs bleach when the sea warms.")
        first.unlink()
        wait_for(lambda: sources(db) == {str(renamed), str(nested)}, "a deletion")

        shutil.rmtree(notes)
        wait_for(lambda: f"{notes.resolve()} is gone" in log.read_text(), "the gone notice")
        elsewhere = note(other, "elsewhere.md", "Volcanoes vent gas before they erupt.")
        wait_for(lambda: str(elsewhere) in sources(db), "a sync after the folder went")
        assert sources(db) == {str(renamed), str(nested), str(elsewhere)}
        assert groups_of(db, elsewhere) == {"team"}  # `other=team`: its own default groups
        assert groups_of(db, nested) == frozenset()

        process.send_signal(signal.SIGINT)
        out, _ = process.communicate(timeout=DEADLINE_S)
    assert process.returncode == 0, log.read_text()
    summary = out.strip().splitlines()[-1]
    assert summary.startswith("stopped watching after") and "pruned 2" in summary, out
    assert "Traceback" not in log.read_text()


def test_ingest_watch_leaves_out_what_exclude_matches(tmp_path: Path) -> None:
    notes, db, log = tmp_path / "notes", tmp_path / "c.db", tmp_path / "log"
    kept = note(notes, "kept.md", "Bees dance to tell the hive where flowers grow.")
    note(notes, "kept.fr.md", "Les abeilles dansent.")
    globs = ("--exclude", "*.fr.md", "--exclude", "toc/")
    with watching_process(db, notes, log=log, options=globs) as process:
        wait_for(lambda: sources(db) == {str(kept)}, "the first sync")
        note(notes, "deep/toc/contents.md", "Every chapter of the manual.")
        note(notes, "deep/later.fr.md", "Plus tard.")
        later = note(notes, "deep/later.md", "Glaciers carve valleys over thousands of years.")
        wait_for(lambda: str(later) in sources(db), "a new file beside excluded ones")
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=DEADLINE_S)
    assert sources(db) == {str(kept), str(later)}, log.read_text()


def test_ingest_watch_refuses_what_it_cannot_watch(tmp_path: Path) -> None:
    runner = CliRunner()
    file = note(tmp_path, "a.md", "Not a folder.")
    db = str(tmp_path / "c.db")
    for args in (
        [str(file)],
        [str(tmp_path / "missing")],
        [str(tmp_path), "--json"],
        [str(tmp_path), "--format", "beir"],
    ):
        result = runner.invoke(app, ["ingest", "--watch", "--db", db, *args])
        assert result.exit_code == 2, (args, result.output)
        assert "--watch" in result.output and "Traceback" not in result.output
    assert not Path(db).exists()


class Watching:
    """A `FolderWatcher` over an engine, run on a thread; its notices are collected."""

    def __init__(self, engine: Engine, folders: list[Path]) -> None:
        self.notices: list[str] = []
        self.syncs = 0

        def sync(touched: list[Path]) -> None:
            engine.ingest(touched, prune=True)
            self.syncs += 1

        self.watcher = FolderWatcher(folders, sync, notice=self.notices.append)
        self.thread = threading.Thread(target=self.watcher.run, daemon=True)

    def noticed(self, text: str) -> bool:
        return any(text in message for message in self.notices)


@contextmanager
def watcher(db: Path, embedder: Any, *folders: Path) -> Iterator[Watching]:
    with Engine.open(db, Settings.load(**FAST), create=True, embedder=embedder) as engine:
        handle = Watching(engine, list(folders))
        handle.thread.start()
        try:
            yield handle
        finally:
            handle.watcher.stop()
            handle.thread.join(DEADLINE_S)
    assert not handle.thread.is_alive()


def test_a_folder_moved_away_keeps_its_documents_until_it_is_back(
    tmp_path: Path, embedder: Any
) -> None:
    notes, other, db = tmp_path / "notes", tmp_path / "other", tmp_path / "c.db"
    kept = note(notes, "kept.md", "Tides follow the moon.")
    dropped = note(notes, "dropped.md", "Comets have icy tails.")
    probe = note(other, "probe.md", "Maple trees turn red in autumn.")
    with watcher(db, embedder, notes, other) as handle:
        wait_for(lambda: sources(db) == {str(kept), str(dropped), str(probe)}, "the first sync")

        notes.rename(tmp_path / "away")
        wait_for(lambda: handle.noticed(f"{notes.resolve()} is gone"), "the gone notice")
        late = note(other, "late.md", "Salmon swim upstream to spawn.")
        wait_for(lambda: str(late) in sources(db), "a sync after the folder went")
        assert {str(kept), str(dropped)} <= sources(db)

        (tmp_path / "away" / "dropped.md").unlink()
        (tmp_path / "away").rename(notes)
        wait_for(lambda: str(dropped) not in sources(db), "the sync of the folder back")
        assert handle.noticed(f"{notes.resolve()} is back")
        fresh = note(notes, "fresh.md", "Lichens grow on bare rock.")
        wait_for(lambda: str(fresh) in sources(db), "a change in the folder back")
        assert sources(db) == {str(kept), str(probe), str(late), str(fresh)}


@contextmanager
def tmpfs(folder: Path) -> Iterator[None]:
    folder.mkdir(exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "tmpfs", str(folder)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip("mounting a tmpfs needs privileges this run does not have")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], capture_output=True)


@pytest.mark.parametrize("polling", ["false", "true"], ids=["notified", "polled"])
def test_an_unmounted_share_keeps_its_documents(
    tmp_path: Path, embedder: Any, polling: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Polled (network shares, WSL), the unmount reads as every file deleted; notified, as
    nothing at all. Either way the share's documents stay."""
    monkeypatch.setenv("WATCHFILES_FORCE_POLLING", polling)
    share, other, db = tmp_path / "share", tmp_path / "other", tmp_path / "c.db"
    other.mkdir()
    with tmpfs(share):
        on_share = note(share, "report.md", "Penguins huddle against the polar wind.")
        with watcher(db, embedder, share, other) as handle:
            wait_for(lambda: str(on_share) in sources(db), "the first sync")
            subprocess.run(["umount", str(share)], check=True)
            wait_for(lambda: handle.noticed(f"{share.resolve()} is gone"), "the unmount notice")
            probe = note(other, "probe.md", "Hummingbirds hover by beating fast.")
            wait_for(lambda: str(probe) in sources(db), "a sync after the unmount")
            assert str(on_share) in sources(db)


def test_touched_folders_are_listed_once_from_the_outermost() -> None:
    root = Path("/data/notes")
    folders = [root / "a" / "b", root / "a", root / "c", root / "a" / "b" / "d"]
    assert outermost(folders) == [root / "a", root / "c"]


def test_a_removed_path_is_listed_from_the_nearest_folder_still_there(tmp_path: Path) -> None:
    (tmp_path / "kept").mkdir()
    assert nearest_folder(tmp_path / "kept" / "gone" / "file.md", tmp_path) == tmp_path / "kept"
    assert nearest_folder(tmp_path / "kept", tmp_path) == tmp_path / "kept"
    assert nearest_folder(tmp_path / "gone", tmp_path) == tmp_path
    (tmp_path / "link").symlink_to(tmp_path / "kept", target_is_directory=True)
    assert nearest_folder(tmp_path / "link" / "x.md", tmp_path) == tmp_path


def test_serve_watch_root_makes_new_files_queryable(
    tmp_path: Path, embedder: Any, caplog: pytest.LogCaptureFixture
) -> None:
    pytest.importorskip("fastapi")
    from crag_edge.server import ServerConfig
    from tests.test_server import factory_for, running

    notes, db = tmp_path / "notes", tmp_path / "c.db"
    start = note(notes, "start.md", "Rivers carry silt to the sea.")
    with Engine.open(db, Settings.load(**FAST), create=True, embedder=embedder) as engine:
        engine.ingest([notes], groups=frozenset({"geo"}))
    config = ServerConfig(db=db, watch_roots=(notes.resolve(),))
    caplog.set_level(logging.INFO, logger="crag_edge.server.watch")
    with running(config, factory_for(db, embedder)) as server, server.client() as client:
        added = note(notes, "zorblat.md", "The Zorblat reactor is cooled with lemon juice.")

        def answered_from_new_file() -> bool:
            body = {"question": "What cools the Zorblat reactor?"}
            hits = client.post("/v1/query", json=body).json()["hits"]
            return any(hit["source"] == str(added) for hit in hits)

        def added_by() -> list[logging.LogRecord]:
            syncs = [r for r in caplog.records if r.getMessage() == "watch sync"]
            return [r for r in syncs if getattr(r, "added", 0) == 1]

        wait_for(answered_from_new_file, "the new file in query hits")
        # The chunks are searchable once the sync's transaction commits; its log record
        # follows when the job reports, a moment later.
        wait_for(lambda: bool(added_by()), "the watch sync's log record")
        job = client.get(f"/v1/jobs/{added_by()[0].__dict__['job']}").json()
        assert job["state"] == "succeeded" and job["paths"] == [str(notes.resolve())]
        assert job["report"]["added"] == 1
        with Corpus.open(db, readonly=True) as corpus:  # a sync keeps the groups it was given
            assert corpus.document(str(start)).groups == {"geo"}  # type: ignore[union-attr]

        added.unlink()
        wait_for(lambda: str(added) not in sources(db), "the deletion pruned")
