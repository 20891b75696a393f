"""The binary pre-filter of dense search (`store.sqlite.vector_bits`), forced on through its
setting, against exact search on real corpus files embedded by the real MiniLM.

sample_corpus/ and the 40 abstracts of tests/data/scifact_mini in 64-token chunks give a few
hundred chunks, where the sign bits of a question's vector find its nearest chunks among ten
times as many candidates: the pre-filter must then return exactly what exact search returns.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from crag_edge.config import RetrievalSettings, Settings
from crag_edge.groups import CorpusView
from crag_edge.ingest import ingest
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.retrieval import Retriever
from crag_edge.store import SCHEMA_VERSION, Corpus, connect
from crag_edge.store.sqlite.vector_bits import quantize
from crag_edge.types import Vector

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
MINI = Path(__file__).parent / "data" / "scifact_mini"
SETTINGS = Settings.load(chunk_tokens=64, chunk_overlap=8, binary_prefilter_chunks=0)
FORCED = SETTINGS.retrieval.binary_prefilter_chunks
QUESTIONS = [
    "How do honeybees communicate where flowers are?",
    "What does a write-ahead log change about concurrent readers?",
    "How does reciprocal rank fusion combine rankings?",
    "What happens in the light reactions of photosynthesis?",
    "Can the system run without any network access?",
    "When does corrective retrieval fall back to other sources?",
    *(json.loads(line)["text"] for line in (MINI / "queries.jsonl").read_text().splitlines()),
]
HONEYBEES = frozenset({"bees"})


def ingest_into(corpus: Corpus, embedder: OnnxEmbedder, paths: list[Path], **how: str) -> None:
    ingest(corpus, embedder, embedder.tokenizer, paths, settings=SETTINGS.ingest, **how)


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Path:
    """sample_corpus/ and scifact_mini ingested once; the honeybees document tagged with
    group `bees`."""
    path = tmp_path_factory.mktemp("prefilter") / "sample.db"
    with Corpus.create(path, embedder.model_id, embedder.dim) as corpus:
        ingest_into(corpus, embedder, [SAMPLE])
        ingest_into(corpus, embedder, [MINI / "corpus.jsonl"], fmt="beir")
        assert corpus.set_groups(str((SAMPLE / "honeybees.txt").resolve()), HONEYBEES)
    return path


@pytest.fixture
def corpus(sample_db: Path, tmp_path: Path) -> Iterator[Corpus]:
    """A private copy of the sample corpus, so a test may change it."""
    copy = tmp_path / "sample.db"
    copy.write_bytes(sample_db.read_bytes())
    with Corpus.open(copy) as opened:
        yield opened


def vectors(embedder: OnnxEmbedder) -> np.ndarray:
    return embedder.embed(QUESTIONS)


def test_the_sign_bits_are_those_sqlite_vec_computes(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    vector = vectors(embedder)[0]
    [[by_sqlite_vec]] = corpus._conn.execute(
        "SELECT vec_quantize_binary(?)", (vector.tobytes(),)
    ).fetchall()
    assert quantize(vector).tobytes() == by_sqlite_vec
    stored = dict(corpus._conn.execute("SELECT chunk_id, bits FROM chunk_bits").fetchall())
    assert sorted(stored) == corpus.chunk_ids()
    chunk_vectors = corpus.get_vectors(corpus.chunk_ids())
    assert [stored[i] for i in corpus.chunk_ids()] == [
        row.tobytes() for row in quantize(chunk_vectors)
    ]


def test_the_rescoring_reads_every_vector_sqlite_vec_stores(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    """The rescoring reads sqlite-vec's storage directly: each chunk's score must be the one
    sqlite-vec computes from the vector it stores for that chunk."""
    vector = vectors(embedder)[3]
    ids = corpus.chunk_ids()
    by_sqlite_vec = dict(
        corpus._conn.execute(
            "SELECT rowid, 1.0 - vec_distance_cosine(embedding, ?) FROM chunks_vec",
            (vector.tobytes(),),
        ).fetchall()
    )
    assert corpus._bits is not None
    rescored = dict(corpus._bits._rescore(vector, np.array(ids[::-1], dtype=np.int64)))
    assert rescored == by_sqlite_vec and sorted(rescored) == ids


def test_forced_on_it_returns_exact_searchs_hits_with_their_scores(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    """Top-3: exact search's hits for every question. Top-10 (100 candidates, a third of
    the corpus): at least 98% of them, where a question's tenth hit may be one of many
    near-ties. Every score is the one exact search gives the same chunk."""
    assert len(corpus.chunk_ids()) > 10 * 10  # the bits choose: not every chunk is rescored
    kept = []
    for vector in vectors(embedder):
        assert search(corpus, vector, 3, prefilter_from=FORCED) == search(corpus, vector, 3)
        exact = dict(search(corpus, vector, 10))
        prefiltered = search(corpus, vector, 10, prefilter_from=FORCED)
        assert [s for _, s in prefiltered] == sorted((s for _, s in prefiltered), reverse=True)
        assert all(exact[i] == s for i, s in prefiltered if i in exact)
        kept.append(len(exact.keys() & dict(prefiltered).keys()) / 10)
    assert np.mean(kept) >= 0.98


def test_hybrid_search_through_the_setting_matches_exact(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    retriever = Retriever(corpus, embedder, candidates=3)

    def ranked(prefilter_chunks: int) -> list[list[int]]:
        setting = {"binary_prefilter_chunks": prefilter_chunks}
        corpus.use_settings(RetrievalSettings.model_validate(setting))
        return [
            [h.chunk.chunk_id for h in retriever.search(q, 5, view=EVERYTHING)] for q in QUESTIONS
        ]

    assert ranked(FORCED) == ranked(len(corpus.chunk_ids()) + 1)


def test_the_group_filter_applies_before_the_candidates_are_taken(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    bees = str((SAMPLE / "honeybees.txt").resolve())
    chunks = corpus.get_chunks(corpus.chunk_ids()).values()
    hidden = {chunk.chunk_id for chunk in chunks if chunk.source == bees}
    vector = vectors(embedder)[0]  # the honeybees question: its chunks are the nearest
    assert {i for i, _ in search(corpus, vector, 1, prefilter_from=FORCED)} <= hidden
    for groups in (frozenset(), frozenset({"other"})):
        seen = search(corpus, vector, 3, view=CorpusView.of(groups), prefilter_from=FORCED)
        assert len(seen) == 3 and not {i for i, _ in seen} & hidden
        assert seen == search(corpus, vector, 3, view=CorpusView.of(groups))
    members = search(corpus, vector, 3, view=CorpusView.of(HONEYBEES), prefilter_from=FORCED)
    assert members == search(corpus, vector, 3, view=CorpusView.of(HONEYBEES))


def test_deleted_and_added_chunks_are_seen_by_the_next_search(
    corpus: Corpus, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    vector = vectors(embedder)[0]
    before = search(corpus, vector, 3, prefilter_from=FORCED)  # the bits are in memory now
    assert corpus.delete_document(str((SAMPLE / "honeybees.txt").resolve()))
    after = search(corpus, vector, 3, prefilter_from=FORCED)
    assert not {i for i, _ in before} & {i for i, _ in after}
    assert after == search(corpus, vector, 3)
    (tmp_path / "hive.txt").write_text("Honeybees dance to tell the hive where flowers bloom.")
    ingest_into(corpus, embedder, [tmp_path / "hive.txt"])
    [(nearest, _)] = search(corpus, vector, 1, prefilter_from=FORCED)
    assert corpus.get_chunks([nearest])[nearest].source.endswith("hive.txt")


def search(
    corpus: Corpus,
    vector: Vector,
    limit: int,
    *,
    view: CorpusView = EVERYTHING,
    prefilter_from: int | None = None,
) -> list[tuple[int, float]]:
    """`search_vec` with the pre-filter taking over from `prefilter_from` chunks (None:
    exact at any size)."""
    corpus.prefilter_from = prefilter_from
    return corpus.search_vec(vector, limit, view=view)


def make_version_5(path: Path) -> None:
    """The file as crag-edge wrote it before chunks had sign bits."""
    conn = connect(path)
    with conn:
        conn.execute("DROP TABLE reached_paths")
        conn.execute("DROP TABLE jobs")
        conn.execute("DROP TABLE chunk_bits")
        conn.execute("PRAGMA user_version = 5")
    conn.close()


def test_an_old_corpus_searches_exactly_read_only_and_gains_its_bits_read_write(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    path = corpus.path
    corpus.close()
    make_version_5(path)
    vector = vectors(embedder)[1]
    with Corpus.open(path, readonly=True) as old:
        assert old.stats(view=EVERYTHING).schema_version == 5
        assert search(old, vector, 3, prefilter_from=FORCED) == search(old, vector, 3)
    with Corpus.open(path) as upgraded:
        assert upgraded.stats(view=EVERYTHING).schema_version == SCHEMA_VERSION
        bits = dict(upgraded._conn.execute("SELECT chunk_id, bits FROM chunk_bits").fetchall())
        ids = upgraded.chunk_ids()
        assert sorted(bits) == ids
        assert [bits[i] for i in ids] == [r.tobytes() for r in quantize(upgraded.get_vectors(ids))]
        prefiltered = search(upgraded, vector, 3, prefilter_from=FORCED)
        assert [i for i, _ in prefiltered] == [i for i, _ in search(upgraded, vector, 3)]


def test_below_the_threshold_the_search_is_exact(corpus: Corpus, embedder: OnnxEmbedder) -> None:
    """Past the corpus size the bits are never consulted: moving the nearest chunks' bits as
    far from the question as bits go changes nothing there, and hides them from the bits."""
    vector = vectors(embedder)[2]
    exact = search(corpus, vector, 5)
    farthest = bytes(byte ^ 0xFF for byte in quantize(vector).tobytes())
    with corpus.transaction():
        corpus._conn.executemany(
            "UPDATE chunk_bits SET bits = ? WHERE chunk_id = ?",
            [(farthest, chunk_id) for chunk_id, _ in exact],
        )
    size = len(corpus.chunk_ids())
    assert search(corpus, vector, 5, prefilter_from=size + 1) == exact
    prefiltered = search(corpus, vector, 5, prefilter_from=size)  # the bits now decide
    assert len(prefiltered) == 5 and not dict(prefiltered).keys() & dict(exact).keys()
