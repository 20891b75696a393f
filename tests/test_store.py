"""Corpus store on real SQLite files: schema, safety when opening, atomic writes, search."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import apsw
import numpy as np
import pytest

from crag_edge.groups import CorpusView
from crag_edge.store import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    ChunkRecord,
    Corpus,
    CorpusError,
    CorpusExistsError,
    CorpusNotFoundError,
    CorruptCorpusError,
    DocumentRecord,
    EmbedderMismatchError,
    NotACorpusError,
    ReadOnlyCorpusError,
    SchemaTooNewError,
    connect,
)
from crag_edge.store.sqlite.schema import MIGRATIONS, migrate, user_version
from crag_edge.types import EncodedPassage, Place

EVERYTHING = CorpusView.everything()  # the owner's view: every document

DIM = 4


def unit(*values: float) -> np.ndarray:
    vector = np.array(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def make_doc(source: str, sentences: list[str], title: str = "") -> tuple[DocumentRecord, list]:
    """A document whose chunks are its sentences, joined by single spaces."""
    text = " ".join(sentences)
    chunks, offset = [], 0
    for sentence in sentences:
        chunks.append(ChunkRecord(sentence, offset, offset + len(sentence), len(sentence.split())))
        offset += len(sentence) + 1
    return DocumentRecord(source, title, text, f"hash-{text}"), chunks


def snapshot(path: Path) -> tuple[bytes, int, list[str]]:
    """File bytes, mtime and the names beside it: opening a foreign file must change none."""
    return path.read_bytes(), path.stat().st_mtime_ns, sorted(os.listdir(path.parent))


def index_counts(path: Path) -> tuple[int, int, int]:
    """Rows in chunks, in the FTS index and in the vector index, read by a second connection."""
    conn = connect(path, readonly=True)
    try:
        return tuple(  # type: ignore[return-value]
            conn.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            for table in ("chunks", "chunks_fts", "chunks_vec")
        )
    finally:
        conn.close()


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "corpus.db"


@pytest.fixture
def corpus(db: Path) -> Iterator[Corpus]:
    with Corpus.create(db, "test-embedder", DIM) as created:
        yield created


def add_two_docs(corpus: Corpus) -> None:
    doc, chunks = make_doc("a.txt", ["The cat sat on the mat.", "Dogs chase cats."], "Pets")
    corpus.replace_document(doc, chunks, np.stack([unit(1, 0, 0, 0), unit(1, 1, 0, 0)]))
    doc, chunks = make_doc("b.txt", ["Quantum computers use qubits."], "Physics")
    corpus.replace_document(doc, chunks, np.stack([unit(0, 0, 1, 0)]))


# -- schema --------------------------------------------------------------------------------


def test_create_writes_schema_version_application_id_and_meta(db: Path) -> None:
    with Corpus.create(db, "test-embedder", DIM) as corpus:
        stats = corpus.stats(view=EVERYTHING)
        assert (stats.documents, stats.chunks, stats.schema_version) == (0, 0, SCHEMA_VERSION)
        assert (stats.embedder_id, stats.dim, stats.last_ingest_at) == ("test-embedder", DIM, None)
    conn = connect(db, readonly=True)
    try:
        assert conn.execute("PRAGMA application_id").fetchall()[0][0] == APPLICATION_ID
        assert user_version(conn) == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    finally:
        conn.close()


def test_reopen_keeps_documents_and_meta(corpus: Corpus, db: Path) -> None:
    add_two_docs(corpus)
    corpus.set_meta({"chunk_tokens": "200", "last_ingest_at": "1700000000.5"})
    corpus.close()
    with Corpus.open(db) as reopened:
        stats = reopened.stats(view=EVERYTHING)
        assert (stats.documents, stats.chunks) == (2, 3)
        assert (stats.chunk_tokens, stats.last_ingest_at) == (200, 1700000000.5)
        assert reopened.list_sources() == ["a.txt", "b.txt"]


def test_migrations_apply_in_order_and_atomically(corpus: Corpus, db: Path) -> None:
    corpus.close()
    nxt = SCHEMA_VERSION + 1
    added = (nxt, "ALTER TABLE documents ADD COLUMN lang TEXT")
    broken = (nxt + 1, "CREATE TABLE extra (x); INSERT INTO no_such_table VALUES (1)")
    conn = connect(db)
    try:
        assert migrate(conn, DIM, (*MIGRATIONS, added)) == nxt
        assert user_version(conn) == nxt
        columns = [row[1] for row in conn.execute("PRAGMA table_info(documents)").fetchall()]
        assert "lang" in columns
        with pytest.raises(apsw.SQLError):
            migrate(conn, DIM, (*MIGRATIONS, added, broken))
        assert user_version(conn) == nxt
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_schema").fetchall()}
        assert "extra" not in tables
        with pytest.raises(ValueError, match="increasing"):
            migrate(conn, DIM, (added, *MIGRATIONS))
    finally:
        conn.close()
    before = snapshot(db)
    with pytest.raises(SchemaTooNewError, match=f"schema version {nxt} is newer"):
        Corpus.open(db)
    assert snapshot(db) == before


def test_schema_too_new_is_refused_without_touching_the_file(corpus: Corpus, db: Path) -> None:
    corpus.close()
    conn = connect(db)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = snapshot(db)
    for readonly in (False, True):
        with pytest.raises(SchemaTooNewError, match=str(db)):
            Corpus.open(db, readonly=readonly)
    assert snapshot(db) == before


def version_1_with_two_docs(corpus: Corpus, db: Path) -> None:
    """Two documents in a file as crag-edge wrote it before the evaluation cache (v1)."""
    add_two_docs(corpus)
    corpus.close()
    conn = connect(db)
    with conn:
        conn.execute("DROP TABLE reached_paths")
        conn.execute("DROP TABLE jobs")
        conn.execute("DROP TABLE chunk_bits")
        conn.execute("DROP TABLE document_groups")
        conn.execute("ALTER TABLE chunks DROP COLUMN places")
        conn.execute("DROP TABLE passage_vectors")
        conn.execute("DROP TABLE score_cache")
        conn.execute("PRAGMA user_version = 1")
    conn.close()


def test_a_version_1_corpus_gains_the_score_cache_and_keeps_its_documents(
    corpus: Corpus, db: Path
) -> None:
    version_1_with_two_docs(corpus, db)
    with Corpus.open(db) as upgraded:
        stats = upgraded.stats(view=EVERYTHING)
        assert (stats.documents, stats.chunks, stats.schema_version) == (2, 3, SCHEMA_VERSION)
        assert stats.cached_scores == 0
        chunk_id = upgraded.chunk_ids()[0]
        assert upgraded.score_cache().put("tier:v", "q", {chunk_id: 0.25})
        assert upgraded.score_cache().get("tier:v", "q", [chunk_id]) == {chunk_id: 0.25}
        reading = EncodedPassage(unit(1.0, 2.0), truncated=True)
        assert upgraded.passage_vectors().put("tier:v", {chunk_id: reading})
        stored = upgraded.passage_vectors().get("tier:v", [chunk_id])[chunk_id]
        assert stored.truncated and np.array_equal(stored.vector, reading.vector)


def test_readonly_reads_a_version_1_corpus_as_is_without_the_cache(
    corpus: Corpus, db: Path
) -> None:
    version_1_with_two_docs(corpus, db)
    before = snapshot(db)[:2]  # bytes and mtime (a WAL reader may add -shm beside it)
    with Corpus.open(db, readonly=True) as old:
        stats = old.stats(view=EVERYTHING)
        assert (stats.documents, stats.chunks, stats.schema_version) == (2, 3, 1)
        cache = old.score_cache()
        chunk_id = old.chunk_ids()[0]
        assert cache.get("t:v", "q", [chunk_id]) == {} and len(cache) == 0
        assert not cache.put("t:v", "q", {chunk_id: 0.5}) and cache.clear() == 0
        passages = old.passage_vectors()
        assert passages.get("t:v", [chunk_id]) == {} and passages.missing("t:v") == []
        assert not passages.put("t:v", {chunk_id: EncodedPassage(unit(1.0))})
        assert passages.drop_others("t:v") == 0 and len(passages) == 0
    assert snapshot(db)[:2] == before


def test_a_version_3_corpus_gains_places_and_its_old_chunks_cite_none(
    corpus: Corpus, db: Path
) -> None:
    add_two_docs(corpus)
    corpus.close()
    conn = connect(db)
    with conn:  # the file as crag-edge wrote it before chunks had places
        conn.execute("DROP TABLE reached_paths")
        conn.execute("DROP TABLE jobs")
        conn.execute("DROP TABLE chunk_bits")
        conn.execute("DROP TABLE document_groups")
        conn.execute("ALTER TABLE chunks DROP COLUMN places")
        conn.execute("PRAGMA user_version = 3")
    conn.close()
    before = snapshot(db)[:2]
    with Corpus.open(db, readonly=True) as old:
        chunks = old.get_chunks(old.chunk_ids()).values()
        assert [(c.places, c.pages, c.section) for c in chunks] == [((), None, None)] * 3
        assert old.stats(view=EVERYTHING).schema_version == 3
    assert snapshot(db)[:2] == before
    with Corpus.open(db) as upgraded:
        assert upgraded.stats(view=EVERYTHING).schema_version == SCHEMA_VERSION
        chunks = upgraded.get_chunks(upgraded.chunk_ids()).values()
        assert [(c.places, c.pages, c.section) for c in chunks] == [((), None, None)] * 3
        assert upgraded.search_terms(["cat"], 5, view=EVERYTHING)
        doc = DocumentRecord("c.pdf", "", "One.\n\nTwo.", "hash-c")
        places = (Place(0, 1, "One"), Place(6, 2, "One \u203a Two"))
        chunk = ChunkRecord(doc.text, 0, len(doc.text), 2, places=places)
        upgraded.replace_document(doc, [chunk], np.stack([unit(1, 0, 0, 0)]))
        chunk_id = upgraded.chunk_ids()[-1]
        located = upgraded.get_chunks([chunk_id])[chunk_id]
        assert (located.places, located.pages, located.section) == (places, (1, 2), "One")


def test_readonly_open_does_not_upgrade_an_old_schema(corpus: Corpus, db: Path) -> None:
    corpus.close()
    conn = connect(db)
    conn.execute("PRAGMA user_version = 0")
    conn.close()
    before = snapshot(db)
    with pytest.raises(CorpusError, match="open it read-write once"):
        Corpus.open(db, readonly=True)
    assert snapshot(db) == before


# -- opening files that are not (healthy) corpora -------------------------------------------


@pytest.mark.parametrize("journal_mode", ["delete", "wal"])
@pytest.mark.parametrize("readonly", [False, True])
def test_foreign_sqlite_database_is_not_a_corpus(
    tmp_path: Path, journal_mode: str, readonly: bool
) -> None:
    path = tmp_path / "other.sqlite"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA journal_mode = {journal_mode}")
    conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, amount REAL)")
    conn.execute("INSERT INTO invoices (amount) VALUES (9.5)")
    conn.commit()
    conn.close()
    before = snapshot(path)
    with pytest.raises(NotACorpusError, match=f"{path}.*application_id 0x0"):
        Corpus.open(path, readonly=readonly)
    with pytest.raises(NotACorpusError):
        Corpus.open_or_create(path, "test-embedder", DIM)
    assert snapshot(path) == before


def test_crag_application_id_without_meta_is_not_a_corpus(tmp_path: Path) -> None:
    path = tmp_path / "fake.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    before = snapshot(path)
    with pytest.raises(NotACorpusError, match="no meta table"):
        Corpus.open(path)
    assert snapshot(path) == before


@pytest.mark.parametrize(
    "content",
    [
        pytest.param(random.Random(0).randbytes(8192), id="random-bytes"),
        pytest.param(
            b"SQLite format 3\x00" + random.Random(1).randbytes(8176),
            id="sqlite-magic-then-garbage",
        ),
        pytest.param(b"SQLite format 3\x00\x10\x00", id="header-cut-short"),
    ],
)
def test_damaged_files_are_corrupt_and_left_alone(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.db"
    path.write_bytes(content)
    before = snapshot(path)
    with pytest.raises(CorruptCorpusError, match=str(path)):
        Corpus.open(path)
    assert snapshot(path) == before


def test_truncated_corpus_is_corrupt_and_left_alone(corpus: Corpus, db: Path) -> None:
    add_two_docs(corpus)
    corpus.close()
    data = db.read_bytes()
    db.write_bytes(data[: len(data) // 2])
    before = snapshot(db)
    with pytest.raises(CorruptCorpusError, match="truncated"):
        Corpus.open(db)
    assert snapshot(db) == before


def test_empty_file_is_not_a_corpus_but_can_be_created_into(tmp_path: Path) -> None:
    path = tmp_path / "empty.db"
    path.touch()
    with pytest.raises(NotACorpusError, match="empty file"):
        Corpus.open(path)
    with Corpus.open_or_create(path, "test-embedder", DIM) as corpus:
        assert corpus.dim == DIM


def test_missing_file_is_reported_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "nope.db"
    with pytest.raises(CorpusNotFoundError, match=str(path)) as info:
        Corpus.open(path)
    assert isinstance(info.value, FileNotFoundError)
    assert not path.exists()


def test_create_refuses_existing_corpus(corpus: Corpus, db: Path) -> None:
    with pytest.raises(CorpusExistsError):
        Corpus.create(db, "test-embedder", DIM)
    with pytest.raises(ValueError, match="dim"):
        Corpus.create(db.with_name("other.db"), "test-embedder", 0)


def test_embedder_mismatch(corpus: Corpus, db: Path) -> None:
    corpus.close()
    with pytest.raises(EmbedderMismatchError, match="test-embedder"):
        Corpus.open_or_create(db, "another-model", DIM)
    with pytest.raises(EmbedderMismatchError):
        Corpus.open_or_create(db, "test-embedder", DIM + 1)
    with Corpus.open_or_create(db, "test-embedder", DIM) as corpus:
        corpus.check_embedder("test-embedder", DIM)


def test_readonly_corpus_refuses_writes_but_searches(corpus: Corpus, db: Path) -> None:
    add_two_docs(corpus)
    corpus.close()
    with Corpus.open(db, readonly=True) as readonly:
        assert [cid for cid, _ in readonly.search_terms(["qubits"], 5, view=EVERYTHING)] == [3]
        with pytest.raises(ReadOnlyCorpusError):
            readonly.delete_document("a.txt")
        with pytest.raises(ReadOnlyCorpusError):
            readonly.set_meta({"x": "y"})


# -- documents and atomicity ---------------------------------------------------------------


def test_replace_document_round_trip(corpus: Corpus) -> None:
    add_two_docs(corpus)
    stored = corpus.document("a.txt")
    assert stored is not None
    assert (stored.title, stored.content_hash) == (
        "Pets",
        "hash-The cat sat on the mat. Dogs chase cats.",
    )
    text = corpus.document_text(stored.id)
    chunks = corpus.get_chunks([1, 2, 3, 999])
    assert sorted(chunks) == [1, 2, 3]
    for chunk in chunks.values():
        if chunk.source == "a.txt":
            assert text[chunk.start : chunk.end] == chunk.text
            assert chunk.title == "Pets"
    assert corpus.document("missing") is None
    with pytest.raises(KeyError):
        corpus.document_text(999)


def test_replacing_keeps_doc_id_and_drops_old_index_rows(corpus: Corpus, db: Path) -> None:
    add_two_docs(corpus)
    old_id = corpus.document("a.txt").id  # type: ignore[union-attr]
    doc, chunks = make_doc("a.txt", ["Parrots talk."], "Birds")
    assert corpus.replace_document(doc, chunks, np.stack([unit(0, 0, 0, 1)])) == old_id
    assert corpus.search_terms(["cat"], 5, view=EVERYTHING) == []
    assert [cid for cid, _ in corpus.search_terms(["parrot"], 5, view=EVERYTHING)] == [4]
    assert {cid for cid, _ in corpus.search_vec(unit(1, 0, 0, 0), 10, view=EVERYTHING)} == {3, 4}
    assert index_counts(db) == (2, 2, 2)


def test_failed_replace_leaves_previous_version_intact(corpus: Corpus, db: Path) -> None:
    add_two_docs(corpus)
    before = (corpus.document("a.txt"), corpus.get_chunks([1, 2]), index_counts(db))
    doc, chunks = make_doc("a.txt", ["New first chunk.", "New second chunk."], "New")
    # The second chunk's metadata cannot be serialised: the failure comes after the old
    # chunks were deleted and the first new chunk and its vector were inserted.
    chunks[1] = ChunkRecord(chunks[1].text, chunks[1].start, chunks[1].end, 3, {"bad": {1, 2}})
    with pytest.raises(TypeError):
        corpus.replace_document(doc, chunks, np.stack([unit(1, 0, 0, 0), unit(0, 1, 0, 0)]))
    assert (corpus.document("a.txt"), corpus.get_chunks([1, 2]), index_counts(db)) == before
    assert {cid for cid, _ in corpus.search_terms(["cat"], 5, view=EVERYTHING)} == {1, 2}
    assert corpus.search_terms(["new"], 5, view=EVERYTHING) == []


def test_failure_inside_a_group_rolls_back_the_whole_group(corpus: Corpus, db: Path) -> None:
    add_two_docs(corpus)
    before = (corpus.list_sources(), corpus.get_chunks([1, 2, 3]), index_counts(db))
    good, good_chunks = make_doc("a.txt", ["Replaced."])
    new, new_chunks = make_doc("c.txt", ["Fresh."])
    with pytest.raises(ValueError, match="shape"), corpus.transaction():
        corpus.replace_document(good, good_chunks, np.stack([unit(1, 1, 1, 1)]))
        corpus.replace_document(new, new_chunks, np.zeros((1, DIM + 1), dtype=np.float32))
    assert (corpus.list_sources(), corpus.get_chunks([1, 2, 3]), index_counts(db)) == before


KILLED_WRITER = """
import os, sys
import numpy as np
from crag_edge.store import ChunkRecord, Corpus, DocumentRecord
corpus = Corpus.create(sys.argv[1], "test-embedder", 4)
vectors = np.eye(4, dtype=np.float32)
old = DocumentRecord("a.txt", "", "alpha beta", "old")
corpus.replace_document(old, [ChunkRecord("alpha beta", 0, 10, 2)], vectors[:1])
with corpus.transaction():
    new = DocumentRecord("a.txt", "", "gamma", "new")
    corpus.replace_document(new, [ChunkRecord("gamma", 0, 5, 1)], vectors[1:2])
    os._exit(9)  # killed mid-transaction: no rollback, no close, no checkpoint
"""


@pytest.mark.parametrize("readonly_first", [True, False])
def test_killed_writer_leaves_the_last_committed_state(db: Path, readonly_first: bool) -> None:
    done = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(db)], timeout=60, check=False)
    assert done.returncode == 9
    assert Path(f"{db}-wal").exists()  # the crash left the WAL behind
    with Corpus.open(db, readonly=readonly_first) as corpus:
        assert corpus.document("a.txt").content_hash == "old"  # type: ignore[union-attr]
        assert [cid for cid, _ in corpus.search_terms(["alpha"], 5, view=EVERYTHING)] == [1]
        assert corpus.search_terms(["gamma"], 5, view=EVERYTHING) == []
        assert [cid for cid, _ in corpus.search_vec(unit(0, 1, 0, 0), 5, view=EVERYTHING)] == [1]
    assert index_counts(db) == (1, 1, 1)


def test_chunks_must_match_the_document_text(corpus: Corpus) -> None:
    doc, chunks = make_doc("a.txt", ["One.", "Two."])
    bad = [chunks[0], ChunkRecord("Six.", chunks[1].start, chunks[1].end, 1)]
    with pytest.raises(ValueError, match="does not match"):
        corpus.replace_document(doc, bad, np.stack([unit(1, 0, 0, 0)] * 2))
    assert corpus.list_sources() == []


def test_delete_document_cascades_to_both_indexes(corpus: Corpus, db: Path) -> None:
    add_two_docs(corpus)
    assert corpus.delete_document("a.txt") is True
    assert corpus.delete_document("a.txt") is False
    assert index_counts(db) == (1, 1, 1)
    assert corpus.search_terms(["cat"], 5, view=EVERYTHING) == []
    assert [cid for cid, _ in corpus.search_vec(unit(1, 0, 0, 0), 5, view=EVERYTHING)] == [3]


def test_document_without_chunks(corpus: Corpus) -> None:
    doc = DocumentRecord("blank.txt", "", "   ", "h")
    corpus.replace_document(doc, [], np.empty((0, DIM), dtype=np.float32))
    assert corpus.stats(view=EVERYTHING).documents == 1
    assert corpus.stats(view=EVERYTHING).chunks == 0


def test_set_meta_cannot_change_the_embedder(corpus: Corpus) -> None:
    with pytest.raises(ValueError, match="fixed"):
        corpus.set_meta({"embedder_id": "other"})


# -- search --------------------------------------------------------------------------------


def test_search_terms_ranks_by_bm25_with_stemming_and_titles(corpus: Corpus) -> None:
    add_two_docs(corpus)
    doc, chunks = make_doc("c.txt", ["A cat. A cat. A cat again, naïvely."], "Cats")
    corpus.replace_document(doc, chunks, np.stack([unit(0, 1, 0, 0)]))
    hits = corpus.search_terms(["cat"], 10, view=EVERYTHING)
    assert hits[0][0] == 4
    assert all(score > 0 for _, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert {cid for cid, _ in corpus.search_terms(["physics"], 10, view=EVERYTHING)} == {
        3
    }  # title column
    assert {cid for cid, _ in corpus.search_terms(["naive"], 10, view=EVERYTHING)} == {
        4
    }  # diacritics folded
    assert corpus.search_terms(["cat"], 0, view=EVERYTHING) == []


def test_search_vec_returns_cosine_similarity(corpus: Corpus) -> None:
    add_two_docs(corpus)
    hits = corpus.search_vec(unit(1, 0, 0, 0), 10, view=EVERYTHING)
    assert [cid for cid, _ in hits] == [1, 2, 3]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-6)
    assert hits[1][1] == pytest.approx(np.sqrt(0.5), abs=1e-6)
    assert hits[2][1] == pytest.approx(0.0, abs=1e-6)
    assert (
        len(corpus.search_vec(unit(1, 0, 0, 0), 100_000, view=EVERYTHING)) == 3
    )  # k capped, not an error
    with pytest.raises(ValueError, match="dimensions"):
        corpus.search_vec(np.ones(DIM + 1, dtype=np.float32), 5, view=EVERYTHING)
