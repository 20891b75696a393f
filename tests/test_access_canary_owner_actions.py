"""Canaries through owner actions: an `hr` token never gets one byte of `finance`'s documents
back, nor a count or score that moves with them, while the owner renames finance's file,
moves it within its folder, into hr's watched folder and out of both, ingests a file through
a link and removes the link, and the watcher syncs after each step.

One live service watches two folders with their own default groups (`finance` and `hr`,
as `serve --watch-root DIR=GROUPS` gives them) and lets tokens ingest under the whole root.
At every step the hr token asks through every route that can return content or counts
(`probe`); the admin token is shown to find the finance canary each time, so a finance
document that vanished would fail as surely as one that leaked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView
from crag_edge.ingest.pipeline import REFUSED
from crag_edge.ingest.pipeline import ingest as pipeline_ingest
from crag_edge.server import ServerConfig
from crag_edge.server.tokens import ENV_TOKEN_NAME, TokenFile
from crag_edge.store import Corpus
from tests.live_service import SETTINGS, TOKEN
from tests.test_access_canary import chat, holds, mcp_replies
from tests.test_server import Running, factory_for, running, wait_job

EVERYTHING = CorpusView.everything()  # the owner's view: every document

pytestmark = pytest.mark.models

FINANCE_CANARY, HR_CANARY = "FINANCE-CANARY-5d1e", "HR-CANARY-20b7"
FINANCE_TEXT = (
    f"# Budget freeze code {FINANCE_CANARY}\n\nThe budget freeze code is {FINANCE_CANARY}. "
    "Controllers enter the budget freeze code before the quarterly payroll run.\n"
)
HR_TEXT = (
    f"# Leave request code {HR_CANARY}\n\nThe leave request code is {HR_CANARY}. Managers "
    "approve the leave request before the quarterly payroll run.\n"
)
# Reached through a link in finance's folder, stored under its real path outside it.
FORECAST_CANARY = "FORECAST-CANARY-9c3a"
FORECAST_TEXT = f"# Forecast seal {FORECAST_CANARY}\n\nThe forecast seal is {FORECAST_CANARY}.\n"
ASK_FINANCE = "What is the budget freeze code?"
ASK_HR = "What is the leave request code?"
LEXICAL = "quarterly payroll run"  # words both documents hold
HR, FINANCE = frozenset({"hr"}), frozenset({"finance"})


@dataclass
class Site:
    """The running service, its root, its corpus file, the tokens' secrets by name and the
    embedder (for the owner's own ingest beside the service)."""

    running: Running
    root: Path
    db: Path
    secrets: dict[str, str]
    embedder: Any
    leaks: list[str] = field(default_factory=list)

    def client(self, name: str) -> httpx.Client:
        return self.running.client(token=self.secrets[name], timeout=300.0)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Site]:
    base = tmp_path_factory.mktemp("owner-actions").resolve()
    root, db = base / "root", base / "corpus.db"
    for folder in ("finance", "hr", "open", "hr-share"):
        (root / folder).mkdir(parents=True)
    (root / "hr" / "leave.md").write_text(HR_TEXT, encoding="utf-8")
    (root / "hr-share" / "rota.md").write_text("# Rota\n\nDesk duty by week.\n", encoding="utf-8")
    (root / "open" / "canteen.md").write_text("# Canteen\n\nSoup at noon.\n", encoding="utf-8")
    with Engine.open(db, Settings.load(**SETTINGS), create=True, embedder=embedder) as engine:
        engine.ingest([root / "open"])
    file = base / "tokens.db"
    secrets = {ENV_TOKEN_NAME: TOKEN, "hr": TokenFile(file).add("hr", "ingest", HR)}
    config = ServerConfig(
        db=db,
        settings=ServerSettings(api_token=TOKEN, tokens_file=file),
        ingest_roots=(root,),
        watch_roots=(root / "finance", root / "hr-share"),
        watch_groups={root / "finance": FINANCE, root / "hr-share": HR},
    )
    with running(config, factory_for(db, embedder, **SETTINGS)) as handle:
        yield Site(handle, root, db, secrets, embedder)


def wait_for(check: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 120
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def finance_source(site: Site, canary: str = FINANCE_CANARY) -> str | None:
    """Where the admin finds a finance canary (None: nowhere)."""
    with site.client(ENV_TOKEN_NAME) as admin:
        hits = admin.post("/v1/query", json={"question": canary, "mode": "bm25"}).json()
    found = [h["source"] for h in hits["hits"] if holds(h["text"], canary)]
    return found[0] if found else None


def groups_in_file(site: Site, source: str) -> frozenset[str]:
    with Corpus.open(site.db, readonly=True) as corpus:
        stored = corpus.document(source)
    assert stored is not None, source
    return stored.groups


def probe(site: Site, step: str, *, every_route: bool = False) -> None:
    """Ask as hr through the routes; record any body holding finance's canary."""
    bodies: list[tuple[str, str | bytes]] = []
    with site.client("hr") as hr:
        for mode in ("bm25", "dense", "hybrid"):
            body = {"question": ASK_FINANCE, "mode": mode, "top_k": 100}
            bodies.append((f"query {mode}", hr.post("/v1/query", json=body).content))
        for path in ("/v1/stats", "/v1/models"):
            bodies.append((path, hr.get(path).content))
        if every_route:
            ask = {"question": ASK_FINANCE}
            bodies.append(("answer", hr.post("/v1/answer", json=ask).content))
            for stream in (False, True):
                reply = hr.post("/v1/chat/completions", json=chat(ASK_FINANCE, stream=stream))
                bodies.append((f"chat stream={stream}", reply.content))
    if every_route:
        replies = asyncio.run(mcp_replies(site.running.url, site.secrets["hr"], [ASK_FINANCE]))
        bodies += [(f"mcp {tool}", text) for (tool, _), text in replies.items()]
    site.leaks += [
        f"{step}: {route}"
        for route, body in bodies
        if holds(body, FINANCE_CANARY) or holds(body, FORECAST_CANARY)
    ]


def hr_bm25(site: Site) -> list[tuple[str, float]]:
    with site.client("hr") as hr:
        body = {"question": LEXICAL, "mode": "bm25", "top_k": 100}
        hits = hr.post("/v1/query", json=body).json()["hits"]
    return [(h["source"], h["bm25_score"]) for h in hits]


def test_hr_never_sees_finance_through_renames_moves_and_watch_syncs(site: Site) -> None:
    finance = site.root / "finance"
    (finance / "budget.md").write_text(FINANCE_TEXT, encoding="utf-8")
    wait_for(lambda: finance_source(site) == str(finance / "budget.md"), "the first sync")
    assert groups_in_file(site, str(finance / "budget.md")) == FINANCE  # the folder's default
    wait_for(lambda: rota_groups(site) is not None, "hr's folder synced")
    assert rota_groups(site) == HR  # each watched folder's own default

    with site.client("hr") as hr:
        started = hr.post("/v1/ingest", json={"paths": ["hr"]})
        report = wait_job(hr, started.json()["job"]["id"])["report"]
        seen = hr.get("/v1/stats").json()["corpus"]
    assert (report["added"], report["errors"]) == (1, [])
    assert report["passages_encoded"] <= seen["chunks"]  # never a count of finance's chunks
    assert seen["last_ingest_at"] is seen["db_bytes"] is None  # the watcher's syncs move them
    probe(site, "after the first sync", every_route=True)
    scores = hr_bm25(site)
    assert scores and all(holds(source, "leave") for source, _ in scores)

    renamed = (finance / "budget.md").rename(finance / "budget-2027.md")
    wait_for(lambda: finance_source(site) == str(renamed), "the rename synced")
    assert groups_in_file(site, str(renamed)) == FINANCE
    probe(site, "after a rename")

    (finance / "archive").mkdir()
    moved = renamed.rename(finance / "archive" / "budget-2027.md")
    wait_for(lambda: finance_source(site) == str(moved), "the move synced")
    assert groups_in_file(site, str(moved)) == FINANCE
    probe(site, "after a move into a subfolder")

    shared = moved.rename(site.root / "hr-share" / "budget-2027.md")  # into hr's folder
    wait_for(lambda: finance_source(site) == str(shared), "the move between roots synced")
    assert groups_in_file(site, str(shared)) == FINANCE  # its own groups, not hr's default
    probe(site, "after a move into hr's watched folder", every_route=True)

    landed = shared.rename(site.root / "open" / "budget.md")
    wait_for(lambda: finance_source(site) is None, "the move out pruned")
    without_finance = hr_bm25(site)
    assert without_finance == pytest.approx(scores)  # finance's copy of the words counts not
    with site.client(ENV_TOKEN_NAME) as admin:  # the owner ingests where it landed, no groups
        job = admin.post("/v1/ingest", json={"paths": ["open"]}).json()["job"]["id"]
        assert wait_job(admin, job)["report"]["added"] == 1
    assert finance_source(site) == str(landed)
    assert groups_in_file(site, str(landed)) == FINANCE
    with site.client("hr") as hr:  # nor can hr's ingest pull it into hr's view
        job = hr.post("/v1/ingest", json={"paths": ["open"]}).json()["job"]["id"]
        assert {"source": str(landed), "reason": REFUSED} in wait_job(hr, job)["report"]["errors"]
    assert groups_in_file(site, str(landed)) == FINANCE
    assert hr_bm25(site) == pytest.approx(without_finance)
    probe(site, "after a move out and a re-ingest", every_route=True)

    reached_through_link(site)
    assert site.leaks == []


def rota_groups(site: Site) -> frozenset[str] | None:
    with Corpus.open(site.db, readonly=True) as corpus:
        stored = corpus.document(str(site.root / "hr-share" / "rota.md"))
    return None if stored is None else stored.groups


def reached_through_link(site: Site) -> None:
    """The owner ingests a file through a link in finance's folder, tagged finance: it is
    stored under its real path, outside every watched folder. Once the link is gone, the
    next sync of the folder prunes it: no root holds it any more."""
    outside = site.root.parent / "outside"
    outside.mkdir()
    (outside / "forecast.md").write_text(FORECAST_TEXT, encoding="utf-8")
    link = site.root / "finance" / "forecast.md"
    link.symlink_to(outside / "forecast.md")
    settings = Settings.load(**SETTINGS)
    with Engine.open(site.db, settings, embedder=site.embedder) as owner:
        assert owner.ingest([link], groups=FINANCE).added == 1
    assert finance_source(site, FORECAST_CANARY) == str(outside / "forecast.md")
    assert groups_in_file(site, str(outside / "forecast.md")) == FINANCE
    probe(site, "with a document reached through a link")
    link.unlink()
    wait_for(lambda: finance_source(site, FORECAST_CANARY) is None, "the link's document pruned")
    probe(site, "after the link is gone")


def test_an_ingest_counts_only_what_the_caller_may_see(tmp_path: Path, embedder: Any) -> None:
    """The evaluator's readings are filled for the whole corpus after every ingest; a caller
    with groups hears only how many of its own view's were."""
    for folder, text in (("finance", FINANCE_TEXT), ("hr", HR_TEXT)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "doc.md").write_text(text, encoding="utf-8")
    settings = Settings.load(**SETTINGS)
    with Engine.open(tmp_path / "c.db", settings, create=True, embedder=embedder) as engine:
        pipeline_ingest(  # finance's document without the evaluator's readings
            engine.corpus,
            embedder,
            embedder.tokenizer,
            [tmp_path / "finance"],
            settings=settings.ingest,
            groups=FINANCE,
        )
        assert engine.corpus.stats(view=EVERYTHING).stored_passages == 0
        report = engine.ingest([tmp_path / "hr"], caller=HR)
        everything = engine.corpus.stats(view=EVERYTHING)
    assert everything.stored_passages == everything.chunks  # finance's were read too
    assert report.passages_encoded == report.chunks_written < everything.chunks


def test_hr_is_shown_no_cache_hits_and_only_opaque_ids(site: Site) -> None:
    with site.client("hr") as hr, site.client(ENV_TOKEN_NAME) as admin:
        first = hr.post("/v1/query", json={"question": ASK_HR}).json()
        again = hr.post("/v1/query", json={"question": ASK_HR}).json()
        owners = admin.post("/v1/query", json={"question": ASK_HR}).json()
    assert "cache_hits" not in first and "cache_hits" not in again and "cache_hits" in owners
    ids = [hit["doc_id"] for hit in first["hits"]] + [c["chunk_id"] for c in first["context"]]
    assert ids and all(isinstance(i, str) and len(i) > 16 for i in ids)
    assert [h["doc_id"] for h in first["hits"]] == [h["doc_id"] for h in again["hits"]]
    assert all(isinstance(hit["doc_id"], int) for hit in owners["hits"])
