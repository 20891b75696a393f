"""PostgreSQL corpus under concurrency: several processes writing one corpus, and a writer
killed with SIGKILL, leave every document whole (its old or its new version, never a mix);
a SQLite corpus copied into PostgreSQL (`scripts/copy_corpus.py`) arrives whole; and bm25
scores the same chunks as the SQLite file does, older corpora included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import numpy as np
import psycopg
import pytest

from crag_edge.groups import CorpusView
from crag_edge.store import ChunkRecord, DocumentRecord
from crag_edge.store.factory import open_corpus, open_or_create_corpus
from crag_edge.store.postgres import PostgresCorpus
from crag_edge.store.postgres.schema import MIGRATIONS, SCHEMA_VERSION, migrate
from tests.test_store import DIM, add_two_docs, make_doc, unit

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SOURCES = 12
ROOT = Path(__file__).resolve().parent.parent

# argv: url, writer name, rounds (0: until killed). Each round rewrites every document, in
# groups of four per transaction as ingest does, each as `version` makes it.
WRITER = """
import sys
from crag_edge.store.factory import open_corpus
from tests.test_postgres_store import version

url, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
corpus = open_corpus(url)
print("ready", flush=True)
sys.stdin.readline()  # "go": every writer starts at once
r = 0
while rounds == 0 or r < rounds:
    r += 1
    for first in range(0, SOURCES, 4):
        with corpus.transaction():
            for i in range(first, first + 4):
                corpus.replace_document(*version(i, name, r))
corpus.close()
""".replace("SOURCES", str(SOURCES))


def version(i: int, name: str, r: int) -> tuple[DocumentRecord, list[ChunkRecord], np.ndarray]:
    """Document `i` as writer `name` writes it in round `r`: as many chunks as the round
    number says, so that versions differ in their chunk counts too."""
    parts = [f"{name} round {r} part {p}." for p in range(1 + (r + i) % 4)]
    chunks, offset = [], 0
    for part in parts:
        chunks.append(ChunkRecord(part, offset, offset + len(part), 5))
        offset += len(part) + 1
    vectors = np.ones((len(chunks), 4), dtype=np.float32)
    doc = DocumentRecord(f"doc{i}.txt", name, " ".join(parts), f"{name}/{r}/{len(parts)}")
    return doc, chunks, vectors


def writers(url: str, rounds: int, *names: str) -> list[subprocess.Popen[str]]:
    """One writer process per name, started together once all have connected."""
    processes = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, name, str(rounds)],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in names
    ]
    for process in processes:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
    for process in processes:
        assert process.stdin is not None
        process.stdin.write("go\n")
        process.stdin.close()
    return processes


def whole_documents(url: str) -> dict[str, str]:
    """Each document's version ("writer round"), after checking that its chunks, read in one
    statement, are all of that version and all there: ordinals 0..n-1, n as that version has,
    the title stored with them. A document replaced between listing the chunk ids and reading
    them is left out (its old chunks are gone); it is never seen with a mix."""
    with open_corpus(url, readonly=True) as corpus:
        by_doc = defaultdict(list)
        for chunk in corpus.get_chunks(corpus.chunk_ids()).values():
            by_doc[chunk.source].append(chunk)
    versions = {}
    for source, chunks in by_doc.items():
        chunks.sort(key=lambda c: c.ordinal)
        name, _, r = chunks[0].text.split(" part ")[0].partition(" round ")
        index = int(source.removeprefix("doc").removesuffix(".txt"))
        expected = [f"{name} round {r} part {p}." for p in range(1 + (int(r) + index) % 4)]
        assert [c.text for c in chunks] == expected, source
        assert [c.ordinal for c in chunks] == list(range(len(expected))), source
        assert {c.title for c in chunks} == {name}, source
        versions[source] = f"{name}/{r}"
    return versions


@pytest.fixture
def url(postgres_url: str) -> str:
    with open_or_create_corpus(postgres_url, "test-embedder", 4) as corpus:
        assert isinstance(corpus, PostgresCorpus)
    return postgres_url


def test_two_processes_writing_the_same_documents_leave_each_whole(url: str) -> None:
    both = writers(url, 20, "alpha", "beta")
    seen = set()
    while any(w.poll() is None for w in both):
        seen.update(whole_documents(url).values())  # readers never see a document half-done
    assert [w.wait(timeout=120) for w in both] == [0, 0]
    final = whole_documents(url)
    assert len(final) == SOURCES
    assert {version.split("/")[1] for version in final.values()} == {"20"}
    assert {version.split("/")[0] for version in seen} == {"alpha", "beta"}


def test_a_writer_killed_mid_transaction_leaves_every_document_old_or_new(url: str) -> None:
    (first,) = writers(url, 1, "old")
    assert first.wait(timeout=120) == 0
    assert set(whole_documents(url).values()) == {"old/1"}
    (killed,) = writers(url, 0, "new")
    deadline = time.monotonic() + 60
    while not any(v.startswith("new/2") for v in whole_documents(url).values()):
        assert time.monotonic() < deadline, "the writer made no progress"
    os.kill(killed.pid, signal.SIGKILL)
    assert killed.wait(timeout=30) == -signal.SIGKILL
    versions = whole_documents(url)
    assert len(versions) == SOURCES
    assert all(v.startswith("new/") for v in versions.values())


def test_two_writers_taking_the_same_documents_in_opposite_orders_both_complete(
    url: str,
) -> None:
    """Each writer holds its first document's lock and then asks for the other's: PostgreSQL
    aborts one as a deadlock's victim, which runs its transaction again and completes."""
    both_hold_one = threading.Barrier(2, timeout=60)
    attempts = {"forward": 0, "backward": 0}

    def write(name: str, order: tuple[int, int]) -> None:
        with open_corpus(url) as corpus:

            def both_documents() -> None:
                attempts[name] += 1
                for i in order:
                    corpus.replace_document(*version(i, name, 1))
                    if i == order[0] and attempts[name] == 1:
                        both_hold_one.wait()

            corpus.run_transaction(both_documents)

    with ThreadPoolExecutor(2) as pool:
        done = [pool.submit(write, "forward", (0, 1)), pool.submit(write, "backward", (1, 0))]
        for future in done:
            future.result(timeout=120)  # neither ingest failed
    assert sorted(attempts.values()) == [1, 2]  # a deadlock happened, and was retried once
    retried = max(attempts, key=lambda name: attempts[name])
    assert whole_documents(url) == {"doc0.txt": f"{retried}/1", "doc1.txt": f"{retried}/1"}


def test_copy_corpus_moves_a_sqlite_corpus_into_postgres_whole(
    postgres_url: str, tmp_path: Path
) -> None:
    sqlite_db = tmp_path / "corpus.db"
    with open_or_create_corpus(sqlite_db, "test-embedder", DIM) as corpus:
        add_two_docs(corpus)
        corpus.set_groups("b.txt", frozenset({"lab"}))
        corpus.set_meta({"chunk_tokens": "200"})
    script = Path(__file__).resolve().parent.parent / "scripts" / "copy_corpus.py"
    done = subprocess.run(
        [sys.executable, str(script), str(sqlite_db), postgres_url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "copied 2 documents, 3 chunks" in done.stdout
    with open_corpus(sqlite_db) as source, open_corpus(postgres_url) as target:
        assert isinstance(target, PostgresCorpus)
        assert target.stats(view=EVERYTHING).chunk_tokens == 200
        assert target.document("b.txt").groups == {"lab"}  # type: ignore[union-attr]
        copied, original = target.get_chunks([1, 2, 3]), source.get_chunks([1, 2, 3])
        assert {i: (c.source, c.text, c.start) for i, c in copied.items()} == {
            i: (c.source, c.text, c.start) for i, c in original.items()
        }
        assert np.allclose(source.get_vectors([1, 2, 3]), target.get_vectors([1, 2, 3]))
        query = unit(1, 0, 0, 0)
        assert [i for i, _ in target.search_vec(query, 3, view=EVERYTHING)] == [
            i for i, _ in source.search_vec(query, 3, view=EVERYTHING)
        ]


BM25_DOCUMENTS = [
    ("a.txt", "Pets", ["The cat sat on the mat.", "Dogs chase cats; cats run."], frozenset()),
    ("b.txt", "Physics", ["Quantum computers use qubits, cooled qubits."], frozenset({"lab"})),
    ("c.txt", "Café notes", ["A naïve cat visits the café, running late."], frozenset({"hr"})),
    ("d.txt", "", ["snake_case words and COVID-19 data for cats and dogs"], frozenset()),
]


@pytest.mark.parametrize(
    "view", [EVERYTHING, CorpusView.of({"lab"}), CorpusView.of({"hr", "lab"})], ids=str
)
def test_bm25_on_postgres_gives_sqlites_scores(
    postgres_url: str, tmp_path: Path, view: CorpusView
) -> None:
    """The same chunks and terms score alike on both backends, to rounding: FTS5's tokenizer,
    frequencies, lengths and bm25 on both, for the owner and for a caller's view."""
    results = []
    for location in (tmp_path / "corpus.db", postgres_url):
        with open_or_create_corpus(location, "test-embedder", DIM) as corpus:
            for source, title, texts, tags in BM25_DOCUMENTS:
                doc, chunks = make_doc(source, texts, title)
                vectors = np.stack([unit(1, 0, 0, i) for i in range(len(chunks))])
                corpus.replace_document(replace(doc, groups=tags), chunks, vectors)
            results.append(
                [
                    corpus.search_terms(terms, 10, view=view)
                    for terms in (
                        ["cat"],
                        ["cats", "cat", "qubits"],
                        ["naive", "running"],
                        ["covid", "19", "data"],
                        ["the", "dogs"],
                    )
                ]
            )
    sqlite, postgres = results
    assert [[c for c, _ in hits] for hits in postgres] == [[c for c, _ in hits] for hits in sqlite]
    assert [[s for _, s in hits] for hits in postgres] == [
        pytest.approx([s for _, s in hits], rel=1e-9) for hits in sqlite
    ]


def test_a_version_2_corpus_gains_its_terms_when_opened(postgres_url: str) -> None:
    """A corpus written before the postings were kept gets them, and FTS5's lengths, in its
    upgrade: its chunks are found by their terms at once."""
    with psycopg.connect(postgres_url) as conn, conn.transaction():
        migrate(conn, DIM, MIGRATIONS[:2])
        conn.execute(
            "INSERT INTO meta VALUES ('embedder_id', 'test-embedder'), ('dim', %s), "
            "('created_at', '0')",
            (str(DIM),),
        )
        conn.execute(
            "INSERT INTO documents (source, title, content_hash, text, ingested_at) "
            "VALUES ('old.txt', 'Cafés', 'h', 'Naïve cats nap.', 0)"
        )
        conn.execute(
            "INSERT INTO chunks (doc_id, ordinal, text, start_char, end_char, token_count, "
            "terms, term_count, embedding) SELECT id, 0, text, 0, 15, 4, "
            "to_tsvector('english', text), 3, '[1,0,0,0]' FROM documents"
        )
    with open_corpus(postgres_url) as corpus:
        assert corpus.stats(view=EVERYTHING).schema_version == SCHEMA_VERSION
        [(chunk_id, _)] = corpus.search_terms(["naive", "cafe"], 5, view=EVERYTHING)
        assert corpus.get_chunks([chunk_id])[chunk_id].source == "old.txt"
        assert corpus.check()["chunks"] == 1
