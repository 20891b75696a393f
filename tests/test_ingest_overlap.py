"""Ingest with embedding overlapped (`ingest.embed_ahead`): the same corpus as embedding in
line, work really on another thread, and failures surfacing where the caller can see them.
(Its progress rate, `ingest.rate`: tests/test_corpus_commands.py.)"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from crag_edge.config import Settings
from crag_edge.ingest import IngestReport, ProgressEvent, ingest
from crag_edge.ingest.embed_ahead import EmbedAhead
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.store import Corpus, connect
from crag_edge.types import Vector

SETTINGS = Settings.load(chunk_tokens=24, chunk_overlap=6)
TEXTS = [
    "Telescopes collect light from distant galaxies and astronomers measure planetary orbits.",
    "Knead the bread dough for ten minutes, let it rise until doubled, then bake it hot.",
    "Routers forward packets between networks; TCP retransmits lost segments.",
    "Honeybees dance to tell their sisters how far away the flowers are.",
    "Photosynthesis turns light into chemical energy stored in glucose.",
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    docs = tmp_path.resolve() / "docs"
    docs.mkdir()
    for i in range(12):
        (docs / f"doc{i:02}.txt").write_text(f"Document {i}. " + " ".join(TEXTS[i % 5 :]))
    return docs


def _ingest(
    path: Path, embedder: OnnxEmbedder, folder: Path, overlap: bool, events: list[ProgressEvent]
) -> IngestReport:
    with Corpus.create(path, embedder.model_id, embedder.dim) as corpus:
        return ingest(
            corpus,
            embedder,
            embedder.tokenizer,
            [folder],
            settings=SETTINGS.ingest,
            group_chunks=4,  # many groups, so several are in flight during the run
            overlap=overlap,
            progress=events.append,
        )


def _contents(path: Path) -> list[tuple[object, ...]]:
    """Every chunk with its document, text and stored vector, in insertion order."""
    conn = connect(path, readonly=True)
    try:
        return conn.execute(
            "SELECT d.source, c.ordinal, c.text, v.embedding FROM chunks c "
            "JOIN documents d ON d.id = c.doc_id JOIN chunks_vec v ON v.rowid = c.id "
            "ORDER BY c.id"
        ).fetchall()
    finally:
        conn.close()


def test_overlapped_ingest_writes_what_inline_embedding_writes(
    tmp_path: Path, embedder: OnnxEmbedder, folder: Path
) -> None:
    overlapped_events: list[ProgressEvent] = []
    inline_events: list[ProgressEvent] = []
    overlapped = _ingest(tmp_path / "a.db", embedder, folder, True, overlapped_events)
    inline = _ingest(tmp_path / "b.db", embedder, folder, False, inline_events)
    assert overlapped.added == inline.added == 12
    assert overlapped.chunks_written == inline.chunks_written > 12
    assert _contents(tmp_path / "a.db") == _contents(tmp_path / "b.db")
    # documents finish in input order either way, each event counting the chunks embedded
    # (the `chunks` events of large documents come from the embedding thread, interleaved)
    finished = [e for e in overlapped_events if e.stage == "documents"]
    assert [e.source for e in finished] == [
        e.source for e in inline_events if e.stage == "documents"
    ]
    counts = [e.chunks for e in finished]
    assert counts == sorted(counts) and counts[-1] == overlapped.chunks_written


def test_embedding_runs_on_another_thread_one_group_ahead(embedder: OnnxEmbedder) -> None:
    threads: list[int] = []

    def embed(group: list[str]) -> Vector:
        threads.append(threading.get_ident())
        return embedder.embed(group)

    ahead: EmbedAhead[list[str]] = EmbedAhead(embed)
    try:
        assert ahead.submit(TEXTS[:2]) is None  # nothing was in flight before
        group, vectors = ahead.submit(TEXTS[2:]) or pytest.fail("the first group is lost")
        assert group == TEXTS[:2]
        np.testing.assert_array_equal(vectors, embedder.embed(TEXTS[:2]))
        last = ahead.drain()
        assert last is not None and last[0] == TEXTS[2:] and len(last[1]) == 3
        assert ahead.drain() is None
    finally:
        ahead.close()
    assert threads and threading.get_ident() not in threads

    inline: EmbedAhead[list[str]] = EmbedAhead(embed, overlap=False)
    inline.submit(TEXTS[:1])
    assert threads[-1] == threading.get_ident()


def test_an_embedding_failure_surfaces_on_the_calling_thread(embedder: OnnxEmbedder) -> None:
    def embed(group: list[str]) -> Vector:
        if "crash" in group:
            raise RuntimeError("embedder crashed")
        return embedder.embed(group)

    ahead: EmbedAhead[list[str]] = EmbedAhead(embed)
    try:
        ahead.submit(["crash"])
        with pytest.raises(RuntimeError, match="embedder crashed"):
            ahead.submit(TEXTS[:1])  # hands back the failed group: its error is raised here
        ahead.close()  # the group still in flight is dropped, never handed back
        assert ahead.drain() is None
    finally:
        ahead.close()


def test_an_interrupted_ingest_stops_a_large_file_within_one_part(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """Ctrl+C while the worker embeds one large file: the file's remaining parts are not
    embedded (the group is dropped anyway), so the wait for the worker is one part long."""
    (tmp_path / "big.txt").write_text(" ".join(TEXTS * 40))
    embedded: list[ProgressEvent] = []

    def interrupt_on_first_part(event: ProgressEvent) -> None:  # on the embedding thread
        if event.stage == "chunks":
            embedded.append(event)
            if len(embedded) == 1:
                os.kill(os.getpid(), signal.SIGINT)

    with (
        Corpus.create(tmp_path / "c.db", embedder.model_id, embedder.dim) as corpus,
        pytest.raises(KeyboardInterrupt),
    ):
        ingest(
            corpus,
            embedder,
            embedder.tokenizer,
            [tmp_path / "big.txt"],
            settings=SETTINGS.ingest,
            group_chunks=4,
            progress=interrupt_on_first_part,
        )
    total = embedded[0].total
    assert total > 40, "the file must span many parts"
    assert len(embedded) <= 2, f"{len(embedded)} parts of 4 chunks embedded after Ctrl+C"
    with Corpus.open(tmp_path / "c.db", readonly=True) as corpus:
        assert corpus.list_sources() == []  # the dropped group was never written


def test_ctrl_c_while_closing_waits_for_the_part_in_flight() -> None:
    """A second Ctrl+C during `close` must not leave the worker running: a process that
    exits with it inside onnxruntime aborts ("terminate called without an active
    exception"). The interrupt is raised once the part in flight has ended."""
    started, ended = threading.Event(), threading.Event()

    def embed_in_parts(group: list[str]) -> Vector:
        started.set()
        try:
            for _ in range(40):  # parts of 50 ms; `close` stops the group at the next one
                ahead.keep_going()
                time.sleep(0.05)
        finally:
            ended.set()
        return np.zeros((len(group), 3), dtype=np.float32)

    ahead: EmbedAhead[list[str]] = EmbedAhead(embed_in_parts)
    ahead.submit(TEXTS)
    assert started.wait(10)
    threading.Timer(0.02, os.kill, (os.getpid(), signal.SIGINT)).start()
    with pytest.raises(KeyboardInterrupt):
        ahead.close()
    assert ended.is_set(), "close returned while the worker was still embedding"
