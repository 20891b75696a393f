"""Search without the model in every face: the snippet and its marks, `crag-edge search`
(plain and --json, group-filtered), `/v1/search` on a live server whose tokens carry groups,
and the CLI's suggestion for a mistyped command. (MCP's `search`: tests/test_mcp.py.)"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.retrieval.passages import ELLIPSIS, snippet
from crag_edge.store.fts_terms import terms
from crag_edge.text_boundary import QuestionError

pytest.importorskip("fastapi")

from crag_edge.server import ServerConfig
from crag_edge.server.tokens import TokenFile
from tests.test_server import FAST, Running, factory_for, running, wait_job

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
WAL = "How does SQLite write-ahead logging work?"
OWNER_TOKEN = "owner-secret"
runner = CliRunner()
# Two tagged documents, each with a word found nowhere else, beside the untagged sample.
TAGGED = {
    "alpha": "# Alpha vault\n\nThe alpha vault opens with the code quokkafjord every morning.\n",
    "bravo": "# Bravo vault\n\nThe bravo vault opens with the code wombatsund every evening.\n",
}


def marked(found: dict[str, Any]) -> list[str]:
    return [found["snippet"][start:end] for start, end in found["marks"]]


def test_a_snippet_marks_the_words_a_search_matches_and_is_cut_at_words() -> None:
    text = "Bees " * 80 + "Honeybees dance in the hive to show where flowers are. " + "Bees " * 80
    cut = snippet(text, set(terms("dancing flower")), width=80)
    words = [cut.text[start:end] for start, end in cut.marks]
    assert words == ["dance", "flowers"]  # Porter stems: as the lexical index matches
    assert cut.text.startswith(ELLIPSIS) and cut.text.endswith(ELLIPSIS)
    inner = cut.text.strip(ELLIPSIS)
    assert inner.split()[0] in text.split() and inner.split()[-1] in text.split()  # whole words


def test_a_snippet_without_the_words_is_the_start_of_the_text() -> None:
    cut = snippet("Tabs\tand\nnew lines become single spaces. " * 20, {"absent"}, width=40)
    assert cut.marks == () and cut.text.startswith("Tabs and new lines become")
    assert "\t" not in cut.text and cut.text.endswith(ELLIPSIS)
    short = snippet("naïve café — naïve", set(terms("naive")))
    assert [short.text[s:e] for s, e in short.marks] == ["naïve", "naïve"]  # characters


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Path:
    base = tmp_path_factory.mktemp("search")
    for group, text in TAGGED.items():
        (base / "root" / group).mkdir(parents=True)
        (base / "root" / group / f"{group}-vault.md").write_text(text, encoding="utf-8")
    db = base / "corpus.db"
    with Engine.open(db, Settings.load(**FAST), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
        for group in TAGGED:
            engine.ingest([base / "root" / group], groups=frozenset({group}))
    return db


def search(*args: str) -> Any:
    return runner.invoke(app, ["search", *args], catch_exceptions=False)


def test_search_prints_ranked_passages_with_their_places(corpus: Path) -> None:
    result = search(WAL, "--db", str(corpus), "--top-k", "3")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("1. sqlite-wal.md § SQLite write-ahead logging  rrf ")
    assert [line.split(".")[0] for line in lines[::2]] == ["1", "2", "3"]
    assert all(line.startswith("   ") for line in lines[1::2])  # each rank's snippet


def test_search_json_gives_passages_with_locators_and_marks(corpus: Path) -> None:
    result = search(WAL, "--db", str(corpus), "--json")
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["question"] == WAL and len(found["passages"]) == Settings().retrieval.top_k
    first = found["passages"][0]
    assert first["rank"] == 1 and first["source"].endswith("sqlite-wal.md")
    assert first["locator"] == "sqlite-wal.md § SQLite write-ahead logging"
    assert {"write", "logging"} <= {word.lower() for word in marked(first)}
    assert first["bm25_score"] > 0 and first["dense_score"] > 0 and "grade" not in first


def test_search_sees_only_what_the_groups_may(corpus: Path) -> None:
    def sources(*groups: str) -> list[str]:
        result = search("quokkafjord wombatsund vault code", "--db", str(corpus), "--json", *groups)
        assert result.exit_code == 0, result.output
        return [Path(p["source"]).name for p in json.loads(result.stdout)["passages"]]

    assert {"alpha-vault.md", "bravo-vault.md"} <= set(sources())  # the owner sees both
    assert "alpha-vault.md" in sources("--groups", "alpha")
    assert "bravo-vault.md" not in sources("--groups", "alpha")
    assert not {"alpha-vault.md", "bravo-vault.md"} & set(sources("--groups", "nobody"))


def test_a_question_without_words_is_a_usage_error(corpus: Path) -> None:
    result = search("???", "--db", str(corpus))
    assert result.exit_code == 2 and "the question has no words" in result.output
    with Engine.open(corpus, Settings.load(**FAST)) as engine, pytest.raises(QuestionError):
        engine.search_passages("   ")


def test_a_mistyped_command_names_the_nearest_one() -> None:
    result = runner.invoke(app, ["serch", "bees"])
    assert result.exit_code == 2
    assert "No such command 'serch'. Did you mean 'search'" in " ".join(result.output.split())
    typo = runner.invoke(app, ["documnts"])
    assert typo.exit_code == 2 and "Did you mean 'documents'?" in " ".join(typo.output.split())


# -- /v1/search on a live server --------------------------------------------------------------


@pytest.fixture(scope="module")
def service(corpus: Path, embedder: Any) -> Iterator[tuple[Running, dict[str, str]]]:
    tokens = corpus.parent / "tokens.db"
    secrets = {group: TokenFile(tokens).add(group, "query", frozenset({group})) for group in TAGGED}
    settings = ServerSettings(api_token=OWNER_TOKEN, tokens_file=tokens)
    config = ServerConfig(db=corpus, settings=settings, ingest_roots=(corpus.parent / "root",))
    with running(config, factory_for(corpus, embedder)) as handle:
        yield handle, secrets


def test_the_search_route_answers_passages_as_the_cli_does(
    service: tuple[Running, dict[str, str]],
) -> None:
    handle, _ = service
    with handle.client() as client:
        reply = client.post("/v1/search", json={"question": WAL, "top_k": 2})
        blank = client.post("/v1/search", json={"question": "  "})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert [p["rank"] for p in body["passages"]] == [1, 2]
    assert body["passages"][0]["locator"] == "sqlite-wal.md § SQLite write-ahead logging"
    assert {"write", "logging"} <= {word.lower() for word in marked(body["passages"][0])}
    assert blank.status_code == 422


def test_a_token_never_finds_another_groups_document(
    service: tuple[Running, dict[str, str]],
) -> None:
    handle, secrets = service
    aimed_at_bravo = {"question": "the code wombatsund of the bravo vault"}
    with handle.client() as owner, handle.client(token=secrets["alpha"]) as alpha:
        unfiltered = owner.post("/v1/search", json=aimed_at_bravo).json()["passages"]
        own = alpha.post("/v1/search", json={"question": "the alpha vault code quokkafjord"})
        filtered = alpha.post("/v1/search", json=aimed_at_bravo)
    assert unfiltered[0]["source"].endswith("bravo-vault.md")  # found without the filter
    assert own.json()["passages"][0]["source"].endswith("alpha-vault.md")
    assert filtered.status_code == 200
    passages = json.dumps(filtered.json()["passages"])  # the question echoes its own words
    assert passages != "[]" and "wombatsund" not in passages and "bravo-vault" not in passages


def test_http_ingest_leaves_out_what_exclude_matches(
    service: tuple[Running, dict[str, str]], corpus: Path
) -> None:
    handle, _ = service
    root = corpus.parent / "root" / "extra"
    (root / "toc").mkdir(parents=True)
    (root / "guide.md").write_text("# Guide\n\nThe guide explains the vault.\n")
    (root / "guide.fr.md").write_text("# Guide\n\nLe guide explique le coffre.\n")
    (root / "toc" / "contents.md").write_text("# Contents\n\nGuide, vault.\n")
    with handle.client() as owner:
        bad = owner.post("/v1/ingest", json={"paths": ["extra"], "exclude": ["/abs/*"]})
        started = owner.post(
            "/v1/ingest", json={"paths": ["extra"], "exclude": ["*.fr.md", "toc/*"]}
        )
        assert started.status_code == 202, started.text
        job = wait_job(owner, started.json()["job"]["id"])
    assert bad.status_code == 422 and bad.json()["error"] == "invalid_exclude"
    assert job["state"] == "succeeded", job
    assert (job["report"]["added"], job["report"]["excluded"]) == (1, 2)
