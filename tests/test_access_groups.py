"""Access groups: tagged documents, and retrieval that only ever sees a caller's groups.

Real corpus files, the real MiniLM embedder and the real ingest pipeline throughout.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from tokenizers import Tokenizer
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.correction.fallback import LocalCorpusProvider, run_fallbacks
from crag_edge.groups import CorpusView, Groups, Tagging, parse_groups
from crag_edge.ingest import IngestReport, ingest
from crag_edge.ingest.pipeline import REFUSED
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.retrieval import MODES, Mode, Retriever
from crag_edge.retrieval.lexical import mentions
from crag_edge.store import SCHEMA_VERSION, Corpus, connect
from crag_edge.types import Embedder, Vector

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SETTINGS = Settings.load(chunk_tokens=64, chunk_overlap=8)
QUESTION = "aurora borealis sightings forecast"
# The one group-A document: relevant, but every group-B document is more so.
GROUP_A = {
    "a-notes.txt": "Winter notes from the lake cabin. One night the aurora borealis showed "
    "faintly above the trees before the clouds came back."
}
GROUP_B = {
    f"b-forecast-{i}.txt": f"Aurora borealis forecast {i}: aurora borealis sightings expected, "
    f"the aurora forecast for sightings of the borealis lights is strong, number {i}."
    for i in range(12)
}
UNTAGGED = {
    "bread.txt": "Knead the bread dough for ten minutes, let it rise, then bake it in a hot oven."
}
A, B = frozenset({"a"}), frozenset({"b"})


class CountingEmbedder:
    """The real embedder, counting the texts it was asked to embed."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.texts = 0

    @property
    def model_id(self) -> str:
        return self.inner.model_id

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def tokenizer(self) -> Tokenizer:
        return self.inner.tokenizer

    def embed(self, texts: Sequence[str]) -> Vector:
        self.texts += len(texts)
        return self.inner.embed(texts)


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder.resolve()


def run(
    corpus: Corpus,
    embedder: Embedder,
    folder: Path,
    groups: frozenset[str] | None,
    *,
    caller: Groups = None,
    prune: bool = False,
) -> IngestReport:
    return ingest(
        corpus,
        embedder,
        embedder.tokenizer,
        [folder],
        settings=SETTINGS.ingest,
        groups=groups,
        caller=caller,
        prune=prune,
    )


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    return {
        "a": write(tmp_path / "a", GROUP_A),
        "b": write(tmp_path / "b", GROUP_B),
        "open": write(tmp_path / "open", UNTAGGED),
    }


@pytest.fixture
def corpus(tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]) -> Iterator[Corpus]:
    with Corpus.create(tmp_path / "corpus.db", embedder.model_id, embedder.dim) as created:
        run(created, embedder, folders["a"], A)
        run(created, embedder, folders["b"], B)
        run(created, embedder, folders["open"], frozenset())
        yield created


def names(sources: Sequence[str]) -> set[str]:
    return {Path(source).name for source in sources}


@pytest.mark.parametrize("mode", MODES)
def test_others_documents_never_push_a_callers_own_out_of_its_top_k(
    corpus: Corpus, embedder: OnnxEmbedder, mode: Mode
) -> None:
    retriever = Retriever(corpus, embedder, candidates=4)
    unfiltered = names(
        [h.chunk.source for h in retriever.search(QUESTION, 3, mode, view=EVERYTHING)]
    )
    assert unfiltered and unfiltered <= set(GROUP_B)  # group B outranks A everywhere
    seen_by_a = names(
        [h.chunk.source for h in retriever.search(QUESTION, 3, mode, view=CorpusView.of(A))]
    )
    assert "a-notes.txt" in seen_by_a
    assert seen_by_a <= set(GROUP_A) | set(UNTAGGED)
    seen_by_b = names(
        [h.chunk.source for h in retriever.search(QUESTION, 3, mode, view=CorpusView.of(B))]
    )
    assert seen_by_b and seen_by_b <= set(GROUP_B) | set(UNTAGGED)


def test_the_vector_search_filters_before_k(corpus: Corpus, embedder: OnnxEmbedder) -> None:
    vector = embedder.embed([QUESTION])[0]
    [(nearest, _)] = corpus.search_vec(vector, 1, view=CorpusView.of(A))
    assert names([corpus.get_chunks([nearest])[nearest].source]) == {"a-notes.txt"}
    [(match, _)] = corpus.search_terms(["aurora"], 1, view=CorpusView.of(A))
    assert names([corpus.get_chunks([match])[match].source]) == {"a-notes.txt"}


def test_the_support_check_hears_of_a_name_only_in_what_the_caller_sees(corpus: Corpus) -> None:
    """A name the passages lack is left to the LLM when the corpus holds it; a caller must not
    learn, through which sentences are shown, that a hidden document holds a word."""
    assert mentions(corpus, "Cabin", CorpusView.of(A)) and mentions(
        corpus, "cabin", view=EVERYTHING
    )
    assert not mentions(corpus, "cabin", CorpusView.of(B))
    assert not mentions(corpus, "cabin", CorpusView.of(()))
    assert mentions(corpus, "dough", CorpusView.of(B))  # untagged: everyone's
    assert not mentions(corpus, "lake-cabin", view=EVERYTHING)  # a compound is not one indexed word


def test_untagged_documents_are_seen_by_every_caller_and_an_empty_set_sees_only_them(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    retriever = Retriever(corpus, embedder)
    for groups in (A, B, frozenset({"c"}), frozenset()):
        hits = retriever.search("bread dough oven", 20, "bm25", view=CorpusView.of(groups))
        assert "bread.txt" in names([h.chunk.source for h in hits])
    nobody = retriever.search(QUESTION, 20, "hybrid", view=CorpusView.of(frozenset()))
    assert names([h.chunk.source for h in nobody]) == set(UNTAGGED)
    everyone = retriever.search(QUESTION, 20, "bm25", view=EVERYTHING)
    assert names([h.chunk.source for h in everyone]) == set(GROUP_A) | set(GROUP_B)


def test_a_retag_changes_who_sees_a_document_without_embedding_it_again(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    counting = CountingEmbedder(embedder)
    with Corpus.create(tmp_path / "retag.db", embedder.model_id, embedder.dim) as corpus:
        run(corpus, counting, folders["a"], A)
        source = str(folders["a"] / "a-notes.txt")
        chunks_before, embedded = corpus.chunk_ids(), counting.texts
        assert corpus.document(source).groups == A  # type: ignore[union-attr]

        report = run(corpus, counting, folders["a"], frozenset({"b", "c"}))
        assert (report.retagged, report.unchanged, report.updated, report.added) == (1, 0, 0, 0)
        assert report.chunks_written == 0 and counting.texts == embedded
        assert corpus.chunk_ids() == chunks_before
        assert corpus.document(source).groups == {"b", "c"}  # type: ignore[union-attr]
        retriever = Retriever(corpus, embedder)
        assert retriever.search(QUESTION, 5, view=CorpusView.of(A)) == []
        assert retriever.search(QUESTION, 5, view=CorpusView.of(frozenset({"c"})))

        again = run(corpus, counting, folders["a"], frozenset({"b", "c"}))
        assert (again.retagged, again.unchanged) == (0, 1)
        untagged = run(corpus, counting, folders["a"], frozenset())
        assert untagged.retagged == 1 and counting.texts == embedded
        assert retriever.search(QUESTION, 5, view=CorpusView.of(frozenset({"x"})))


def test_a_changed_document_keeps_the_groups_of_the_ingest_that_reindexes_it(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    with Corpus.create(tmp_path / "edit.db", embedder.model_id, embedder.dim) as corpus:
        run(corpus, embedder, folders["a"], A)
        path = folders["a"] / "a-notes.txt"
        path.write_text(path.read_text() + " The next night it was bright green.")
        report = run(corpus, embedder, folders["a"], B)
        assert (report.updated, report.retagged) == (1, 0)
        assert corpus.document(str(path)).groups == B  # type: ignore[union-attr]


def test_an_ingest_without_groups_keeps_each_stored_documents_groups(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    with Corpus.create(tmp_path / "keep.db", embedder.model_id, embedder.dim) as corpus:
        run(corpus, embedder, folders["a"], A)
        path = folders["a"] / "a-notes.txt"
        assert run(corpus, embedder, folders["a"], None).unchanged == 1
        assert groups_of(corpus, path) == A
        path.write_text(path.read_text() + " The next night it was bright green.")
        new = write(folders["a"], {"a-later.txt": "A later note about the lake cabin."})
        report = run(corpus, embedder, folders["a"], None)
        assert (report.updated, report.added, report.retagged) == (1, 1, 0)
        assert groups_of(corpus, path) == A  # edited, still A's
        assert groups_of(corpus, new / "a-later.txt") == frozenset()  # new: the owner's (none)
        untagged = run(corpus, embedder, folders["a"], frozenset())  # an explicit []: untag
        assert untagged.retagged == 1 and groups_of(corpus, path) == frozenset()


def test_a_callers_ingest_leaves_documents_it_cannot_see_unchanged(
    corpus: Corpus, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    b_files = sorted(folders["b"].iterdir())
    edited, deleted = b_files[0], b_files[1]
    edited.write_text("Rewritten by someone of group A.")
    deleted.unlink()
    chunks_before = corpus.chunk_ids()
    for asked in (None, A, frozenset()):
        report = run(corpus, embedder, folders["b"], asked, caller=A, prune=True)
        assert report.errors == [(str(f), REFUSED) for f in b_files if f != deleted]
        assert (report.added, report.updated, report.retagged, report.pruned) == (0, 0, 0, 0)
    assert corpus.chunk_ids() == chunks_before
    for path in b_files:
        assert groups_of(corpus, path) == B
    stored = corpus.document(str(edited))
    assert stored is not None and "Aurora" in corpus.document_text(stored.id)

    new = write(folders["b"], {"a-plan.txt": "A's own plan for the cabin."}) / "a-plan.txt"
    shared = run(corpus, embedder, folders["open"], None, caller=A)
    assert (shared.unchanged, groups_of(corpus, folders["open"] / "bread.txt")) == (1, frozenset())
    assert run(corpus, embedder, folders["b"], None, caller=A).added == 1
    assert groups_of(corpus, new) == A  # a new document gets the caller's groups
    with pytest.raises(ValueError, match="may not tag documents with b"):
        Tagging(A, B)


def test_a_renamed_or_moved_document_keeps_its_groups(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    """A rename inside a synced folder (one pruning ingest) and a move to a folder ingested
    later: the file is new under its new name, yet its document stays group A's."""
    with Corpus.create(tmp_path / "moves.db", embedder.model_id, embedder.dim) as corpus:
        run(corpus, embedder, folders["a"], A)
        note = folders["a"] / "a-notes.txt"
        renamed = note.rename(folders["a"] / "renamed.txt")
        report = run(corpus, embedder, folders["a"], None, prune=True)  # a watcher's sync
        assert (report.added, report.pruned) == (1, 1)
        assert groups_of(corpus, renamed) == A
        elsewhere = write(tmp_path / "elsewhere", {})
        moved = renamed.rename(elsewhere / "moved.txt")
        assert run(corpus, embedder, elsewhere, None).added == 1  # no prune: both stored
        assert groups_of(corpus, moved) == A
        assert names(corpus.list_sources()) == {"renamed.txt", "moved.txt"}
        assert Retriever(corpus, embedder).search(QUESTION, 5, view=CorpusView.of(B)) == []


def test_a_document_moved_out_of_a_synced_folder_gets_its_groups_back_where_it_lands(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    """Its folder's sync prunes it before anything sees it arrive elsewhere; the corpus keeps
    the groups of its text, and an ingest of where it landed gives them back."""
    with Corpus.create(tmp_path / "out.db", embedder.model_id, embedder.dim) as corpus:
        run(corpus, embedder, folders["a"], A)
        run(corpus, embedder, folders["open"], frozenset())
        moved = (folders["a"] / "a-notes.txt").rename(folders["open"] / "landed.txt")
        assert run(corpus, embedder, folders["a"], None, prune=True).pruned == 1
        assert names(corpus.list_sources()) == {"bread.txt"}
        report = run(corpus, embedder, folders["open"], None, prune=True)
        assert (report.added, report.unchanged) == (1, 1)
        assert groups_of(corpus, moved) == A


def test_a_caller_cannot_take_in_the_moved_text_of_a_document_it_cannot_see(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    with Corpus.create(tmp_path / "taken.db", embedder.model_id, embedder.dim) as corpus:
        run(corpus, embedder, folders["a"], A)
        elsewhere = write(tmp_path / "elsewhere", {})
        taken = (folders["a"] / "a-notes.txt").rename(elsewhere / "taken.txt")
        for asked in (None, B):
            report = run(corpus, embedder, elsewhere, asked, caller=B)
            assert (report.errors, report.added) == ([(str(taken), REFUSED)], 0)
        assert str(taken) not in corpus.list_sources()
        assert run(corpus, embedder, elsewhere, None, caller=A).added == 1
        assert groups_of(corpus, taken) == A


def test_a_watched_folders_default_groups_tag_new_files_only(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    with Corpus.create(tmp_path / "default.db", embedder.model_id, embedder.dim) as corpus:
        run(corpus, embedder, folders["a"], A)
        (folders["a"] / "a-notes.txt").rename(folders["open"] / "moved.txt")
        report = ingest(
            corpus,
            embedder,
            embedder.tokenizer,
            [folders["open"]],
            settings=SETTINGS.ingest,
            prune=True,
            default_groups={folders["open"]: frozenset({"team"})},
        )
        assert (report.added, report.retagged) == (2, 0)
        assert groups_of(corpus, folders["open"] / "bread.txt") == {"team"}
        assert groups_of(corpus, folders["open"] / "moved.txt") == A  # moved: keeps A
        stored = ingest(
            corpus,
            embedder,
            embedder.tokenizer,
            [folders["open"]],
            settings=SETTINGS.ingest,
            default_groups={folders["open"]: frozenset({"other"})},
        )
        assert stored.unchanged == 2 and groups_of(corpus, folders["open"] / "bread.txt") == {
            "team"
        }


def test_each_watched_folder_gives_its_new_files_its_own_groups_and_a_move_keeps_its_own(
    tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """Per-folder defaults (`--watch-root DIR=GROUPS`): the innermost watched folder holding a
    new file decides; a file moved into another team's folder keeps its own groups, whether
    the move is seen in one sync or as a prune and a later add."""
    teams = write(tmp_path / "teams", {"handbook.txt": "Staff handbook: doors open at eight."})
    finance = write(teams / "finance", {"ledger.txt": "Ledger: the quarterly travel costs."})
    hr = write(teams / "hr", {"leave.txt": "Leave policy: thirty days a year."})
    staff, fin, people = frozenset({"staff"}), frozenset({"finance"}), frozenset({"hr"})
    with Corpus.create(tmp_path / "teams.db", embedder.model_id, embedder.dim) as corpus:

        def sync(*folders: Path) -> IngestReport:
            defaults = {teams: staff, finance: fin, hr: people}
            return ingest(
                corpus,
                embedder,
                embedder.tokenizer,
                list(folders),
                settings=SETTINGS.ingest,
                prune=True,
                default_groups=defaults,
            )

        assert sync(teams).added == 3
        assert groups_of(corpus, teams / "handbook.txt") == staff
        assert groups_of(corpus, finance / "ledger.txt") == fin
        assert groups_of(corpus, hr / "leave.txt") == people
        (finance / "ledger.txt").rename(hr / "ledger.txt")
        assert sync(hr, finance).pruned == 1
        assert groups_of(corpus, hr / "ledger.txt") == fin
        (hr / "ledger.txt").rename(tmp_path / "ledger.txt")  # out of every watched folder
        assert sync(hr).pruned == 1
        (tmp_path / "ledger.txt").rename(teams / "ledger.txt")
        assert sync(teams).added == 1
        assert groups_of(corpus, teams / "ledger.txt") == fin
        assert corpus.stats(view=CorpusView.of(people)).documents == 1


def test_a_prune_removes_what_a_folder_held_through_a_link_once_the_link_is_gone(
    tmp_path: Path, folders: dict[str, Path]
) -> None:
    """A file named through a link is stored under its real path, which no prune of the
    link's folder looked at: the path it was reached by is kept, so once that path leads to
    it no more, `ingest --prune` of the folder removes it; while it does, it stays."""
    outside = write(tmp_path / "outside", {"secret.txt": "Reached through a link.", "own.txt": "x"})
    link = folders["open"] / "link.txt"
    link.symlink_to(outside / "secret.txt")
    db = str(tmp_path / "reached.db")
    assert invoke("ingest", "--db", db, str(link)).exit_code == 0
    assert invoke("ingest", "--db", db, str(outside / "own.txt")).exit_code == 0
    prune = ("ingest", "--db", db, "--prune", str(folders["open"]), "--json")
    kept = json.loads(invoke(*prune).stdout)
    assert kept["pruned"] == 0 and [e[0] for e in kept["errors"]] == [str(link)]
    link.unlink()
    assert json.loads(invoke(*prune).stdout)["pruned"] == 1
    with Corpus.open(db, readonly=True) as corpus:
        assert names(corpus.list_sources()) == {"bread.txt", "own.txt"}


def test_a_prune_through_a_folder_link_pointed_elsewhere_removes_what_it_no_longer_holds(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    notes = tmp_path.resolve() / "notes"
    notes.symlink_to(folders["a"])
    with Corpus.create(tmp_path / "retarget.db", embedder.model_id, embedder.dim) as corpus:
        assert run(corpus, embedder, notes, None, prune=True).added == 1
        notes.unlink()
        notes.symlink_to(folders["open"])
        report = run(corpus, embedder, notes, None, prune=True)
        assert (report.added, report.pruned) == (1, 1)
        assert names(corpus.list_sources()) == {"bread.txt"}


def test_a_link_out_of_a_synced_folder_is_refused_in_one_line(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path]
) -> None:
    outside = write(tmp_path / "outside", {"secret.txt": "Outside the watched folder."})
    (folders["open"] / "link.txt").symlink_to(outside / "secret.txt")
    with Corpus.create(tmp_path / "links.db", embedder.model_id, embedder.dim) as corpus:
        report = run(corpus, embedder, folders["open"], None, prune=True)
        [(source, reason)] = report.errors
        assert source == str(folders["open"] / "link.txt") and "\n" not in reason
        assert reason.startswith("a symbolic link out of the folder")
        assert names(corpus.list_sources()) == {"bread.txt"}


@pytest.mark.parametrize("replacement", ["fifo", "link out", "broken link", "folder"])
def test_an_indexed_file_replaced_by_no_regular_file_is_pruned_at_the_next_sync(
    tmp_path: Path, embedder: OnnxEmbedder, folders: dict[str, Path], replacement: str
) -> None:
    """A link, a pipe or a folder where the file was is not the file that was indexed: its
    document goes at that sync, confined to roots (the service) or not (`ingest --watch`)."""
    outside = write(tmp_path / "outside", {"secret.txt": "Outside the watched folder."})
    bread = folders["open"] / "bread.txt"
    for roots in (None, [folders["open"]]):
        with Corpus.create(tmp_path / f"{roots is None}.db", embedder.model_id, embedder.dim) as c:
            run(c, embedder, folders["open"], None)
            bread.unlink()
            if replacement == "fifo":
                os.mkfifo(bread)
            elif replacement == "folder":
                write(bread, {"inner.txt": "A note in a folder named like the file."})
            else:
                target = outside / "secret.txt" if replacement == "link out" else bread.parent
                bread.symlink_to(target / "x.txt" if replacement == "broken link" else target)
            report = ingest(
                c,
                embedder,
                embedder.tokenizer,
                [folders["open"]],
                settings=SETTINGS.ingest,
                prune=True,
                roots=roots,
            )
            assert report.pruned == 1, report
            assert str(bread) not in c.list_sources()
            assert str(outside / "secret.txt") not in c.list_sources()
        restore(bread)


def restore(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()
    write(path.parent, UNTAGGED)


def groups_of(corpus: Corpus, path: Path) -> frozenset[str]:
    stored = corpus.document(str(path))
    assert stored is not None, path
    return stored.groups


def test_stats_count_only_what_the_caller_sees(corpus: Corpus) -> None:
    everything = corpus.stats(view=EVERYTHING)
    assert everything.documents == len(GROUP_A) + len(GROUP_B) + len(UNTAGGED)
    seen_by_a = corpus.stats(view=CorpusView.of(A))
    assert seen_by_a.documents == len(GROUP_A) + len(UNTAGGED)
    assert seen_by_a.chunks == len(
        corpus.search_terms(["aurora", "bread"], 100, view=CorpusView.of(A))
    )
    b_chunk = corpus.search_terms(["forecast"], 1, view=CorpusView.of(B))[0][0]
    a_chunk = corpus.search_terms(["cabin"], 1, view=CorpusView.of(A))[0][0]
    assert corpus.score_cache().put("tier:v", QUESTION, {a_chunk: 0.9, b_chunk: 0.8})
    assert (
        corpus.stats(view=CorpusView.of(A)).cached_scores,
        corpus.stats(view=EVERYTHING).cached_scores,
    ) == (1, 2)
    assert corpus.stats(view=CorpusView.of(frozenset({"z"}))).documents == len(UNTAGGED)


def test_the_local_fallback_corpus_is_searched_with_the_callers_groups(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    provider = LocalCorpusProvider(corpus.path, embedder, max_results=5)
    try:
        for_a = provider.search(QUESTION, 5, view=CorpusView.of(A))
        assert names([h.chunk.metadata["fallback"]["source"] for h in for_a]) <= set(GROUP_A) | set(
            UNTAGGED
        )
        assert "a-notes.txt" in names([h.chunk.metadata["fallback"]["source"] for h in for_a])
        everything = provider.search(QUESTION, 5, view=EVERYTHING)
        assert names([h.chunk.metadata["fallback"]["source"] for h in everything]) <= set(GROUP_B)
        outcome = run_fallbacks([provider], QUESTION, 5, 10.0, view=CorpusView.of(B))
        sources = names([h.chunk.metadata["fallback"]["source"] for h in outcome.hits])
        assert outcome.used == ["local"] and sources and sources <= set(GROUP_B) | set(UNTAGGED)
    finally:
        provider.close()


def test_a_version_4_corpus_reads_as_untagged_and_gains_groups_on_a_writable_open(
    corpus: Corpus, embedder: OnnxEmbedder
) -> None:
    path = corpus.path
    corpus.close()
    conn = connect(path)
    with conn:  # the file as crag-edge wrote it before documents had access groups
        conn.execute("DROP TABLE reached_paths")
        conn.execute("DROP TABLE jobs")
        conn.execute("DROP TABLE chunk_bits")
        conn.execute("DROP TABLE document_groups")
        conn.execute("PRAGMA user_version = 4")
    conn.close()
    with Corpus.open(path, readonly=True) as old:
        assert old.stats(view=CorpusView.of(A)).documents == old.stats(view=EVERYTHING).documents
        assert (
            len(Retriever(old, embedder).search(QUESTION, 20, "bm25", view=CorpusView.of(A))) == 13
        )
    with Corpus.open(path) as upgraded:
        assert upgraded.stats(view=EVERYTHING).schema_version == SCHEMA_VERSION
        assert (
            upgraded.stats(view=CorpusView.of(A)).documents
            == upgraded.stats(view=EVERYTHING).documents
        )
        source = upgraded.list_sources()[0]
        assert upgraded.set_groups(source, B)
        assert (
            upgraded.stats(view=CorpusView.of(A)).documents
            == upgraded.stats(view=EVERYTHING).documents - 1
        )


def test_group_names_are_checked() -> None:
    assert parse_groups(" finance, hr ,finance") == {"finance", "hr"}
    for bad in ("", " , ", "fin ance", "a;b", "x" * 65, "ünï"):
        with pytest.raises(ValueError, match="group"):
            parse_groups(bad)


# -- the command line ---------------------------------------------------------------------

runner = CliRunner()
FAST = {
    "CRAG_EDGE_GRADING_TIERS": '["signals"]',
    "CRAG_EDGE_REWRITE_WITH_LLM": "false",
    "CRAG_EDGE_CHUNK_TOKENS": "64",
    "CRAG_EDGE_CHUNK_OVERLAP": "8",
}


def invoke(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), env=FAST, catch_exceptions=False)


def test_cli_ingest_tags_and_query_answers_as_a_caller_of_those_groups(
    tmp_path: Path, folders: dict[str, Path]
) -> None:
    db = str(tmp_path / "cli.db")
    for folder, groups in ((folders["a"], "a"), (folders["b"], "b,c")):
        result = invoke("ingest", "--db", db, str(folder), "--groups", groups, "--json")
        assert result.exit_code == 0, result.output
    retag = invoke("ingest", "--db", db, str(folders["a"]), "--groups", "c", "--json")
    assert json.loads(retag.stdout)["retagged"] == 1

    result = invoke("query", "--db", db, QUESTION, "--groups", "b", "--json")
    assert result.exit_code == 0, result.output
    hits = [hit["source"] for hit in json.loads(result.stdout)["hits"]]
    assert hits and names(hits) <= set(GROUP_B)
    result = invoke("query", "--db", db, QUESTION, "--groups", "a", "--json")
    assert json.loads(result.stdout)["hits"] == []  # a-notes.txt is in group c now

    stats = invoke("stats", "--db", db, "--groups", "c", "--json")
    assert json.loads(stats.stdout)["documents"] == len(GROUP_A) + len(GROUP_B)
    stats = invoke("stats", "--db", db, "--groups", "a", "--json")
    assert json.loads(stats.stdout)["documents"] == 0


def test_cli_refuses_a_bad_group_name_in_one_line(tmp_path: Path, folders: dict[str, Path]) -> None:
    db = str(tmp_path / "bad.db")
    result = invoke("ingest", "--db", db, str(folders["a"]), "--groups", "fin ance")
    assert result.exit_code == 2
    assert "invalid group name 'fin ance'" in result.output and "Traceback" not in result.output
    assert not Path(db).exists()


def test_cli_ingest_keeps_groups_without_the_option_and_untags_with_an_empty_one(
    tmp_path: Path, folders: dict[str, Path]
) -> None:
    db = str(tmp_path / "keep.db")

    def seen_by_b() -> int:
        stats = invoke("stats", "--db", db, "--groups", "b", "--json")
        return int(json.loads(stats.stdout)["documents"])

    assert invoke("ingest", "--db", db, str(folders["a"]), "--groups", "a").exit_code == 0
    plain = json.loads(invoke("ingest", "--db", db, str(folders["a"]), "--json").stdout)
    assert (plain["unchanged"], plain["retagged"], seen_by_b()) == (1, 0, 0)
    untag = invoke("ingest", "--db", db, str(folders["a"]), "--groups", "", "--json")
    assert (json.loads(untag.stdout)["retagged"], seen_by_b()) == (1, 1)


def test_serve_takes_groups_only_for_its_watch_roots_in_one_line(
    tmp_path: Path, folders: dict[str, Path]
) -> None:
    db = str(tmp_path / "serve.db")
    assert invoke("ingest", "--db", db, str(folders["open"])).exit_code == 0
    alone = invoke("serve", "--db", db, "--groups", "finance")
    bad = invoke("serve", "--db", db, "--watch-root", str(folders["a"]), "--groups", "fin ance")
    assert alone.exit_code == bad.exit_code == 2
    assert "--groups names the groups of the --watch-root folders" in alone.output
    assert "invalid group name 'fin ance'" in bad.output
    assert "Traceback" not in alone.output + bad.output


@pytest.mark.parametrize("command", ["serve", "ingest"])
def test_a_watched_folders_own_groups_are_checked_in_one_line(
    tmp_path: Path, folders: dict[str, Path], command: str
) -> None:
    db = str(tmp_path / "roots.db")
    assert invoke("ingest", "--db", db, str(folders["open"])).exit_code == 0
    a, also_a = str(folders["a"]), str(folders["a"] / ".." / "a")
    cases = [
        ([f"{a}=fin ance"], "invalid group name 'fin ance'"),
        (["=finance"], "names no folder before '='"),
        ([f"{a}=x", f"{also_a}=y"], "given twice with different groups"),
        ([f"{tmp_path / 'missing'}=x"], "missing"),
    ]
    for given, why in cases:
        if command == "serve":
            roots = [arg for root in given for arg in ("--watch-root", root)]
            result = invoke("serve", "--db", db, *roots)
        else:
            result = invoke("ingest", "--db", db, "--watch", *given)
        said = " ".join(result.output.replace("│", " ").split())  # typer boxes usage errors
        assert result.exit_code == 2 and why in said and "Traceback" not in said, said
