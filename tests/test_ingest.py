"""Incremental ingest end to end: real files, real SQLite, the real MiniLM embedder."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from crag_edge.config import Settings
from crag_edge.groups import CorpusView
from crag_edge.ingest import (
    EMBED_GROUP,
    Chunker,
    Format,
    IngestListener,
    IngestReport,
    ProgressEvent,
    ingest,
)
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.store import Corpus, EmbedderMismatchError, connect
from crag_edge.types import Embedder, Vector
from tests.documents import make_pdf

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SETTINGS = Settings.load(chunk_tokens=24, chunk_overlap=6)

TOPICS = {
    "astronomy": "Telescopes collect light from distant galaxies. Astronomers measure the orbits "
    "of planets around other stars and study how nebulae collapse into new stars.",
    "cooking": "Knead the bread dough for ten minutes, let it rise until doubled, then bake it "
    "in a hot oven. A pinch of salt brings out the flavour of the crust.",
    "networking": "Routers forward packets between networks. TCP retransmits lost segments and "
    "controls congestion, while DNS resolves host names to IP addresses.",
}


class CrashingEmbedder:
    """The real embedder, except that call number `crash_on` raises: a crash mid-ingest."""

    def __init__(self, inner: Embedder, crash_on: int) -> None:
        self.inner = inner
        self.crash_on = crash_on
        self.calls = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> Vector:
        self.calls += 1
        if self.calls == self.crash_on:
            raise RuntimeError("embedder crashed")
        return self.inner.embed(texts)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path.resolve() / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / ".git").mkdir()
    (folder / "astronomy.txt").write_text(TOPICS["astronomy"])
    (folder / "cooking.md").write_text("# Bread\n\n" + TOPICS["cooking"])
    (folder / "networking.html").write_text(
        f"<html><title>Networks</title><script>x()</script><p>{TOPICS['networking']}</p></html>"
    )
    (folder / "paper.pdf").write_bytes(make_pdf(["Page one about rivers.", "Page two: lakes."]))
    (folder / "sub" / "notes.txt").write_text("Short notes about gardening and tomatoes.")
    (folder / "image.png").write_bytes(b"\x89PNG\r\n")
    (folder / ".hidden.txt").write_text("hidden")
    (folder / ".git" / "config.txt").write_text("hidden too")
    return folder


@pytest.fixture
def corpus(tmp_path: Path, embedder: OnnxEmbedder) -> Iterator[Corpus]:
    with Corpus.create(tmp_path / "corpus.db", embedder.model_id, embedder.dim) as created:
        yield created


def run(
    corpus: Corpus,
    embedder: Embedder,
    inputs: list[Path],
    *,
    settings: Settings = SETTINGS,
    fmt: Format = "auto",
    prune: bool = False,
    progress: IngestListener | None = None,
    group_chunks: int = EMBED_GROUP,
) -> IngestReport:
    """`ingest` with the real embedder's tokenizer, as the CLI calls it."""
    real = embedder.inner if isinstance(embedder, CrashingEmbedder) else embedder
    assert isinstance(real, OnnxEmbedder)
    return ingest(
        corpus,
        embedder,
        real.tokenizer,
        inputs,
        settings=settings.ingest,
        fmt=fmt,
        prune=prune,
        progress=progress,
        group_chunks=group_chunks,
    )


def assert_whole_documents(corpus: Corpus, embedder: OnnxEmbedder, settings: Settings) -> None:
    """Every stored document has exactly the chunks a fresh chunking gives, each indexed twice."""
    chunking = settings.ingest
    chunker = Chunker(embedder.tokenizer, chunking.chunk_tokens, chunking.chunk_overlap)
    conn = connect(corpus.path, readonly=True)
    try:
        docs = conn.execute("SELECT id, text FROM documents").fetchall()
        for doc_id, text in docs:
            rows = conn.execute(
                "SELECT id, ordinal, text, start_char, end_char FROM chunks "
                "WHERE doc_id = ? ORDER BY ordinal",
                (doc_id,),
            ).fetchall()
            expected = chunker.split(text)  # type: ignore[arg-type]
            assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
                (i, s.text, s.start, s.end) for i, s in enumerate(expected)
            ]
        counts = [
            conn.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            for table in ("chunks", "chunks_fts", "chunks_vec")
        ]
        assert len(set(counts)) == 1, counts
    finally:
        conn.close()


def state(corpus: Corpus) -> list[tuple[object, ...]]:
    """Everything a no-op run must leave alone."""
    conn = connect(corpus.path, readonly=True)
    try:
        return conn.execute(
            "SELECT d.id, d.source, d.content_hash, d.ingested_at, group_concat(c.id) "
            "FROM documents d LEFT JOIN chunks c ON c.doc_id = d.id GROUP BY d.id ORDER BY d.id"
        ).fetchall()
    finally:
        conn.close()


def test_first_ingest_adds_supported_files_and_reports_the_rest(
    corpus: Corpus, embedder: OnnxEmbedder, docs: Path
) -> None:
    events: list[ProgressEvent] = []
    report = run(corpus, embedder, [docs], progress=events.append)
    assert (report.added, report.updated, report.unchanged, report.pruned) == (5, 0, 0, 0)
    assert report.errors == []
    route = "put scans in a PDF (e.g. img2pdf) to have them read by OCR"
    assert report.skipped == [(str(docs / "image.png"), f"unsupported file type .png; {route}")]
    assert (
        report.chunks_written == corpus.stats(view=EVERYTHING).chunks > report.added
    )  # multi-chunk docs
    assert report.chunks_per_second > 0
    assert sorted(corpus.list_sources()) == sorted(
        str(docs / name)
        for name in ("astronomy.txt", "cooking.md", "networking.html", "paper.pdf", "sub/notes.txt")
    )
    assert [e.done for e in events] == [1, 2, 3, 4, 5]
    assert {e.total for e in events} == {5}
    assert {e.status for e in events} == {"added"}
    stats = corpus.stats(view=EVERYTHING)
    assert (stats.chunk_tokens, stats.chunk_overlap) == (24, 6)
    assert stats.last_ingest_at is not None
    assert corpus.document(str(docs / "networking.html")).title == "Networks"  # type: ignore[union-attr]
    assert_whole_documents(corpus, embedder, SETTINGS)


def test_rerun_writes_nothing(corpus: Corpus, embedder: OnnxEmbedder, docs: Path) -> None:
    run(corpus, embedder, [docs])
    before = state(corpus)
    report = run(corpus, embedder, [docs])
    assert (report.added, report.updated, report.unchanged, report.chunks_written) == (0, 0, 5, 0)
    assert state(corpus) == before


def test_touched_file_is_unchanged_and_its_new_mtime_remembered(
    corpus: Corpus, embedder: OnnxEmbedder, docs: Path
) -> None:
    run(corpus, embedder, [docs])
    path = docs / "astronomy.txt"
    before = state(corpus)
    os.utime(path, (1_000_000_000, 1_000_000_000))
    report = run(corpus, embedder, [docs])
    assert (report.unchanged, report.chunks_written) == (5, 0)
    assert state(corpus) == before
    assert corpus.document(str(path)).mtime == path.stat().st_mtime  # type: ignore[union-attr]


def test_changed_file_is_reindexed_alone(
    corpus: Corpus, embedder: OnnxEmbedder, docs: Path
) -> None:
    run(corpus, embedder, [docs])
    path = str(docs / "cooking.md")
    old_ids = set(corpus.get_chunks(range(1, 1000)))
    old_cooking = {c.chunk_id for c in corpus.get_chunks(old_ids).values() if c.source == path}
    (docs / "cooking.md").write_text("# Soup\n\nSimmer the lentil soup with cumin and garlic.")
    report = run(corpus, embedder, [docs])
    assert (report.added, report.updated, report.unchanged) == (0, 1, 4)
    chunks = corpus.get_chunks(range(1, 1000))
    assert old_cooking.isdisjoint(chunks)
    assert set(chunks) - old_ids == {c.chunk_id for c in chunks.values() if c.source == path}
    assert {chunks[i].source for i, _ in corpus.search_terms(["lentil"], 5, view=EVERYTHING)} == {
        path
    }
    assert corpus.search_terms(["dough"], 5, view=EVERYTHING) == []
    assert corpus.document(path).title == "Soup"  # type: ignore[union-attr]
    assert_whole_documents(corpus, embedder, SETTINGS)


def test_prune_is_scoped_to_the_given_folders(
    corpus: Corpus, embedder: OnnxEmbedder, docs: Path, tmp_path: Path
) -> None:
    other = tmp_path.resolve() / "other"
    other.mkdir()
    (other / "keep.txt").write_text("Another folder, ingested separately.")
    (other / "gone.txt").write_text("This file will be deleted later.")
    run(corpus, embedder, [docs, other])
    (docs / "sub" / "notes.txt").unlink()
    (other / "gone.txt").unlink()

    report = run(corpus, embedder, [docs])
    assert report.pruned == 0
    assert str(docs / "sub" / "notes.txt") in corpus.list_sources()

    report = run(corpus, embedder, [docs], prune=True)
    assert (report.pruned, report.unchanged) == (1, 4)
    sources = corpus.list_sources()
    assert str(docs / "sub" / "notes.txt") not in sources
    assert str(other / "gone.txt") in sources  # outside this run's scope

    (other / "keep.txt").unlink()
    other.rmdir()
    report = run(corpus, embedder, [other], prune=True)
    assert report.pruned == 0  # a missing folder (an unmounted share?) is not an empty one
    assert report.errors == [(str(other), "no such file or directory")]
    assert str(other / "gone.txt") in corpus.list_sources()
    assert_whole_documents(corpus, embedder, SETTINGS)


def test_bad_files_are_reported_without_aborting(
    corpus: Corpus, embedder: OnnxEmbedder, docs: Path
) -> None:
    (docs / "latin1.txt").write_bytes("café crème".encode("latin-1"))
    (docs / "broken.pdf").write_bytes(b"%PDF-1.4 truncated")
    (docs / "blank.txt").write_text("   \n  ")
    report = run(corpus, embedder, [docs])
    assert report.added == 6
    assert sorted(source for source, _ in report.errors) == [
        str(docs / "broken.pdf"),
        str(docs / "latin1.txt"),
    ]
    assert report.warnings == [(str(docs / "blank.txt"), "no text to index")]
    assert str(docs / "blank.txt") in corpus.list_sources()


def test_interrupted_ingest_leaves_only_whole_documents_and_resumes(
    corpus: Corpus, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    folder = tmp_path.resolve() / "many"
    folder.mkdir()
    for i in range(12):
        body = " ".join(TOPICS.values())
        (folder / f"doc{i:02}.txt").write_text(f"Document {i}. {body}")
    crashing = CrashingEmbedder(embedder, crash_on=3)
    with pytest.raises(RuntimeError, match="embedder crashed"):
        run(corpus, crashing, [folder], group_chunks=8)
    committed = corpus.stats(view=EVERYTHING).documents
    assert 0 < committed < 12
    assert_whole_documents(corpus, embedder, SETTINGS)
    assert corpus.stats(view=EVERYTHING).last_ingest_at is None  # the run never finished

    report = run(corpus, embedder, [folder], group_chunks=8)
    assert (report.added, report.unchanged) == (12 - committed, committed)
    assert corpus.stats(view=EVERYTHING).documents == 12
    assert_whole_documents(corpus, embedder, SETTINGS)


def test_beir_corpus_incremental_and_pruned(
    corpus: Corpus, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    path = tmp_path.resolve() / "scifact" / "corpus.jsonl"
    path.parent.mkdir()
    records = [{"_id": name, "title": name.title(), "text": text} for name, text in TOPICS.items()]

    def write(rows: list[dict[str, str]], extra: str = "") -> None:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows) + extra)

    write(records, extra="{broken json\n")
    queries = path.with_name("queries.jsonl")
    queries.write_text('{"_id": "q1", "text": "a question, not a document"}\n')
    events: list[ProgressEvent] = []
    report = run(corpus, embedder, [path.parent], progress=events.append)
    assert report.added == 3
    assert report.skipped == [
        (str(queries), "in a folder only corpus.jsonl is read; name this file to ingest it")
    ]
    assert report.errors == [(f"{path}:4", report.errors[0][1])]
    assert [e.total for e in events] == [4] * 4
    assert corpus.list_sources() == ["beir:astronomy", "beir:cooking", "beir:networking"]
    assert corpus.document("beir:cooking").title == "Cooking"  # type: ignore[union-attr]

    records[1]["text"] = "Grill the vegetables over charcoal."
    write(records[:2])
    report = run(corpus, embedder, [path], prune=True)  # auto: .jsonl is a BEIR corpus
    assert (report.updated, report.unchanged, report.pruned) == (1, 1, 1)
    assert corpus.list_sources() == ["beir:astronomy", "beir:cooking"]
    report = run(corpus, embedder, [path.parent], fmt="beir")  # a folder: its corpus.jsonl
    assert (report.unchanged, report.skipped) == (2, [])
    assert_whole_documents(corpus, embedder, SETTINGS)


def test_search_finds_the_right_document_after_ingest(
    corpus: Corpus, embedder: OnnxEmbedder, docs: Path
) -> None:
    run(corpus, embedder, [docs])
    for topic, question in [
        ("astronomy.txt", "How do scientists observe planets orbiting other suns?"),
        ("cooking.md", "how long should I let bread rise before baking"),
        ("networking.html", "what resolves hostnames on the internet"),
    ]:
        vector = embedder.embed([question])[0]
        best_id, similarity = corpus.search_vec(vector, 3, view=EVERYTHING)[0]
        assert corpus.get_chunks([best_id])[best_id].source == str(docs / topic)
        assert 0.2 < similarity <= 1.0
    lexical = corpus.search_terms(["packets"], 3, view=EVERYTHING)
    assert corpus.get_chunks([lexical[0][0]])[lexical[0][0]].source == str(docs / "networking.html")


def test_pdf_chunks_record_their_pages(
    corpus: Corpus, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    words = ["alpha", "bravo", "charlie"]  # page n is word n, so a chunk's text shows its pages
    path = tmp_path.resolve() / "long.pdf"
    lengths = [30, 3, 3]  # short pages end up in one chunk: a page range
    path.write_bytes(
        make_pdf([" ".join([w] * n) + "." for w, n in zip(words, lengths, strict=True)])
    )
    run(corpus, embedder, [path])
    chunks = sorted(corpus.get_chunks(corpus.chunk_ids()).values(), key=lambda c: c.ordinal)
    assert len(chunks) > 1
    spanned = []
    for chunk in chunks:
        shown = [n for n, word in enumerate(words, start=1) if word in chunk.text]
        assert chunk.pages == (shown[0], shown[-1])
        spanned.append(chunk.pages[0] != chunk.pages[1])
    assert any(spanned)  # some chunk crosses a page break: the range is exercised too


def test_markdown_chunks_know_their_section(
    corpus: Corpus, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    body = " ".join(["Sentence about the topic at hand."] * 12)
    text = f"# Guide\n\n{body}\n\n## Install\n\n{body}\n\n### Linux\n\nUse apt. {body}\n"
    path = tmp_path.resolve() / "guide.md"
    path.write_text(text)
    run(corpus, embedder, [path])
    chunks = corpus.get_chunks(corpus.chunk_ids()).values()
    lines = {
        h: text.index(f"{marks} {h}")
        for marks, h in [("#", "Guide"), ("##", "Install"), ("###", "Linux")]
    }

    def section_at(offset: int) -> str:
        return " \u203a ".join(heading for heading, line in lines.items() if line <= offset)

    for chunk in chunks:  # the section most of the chunk's characters belong to
        most = Counter(section_at(i) for i in range(chunk.start, chunk.end)).most_common(1)
        assert (chunk.section, chunk.pages) == (most[0][0], None)
    assert any(c.text.startswith("### Linux") for c in chunks)


def test_new_chunk_settings_reindex_everything(
    corpus: Corpus, embedder: OnnxEmbedder, docs: Path
) -> None:
    run(corpus, embedder, [docs])
    finer = Settings.load(chunk_tokens=16, chunk_overlap=4)
    report = run(corpus, embedder, [docs], settings=finer)
    assert (report.updated, report.unchanged) == (5, 0)
    assert corpus.stats(view=EVERYTHING).chunk_tokens == 16
    assert_whole_documents(corpus, embedder, finer)


def test_embedder_mismatch_is_refused_before_any_write(
    embedder: OnnxEmbedder, docs: Path, tmp_path: Path
) -> None:
    with Corpus.create(tmp_path / "other.db", "some-other-model", embedder.dim) as corpus:
        with pytest.raises(EmbedderMismatchError, match="some-other-model"):
            run(corpus, embedder, [docs])
        assert corpus.stats(view=EVERYTHING).documents == 0
