"""The corpus contract, on both backends (a SQLite file and PostgreSQL with pgvector): what
ingest, retrieval and grading rely on behaves the same whichever database holds the corpus."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from crag_edge.groups import CorpusView
from crag_edge.store import (
    ChunkRecord,
    CorpusBackend,
    CorpusExistsError,
    CorpusNotFoundError,
    DocumentRecord,
    EmbedderMismatchError,
    ReadOnlyCorpusError,
)
from crag_edge.store.factory import open_corpus, open_or_create_corpus
from crag_edge.store.fts_terms import TOKENIZE
from crag_edge.store.jobs import JobRecord
from crag_edge.store.postgres.schema import SCHEMA
from crag_edge.store.postgres.schema import SCHEMA_VERSION as PG_SCHEMA_VERSION
from crag_edge.store.sqlite.connection import connect
from crag_edge.store.sqlite.corpus import Corpus
from crag_edge.store.sqlite.schema import MIGRATIONS, REACHED_VERSION
from crag_edge.types import EncodedPassage, Place
from tests.test_store import DIM, add_two_docs, make_doc, unit

EVERYTHING = CorpusView.everything()  # the owner's view: every document


@pytest.fixture
def corpus(corpus_location: Path | str) -> Iterator[CorpusBackend]:
    with open_or_create_corpus(corpus_location, "test-embedder", DIM) as created:
        yield created


def test_the_location_picks_the_backend(corpus: CorpusBackend, corpus_location: Path | str) -> None:
    assert isinstance(corpus, Corpus) == isinstance(corpus_location, Path)
    with open_corpus(corpus.location) as again:
        assert (again.embedder_id, again.dim) == ("test-embedder", DIM)


def test_open_refuses_a_missing_corpus_and_create_an_existing_one(
    corpus_location: Path | str,
) -> None:
    with pytest.raises(CorpusNotFoundError):
        open_corpus(corpus_location)
    with open_or_create_corpus(corpus_location, "test-embedder", DIM):
        pass
    with pytest.raises(EmbedderMismatchError, match="other"):
        open_or_create_corpus(corpus_location, "other", DIM)
    kind = type(open_corpus(corpus_location))
    with pytest.raises(CorpusExistsError):
        kind.create(corpus_location, "test-embedder", DIM)  # type: ignore[attr-defined]


def test_round_trip_of_documents_chunks_places_and_groups(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    text = "Intro. Body text here."
    places = (Place(0, 1, "Intro"), Place(7, 2, "Body"))
    doc = DocumentRecord("c.txt", "T", text, "h", {"k": "v"}, 10, 1.5, frozenset({"hr"}))
    chunk = ChunkRecord(text, 0, len(text), 4, {"m": 1}, places)
    corpus.replace_document(doc, [chunk], np.stack([unit(0, 0, 0, 1)]))
    stored = corpus.document("c.txt")
    assert stored is not None
    assert (stored.metadata, stored.size, stored.mtime, stored.groups) == (
        {"k": "v"},
        10,
        1.5,
        frozenset({"hr"}),
    )
    assert corpus.document_text(stored.id) == text
    (got,) = corpus.get_chunks([4]).values()
    assert (got.places, got.pages, got.metadata, got.source) == (places, (1, 2), {"m": 1}, "c.txt")
    assert corpus.list_sources() == ["a.txt", "b.txt", "c.txt"]
    assert sorted(corpus.get_chunks([1, 2, 3, 999])) == [1, 2, 3]
    assert corpus.chunk_ids() == [1, 2, 3, 4]
    with pytest.raises(KeyError):
        corpus.document_text(999)


def test_replacing_keeps_the_doc_id_and_drops_old_chunks_from_both_searches(
    corpus: CorpusBackend,
) -> None:
    add_two_docs(corpus)
    old_id = corpus.document("a.txt").id  # type: ignore[union-attr]
    doc, chunks = make_doc("a.txt", ["Parrots talk."], "Birds")
    assert corpus.replace_document(doc, chunks, np.stack([unit(0, 0, 0, 1)])) == old_id
    assert corpus.search_terms(["cat"], 5, view=EVERYTHING) == []
    assert [cid for cid, _ in corpus.search_terms(["parrot"], 5, view=EVERYTHING)] == [4]
    assert {cid for cid, _ in corpus.search_vec(unit(1, 0, 0, 0), 10, view=EVERYTHING)} == {3, 4}
    assert corpus.stats(view=EVERYTHING).chunks == 2


def test_a_failed_replace_or_group_leaves_everything_as_it_was(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    before = (
        corpus.list_sources(),
        corpus.get_chunks([1, 2, 3]),
        corpus.stats(view=EVERYTHING).chunks,
    )
    doc, chunks = make_doc("a.txt", ["New first chunk.", "New second chunk."], "New")
    chunks[1] = ChunkRecord(chunks[1].text, chunks[1].start, chunks[1].end, 3, {"bad": {1, 2}})
    with pytest.raises(TypeError):
        corpus.replace_document(doc, chunks, np.stack([unit(1, 0, 0, 0), unit(0, 1, 0, 0)]))
    new, new_chunks = make_doc("c.txt", ["Fresh."])
    good, good_chunks = make_doc("a.txt", ["Replaced."])
    with pytest.raises(ValueError, match="shape"), corpus.transaction():
        corpus.replace_document(good, good_chunks, np.stack([unit(1, 1, 1, 1)]))
        corpus.replace_document(new, new_chunks, np.zeros((1, DIM + 1), dtype=np.float32))
    after = (
        corpus.list_sources(),
        corpus.get_chunks([1, 2, 3]),
        corpus.stats(view=EVERYTHING).chunks,
    )
    assert after == before
    assert {cid for cid, _ in corpus.search_terms(["cat"], 5, view=EVERYTHING)} == {1, 2}


def test_delete_document_and_retagging(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    assert corpus.set_groups("b.txt", frozenset({"lab"})) is True
    assert corpus.set_groups("missing.txt", frozenset()) is False
    assert corpus.document("b.txt").groups == {"lab"}  # type: ignore[union-attr]
    assert corpus.delete_document("a.txt") is True
    assert corpus.delete_document("a.txt") is False
    assert corpus.search_terms(["cat"], 5, view=EVERYTHING) == []
    assert [cid for cid, _ in corpus.search_vec(unit(1, 0, 0, 0), 5, view=EVERYTHING)] == [3]


def test_bm25_ranks_by_term_frequency_rarity_and_titles(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    doc, chunks = make_doc("c.txt", ["A cat. A cat. A cat again."], "Cats")
    corpus.replace_document(doc, chunks, np.stack([unit(0, 1, 0, 0)]))
    hits = corpus.search_terms(["cat"], 10, view=EVERYTHING)
    assert hits[0][0] == 4  # the chunk saying "cat" most often
    assert all(score > 0 for _, score in hits)
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
    assert {cid for cid, _ in corpus.search_terms(["physics"], 10, view=EVERYTHING)} == {
        3
    }  # the title counts
    # A rare term outweighs a common one: "qubits" (1 chunk) beats "cats" (3 chunks).
    assert corpus.search_terms(["cats", "qubits"], 10, view=EVERYTHING)[0][0] == 3
    assert corpus.search_terms(["cat"], 0, view=EVERYTHING) == []


def test_terms_are_plain_words_cut_as_fts5_cuts_them(corpus: CorpusBackend) -> None:
    """Query syntax in a term is a word like any other, diacritics fold and stems match, on
    either backend: both cut text with FTS5's tokenizer (`store.fts_terms`)."""
    add_two_docs(corpus)
    doc, chunks = make_doc("c.txt", ['NEAR the "naïve" runs, AND title: x*.'], "Lab")
    corpus.replace_document(doc, chunks, np.stack([unit(0, 1, 0, 0)]))
    assert {c for c, _ in corpus.search_terms(["naive"], 10, view=EVERYTHING)} == {4}
    assert {c for c, _ in corpus.search_terms(["running"], 10, view=EVERYTHING)} == {4}
    hostile = ['"unterminated', "NEAR", "AND", "title:", "x*", "(", "*", "-", 'a"b']
    assert {c for c, _ in corpus.search_terms(hostile, 10, view=EVERYTHING)} == {4}
    assert corpus.search_terms([], 10, view=EVERYTHING) == []


def test_the_sqlite_index_uses_the_tokenizer_both_backends_share() -> None:
    assert f"tokenize = '{TOKENIZE}'" in MIGRATIONS[0][1]


def test_dense_search_returns_cosine_similarity(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    hits = corpus.search_vec(unit(1, 0, 0, 0), 10, view=EVERYTHING)
    assert [cid for cid, _ in hits] == [1, 2, 3]
    assert hits[0][1] == pytest.approx(1.0, abs=1e-6)
    assert hits[1][1] == pytest.approx(np.sqrt(0.5), abs=1e-6)
    assert hits[2][1] == pytest.approx(0.0, abs=1e-6)
    vectors = corpus.get_vectors([3, 999])
    assert np.allclose(vectors[0], unit(0, 0, 1, 0)) and np.isnan(vectors[1]).all()
    with pytest.raises(ValueError, match="dimensions"):
        corpus.search_vec(np.ones(DIM + 1, dtype=np.float32), 5, view=EVERYTHING)


def test_both_searches_filter_by_groups_before_their_top_k(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    corpus.set_groups("a.txt", frozenset({"hr"}))
    for i in range(5):  # hidden chunks nearer to the query than the visible one
        doc, chunks = make_doc(f"hidden{i}.txt", ["Cats and more cats."])
        corpus.replace_document(
            DocumentRecord(doc.source, "", doc.text, doc.content_hash, groups=frozenset({"x"})),
            chunks,
            np.stack([unit(1, 0.01 * i, 0, 0)]),
        )
    query, hr = unit(1, 0, 0, 0), frozenset({"hr"})
    assert [cid for cid, _ in corpus.search_vec(query, 1, view=CorpusView.of(frozenset()))] == [3]
    assert [cid for cid, _ in corpus.search_vec(query, 2, view=CorpusView.of(hr))] == [1, 2]
    assert corpus.search_terms(["cats"], 10, view=CorpusView.of(frozenset())) == []
    assert {c for c, _ in corpus.search_terms(["cats"], 10, view=CorpusView.of(hr))} == {1, 2}
    assert (
        corpus.stats(view=CorpusView.of(frozenset())).documents,
        corpus.stats(view=EVERYTHING).documents,
    ) == (1, 7)


def test_a_callers_bm25_scores_come_from_its_view_alone(corpus: CorpusBackend) -> None:
    """Scores over the whole corpus would tell a caller which words hidden chunks hold: its
    score for a word would move when a hidden chunk also holds it. A caller with groups is
    scored as if the corpus held only what it may see."""
    add_two_docs(corpus)
    doc, chunks = make_doc("c.txt", ["A cat again.", "Qubits are cold."], "Lab")
    corpus.replace_document(
        DocumentRecord(doc.source, doc.title, doc.text, doc.content_hash, groups=frozenset({"hr"})),
        chunks,
        np.stack([unit(0, 1, 0, 0), unit(0, 0, 1, 1)]),
    )
    hr, query = frozenset({"hr"}), '"cat" OR "qubits"'
    alone = corpus.search_terms(
        query, 10, view=EVERYTHING
    )  # the corpus is hr's view, nothing else yet
    for i in range(4):  # hidden chunks holding both words
        doc, chunks = make_doc(f"hidden{i}.txt", [f"Cat {i} and qubits and a cat."])
        corpus.replace_document(
            DocumentRecord(doc.source, "", doc.text, doc.content_hash, groups=frozenset({"x"})),
            chunks,
            np.stack([unit(1, 0.01 * i, 0, 0)]),
        )
    seen = corpus.search_terms(query, 10, view=CorpusView.of(hr))
    assert [c for c, _ in seen] == [c for c, _ in alone]
    assert [s for _, s in seen] == pytest.approx([s for _, s in alone], rel=1e-6)
    assert corpus.search_terms(query, 2, view=CorpusView.of(hr)) == seen[:2]
    assert corpus.search_terms(["again"], 10, view=CorpusView.of(frozenset())) == []


def test_the_path_a_document_was_reached_by_lives_and_dies_with_its_version(
    corpus: CorpusBackend,
) -> None:
    doc, chunks = make_doc("/real/c.txt", ["Cats."])
    reached = DocumentRecord(doc.source, "", doc.text, doc.content_hash, reached="/named/c.txt")
    vectors = np.stack([unit(1, 0, 0, 0)])
    corpus.replace_document(reached, chunks, vectors)
    assert corpus.reached_by() == {"/real/c.txt": "/named/c.txt"}
    corpus.replace_document(doc, chunks, vectors)  # found by its own path this time
    assert corpus.reached_by() == {}
    corpus.replace_document(reached, chunks, vectors)
    assert corpus.delete_document(doc.source) and corpus.reached_by() == {}


def test_a_corpus_from_before_reached_paths_is_upgraded_by_a_writable_open(
    corpus_location: Path | str,
) -> None:
    with open_or_create_corpus(corpus_location, "test-embedder", DIM) as corpus:
        add_two_docs(corpus)
        latest = corpus.stats(view=EVERYTHING).schema_version
    downgrade_before_reached_paths(corpus_location)
    with open_corpus(corpus_location) as upgraded:
        assert upgraded.stats(view=EVERYTHING).schema_version == latest
        assert (upgraded.reached_by(), upgraded.list_sources()) == ({}, ["a.txt", "b.txt"])
        doc, chunks = make_doc("/real/c.txt", ["Cats."])
        record = DocumentRecord(doc.source, "", doc.text, doc.content_hash, reached="/named/c.txt")
        upgraded.replace_document(record, chunks, np.stack([unit(1, 0, 0, 0)]))
        assert upgraded.reached_by() == {"/real/c.txt": "/named/c.txt"}


def downgrade_before_reached_paths(location: Path | str) -> None:
    """The corpus as crag-edge wrote it before documents kept the path they were reached by."""
    if isinstance(location, Path):
        conn = connect(location)
        with conn:
            conn.execute("DROP TABLE reached_paths")
            conn.execute(f"PRAGMA user_version = {REACHED_VERSION - 1}")
        conn.close()
        return
    with psycopg.connect(location, autocommit=True) as pg:
        pg.execute(f"DROP TABLE {SCHEMA}.reached_paths")
        pg.execute(f"UPDATE {SCHEMA}.schema_version SET version = {PG_SCHEMA_VERSION - 1}")


def test_grading_caches_die_with_their_chunk(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    cache, passages = corpus.score_cache(), corpus.passage_vectors()
    assert cache.put("ce@1", "q", {1: 0.9, 3: 0.1, 999: 0.5}) is True
    assert cache.get("ce@1", " q ", [1, 2, 3]) == {1: pytest.approx(0.9), 3: pytest.approx(0.1)}
    reading = EncodedPassage(np.arange(3, dtype=np.float32), True)
    assert passages.put("seg@1", {1: reading, 2: reading}) is True
    assert passages.missing("seg@1") == [3]
    got = passages.get("seg@1", [1, 3])
    assert list(got) == [1] and got[1].truncated and np.array_equal(got[1].vector, reading.vector)
    doc, chunks = make_doc("a.txt", ["Changed."])
    corpus.replace_document(doc, chunks, np.stack([unit(1, 0, 0, 0)]))
    assert (cache.get("ce@1", "q", [1, 3]), len(cache), len(passages)) == ({3: 0.1}, 1, 0)
    assert corpus.stats(view=EVERYTHING).cached_scores == 1
    assert passages.put("seg@2", {3: reading}) and passages.drop_others("seg@2") == 0
    assert cache.clear() == 1


def test_meta_and_read_only_opening(corpus: CorpusBackend) -> None:
    add_two_docs(corpus)
    corpus.set_meta({"last_ingest_at": "12.5"})
    assert corpus.stats(view=EVERYTHING).last_ingest_at == 12.5
    assert corpus.delete_meta("last_ingest_at") is True
    with pytest.raises(ValueError, match="fixed"):
        corpus.set_meta({"embedder_id": "other"})
    with open_corpus(corpus.location, readonly=True) as reader:
        assert reader.readonly and [
            c for c, _ in reader.search_terms(["qubits"], 5, view=EVERYTHING)
        ] == [3]
        with pytest.raises(ReadOnlyCorpusError):
            reader.delete_document("a.txt")
        assert reader.score_cache().put("ce@1", "q", {1: 0.5}) is False
    assert corpus.check()["chunks"] == 3


def test_job_records_are_shared_and_a_job_without_heartbeat_reads_failed(
    corpus: CorpusBackend,
) -> None:
    """Two handles on one corpus stand for two replicas: what one writes the other reads."""
    with open_corpus(corpus.location) as other_replica:
        mine, theirs = corpus.jobs(), other_replica.jobs()
        job = JobRecord("j1", ["docs"], "host:1", "alice", created_at=1.0)
        mine.add(job)
        job.state, job.done, job.total, job.current = "running", 2, 5, "docs/b.md"
        assert mine.update(job, ("state", "done", "total", "current"))
        seen = theirs.get("j1")
        assert seen is not None and seen.to_dict()["progress"] == {
            "done": 2,
            "total": 5,
            "fraction": 0.4,
            "current": "docs/b.md",
        }
        assert (seen.owner, seen.replica, seen.paths) == ("alice", "host:1", ["docs"])
        with pytest.raises(ValueError, match="cannot change"):
            mine.update(job, ("owner",))
        assert theirs.fail_stale(60, "dead") == 0  # its heartbeat is fresh
        time.sleep(0.05)
        assert theirs.fail_stale(0.01, "its replica died") == 1
        lost = mine.get("j1")
        assert lost is not None and (lost.state, lost.error) == ("failed", "its replica died")
        assert not mine.update(job, ("done",))  # a finished job never changes again
        assert theirs.counts() == {"failed": 1}
        for n in range(3):
            mine.add(JobRecord(f"k{n}", [], "host:2", created_at=2.0 + n, state="succeeded"))
        theirs.prune(2)
        assert [mine.get(i) is not None for i in ("j1", "k0", "k1", "k2")] == [
            False,
            False,
            True,
            True,
        ]


def test_writes_in_one_run_transaction_commit_or_roll_back_together(
    corpus: CorpusBackend,
) -> None:
    good, good_chunks = make_doc("a.txt", ["Kept only with its partner."])
    bad, bad_chunks = make_doc("c.txt", ["Fresh."])

    def good_then_bad() -> None:
        corpus.replace_document(good, good_chunks, np.stack([unit(1, 0, 0, 0)]))
        corpus.replace_document(bad, bad_chunks, np.zeros((1, DIM + 1), dtype=np.float32))

    with pytest.raises(ValueError, match="shape"):
        corpus.run_transaction(good_then_bad)
    assert corpus.list_sources() == []
    written = corpus.run_transaction(
        lambda: corpus.replace_document(good, good_chunks, np.stack([unit(1, 0, 0, 0)]))
    )
    stored = corpus.document("a.txt")
    assert stored is not None and stored.id == written


def test_the_listing_counts_each_documents_chunks_and_hides_other_groups(
    corpus: CorpusBackend,
) -> None:
    add_two_docs(corpus)
    before = time.time()
    tagged = DocumentRecord("c.txt", "T", "Payroll.", "h", {}, 8, 1.5, frozenset({"hr", "ops"}))
    corpus.replace_document(
        tagged, [ChunkRecord("Payroll.", 0, 8, 2)], np.stack([unit(0, 1, 0, 0)])
    )
    listing = corpus.list_documents(view=EVERYTHING)
    assert [(e.source, e.chunks, e.groups) for e in listing] == [
        ("a.txt", 2, frozenset()),
        ("b.txt", 1, frozenset()),
        ("c.txt", 1, frozenset({"hr", "ops"})),
    ]
    assert listing[2].size == 8 and listing[2].ingested_at >= before - 1
    assert [e.source for e in corpus.list_documents(view=CorpusView.of(frozenset({"hr"})))] == [
        "a.txt",
        "b.txt",
        "c.txt",
    ]
    assert [e.source for e in corpus.list_documents(view=CorpusView.of(frozenset({"x"})))] == [
        "a.txt",
        "b.txt",
    ]
