"""Canaries: a token of group `alpha` never gets one byte of group `bravo`'s documents back,
from any endpoint, in any way content can come back.

One live service (the shipped evaluator grades, SmolLM2 answers) over a corpus with one
document of each group, each holding a string found nowhere else, and untagged documents.
Every question aimed at bravo's document is shown once to find it without the filter (an
admin token), and every endpoint is shown to return alpha's canary to alpha's token for the
same kind of question: a filter that hid everything would fail as surely as one that leaks.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("mcp")

from crag_edge.config import ServerSettings, Settings
from crag_edge.engine import Engine
from crag_edge.ingest.pipeline import REFUSED
from crag_edge.server import ServerConfig
from crag_edge.server.tokens import ENV_TOKEN_NAME, TokenFile
from tests.live_service import SETTINGS, TOKEN
from tests.test_server import Running, factory_for, running, wait_job

pytestmark = pytest.mark.models

ALPHA_CANARY, BRAVO_CANARY = "ALPHA-CANARY-7f3a", "BRAVO-CANARY-91c2"
DOCUMENTS = {
    "alpha/alpha-vault.md": f"# Alpha vault access code {ALPHA_CANARY}\n\nThe access code "
    f"of the alpha vault is {ALPHA_CANARY}. Staff open the alpha vault in the north wing "
    "with this access code every morning.\n",
    "bravo/bravo-vault.md": f"# Bravo vault access code {BRAVO_CANARY}\n\nThe access code "
    f"of the bravo vault is {BRAVO_CANARY}. Staff open the bravo vault in the south wing "
    "with this access code every evening.\n",
    "open/canteen.md": "# Canteen\n\nThe canteen serves vegetable soup at noon and closes "
    "at three in the afternoon.\n",
    "open/parking.md": "# Parking\n\nVisitors park on the east lot; staff badges open the "
    "barrier of the west lot.\n",
}
GROUPS = {"alpha": frozenset({"alpha"}), "bravo": frozenset({"bravo"}), "open": frozenset()}
ASK_ALPHA = "What is the access code of the alpha vault?"
ASK_BRAVO = "What is the access code of the bravo vault?"
MODEL = "crag-edge:corpus"


@dataclass
class Canary:
    """The running service, its ingest root, its audit log, the secrets by token name and the
    chunk ids of bravo's document."""

    running: Running
    root: Path
    audit: Path
    secrets: dict[str, str]
    bravo_chunks: set[int]

    def client(self, name: str) -> httpx.Client:
        return self.running.client(token=self.secrets[name], timeout=300.0)


@pytest.fixture(scope="module")
def canary(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Canary]:
    base = tmp_path_factory.mktemp("canary").resolve()
    root, db, audit = base / "root", base / "corpus.db", base / "audit.jsonl"
    for name, text in DOCUMENTS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    with Engine.open(db, Settings.load(**SETTINGS), create=True, embedder=embedder) as engine:
        for folder, groups in GROUPS.items():
            engine.ingest([root / folder], groups=groups)
        chunks = engine.corpus.get_chunks(engine.corpus.chunk_ids())
    bravo_chunks = {i for i, chunk in chunks.items() if chunk.source.endswith("bravo-vault.md")}
    file = base / "tokens.db"
    secrets = {
        ENV_TOKEN_NAME: TOKEN,
        "alpha": TokenFile(file).add("alpha", "ingest", GROUPS["alpha"]),
        "bravo": TokenFile(file).add("bravo", "answer", GROUPS["bravo"]),
    }
    config = ServerConfig(
        db=db, settings=ServerSettings(api_token=TOKEN, tokens_file=file), ingest_roots=(root,)
    )
    with running(config, factory_for(db, embedder, **SETTINGS, audit_log=audit)) as handle:
        yield Canary(handle, root, audit, secrets, bravo_chunks)


def holds(body: str | bytes, canary: str) -> bool:
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return canary.lower() in text.lower()


def chat(question: str, *, stream: bool = False, model: str = MODEL) -> dict[str, Any]:
    return {"model": model, "messages": [{"role": "user", "content": question}], "stream": stream}


def ask(client: httpx.Client, way: str, question: str) -> httpx.Response:
    """`question` asked one of the HTTP ways content comes back (`WAYS`)."""
    if way.startswith("chat"):
        return client.post("/v1/chat/completions", json=chat(question, stream="stream" in way))
    return client.post(f"/v1/{way}", json={"question": question})


# /v1/answer is server-sent events; a chat completion whole, or streamed as chunks.
WAYS = ["search", "query", "answer", "chat", "chat stream"]


def test_without_the_filter_the_bravo_question_finds_bravos_canary(canary: Canary) -> None:
    with canary.client(ENV_TOKEN_NAME) as admin, canary.client("bravo") as bravo:
        unfiltered = admin.post("/v1/query", json={"question": ASK_BRAVO})
        own = bravo.post("/v1/query", json={"question": ASK_BRAVO})
        others = bravo.post("/v1/query", json={"question": ASK_ALPHA})
    assert unfiltered.status_code == own.status_code == others.status_code == 200
    assert unfiltered.json()["hits"][0]["source"].endswith("bravo-vault.md")
    assert holds(unfiltered.content, BRAVO_CANARY) and holds(own.content, BRAVO_CANARY)
    assert not holds(others.content, ALPHA_CANARY)  # the filter works both ways


@pytest.mark.parametrize("way", WAYS)
def test_alpha_gets_its_own_canary_and_never_bravos(canary: Canary, way: str) -> None:
    with canary.client("alpha") as alpha:
        own = ask(alpha, way, ASK_ALPHA)
        aimed_at_bravo = ask(alpha, way, ASK_BRAVO)
    assert own.status_code == aimed_at_bravo.status_code == 200, aimed_at_bravo.text
    assert holds(own.content, ALPHA_CANARY), own.text
    assert not holds(aimed_at_bravo.content, BRAVO_CANARY), aimed_at_bravo.text


def test_mcp_tools_give_alpha_its_own_canary_and_never_bravos(canary: Canary) -> None:
    replies = asyncio.run(mcp_replies(canary.running.url, canary.secrets["alpha"]))
    for tool in ("search", "ask"):
        assert holds(replies[tool, ASK_ALPHA], ALPHA_CANARY), replies[tool, ASK_ALPHA]
    for tool in ("search", "ask", "answer"):
        assert not holds(replies[tool, ASK_BRAVO], BRAVO_CANARY), replies[tool, ASK_BRAVO]
        assert '"isError":false' in replies[tool, ASK_BRAVO].replace(" ", "")


async def mcp_replies(
    url: str, secret: str, questions: tuple[str, ...] | list[str] = (ASK_ALPHA, ASK_BRAVO)
) -> dict[tuple[str, str], str]:
    """Each tool's whole result (as JSON) for each question, over the service's /mcp."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    replies: dict[tuple[str, str], str] = {}
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {secret}"}, timeout=300) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for tool in ("search", "ask", "answer"):
            for question in questions:
                result = await session.call_tool(tool, {"question": question})
                replies[tool, question] = result.model_dump_json(by_alias=True)
    return replies


def test_models_and_stats_show_alpha_only_its_view(canary: Canary) -> None:
    with canary.client("alpha") as alpha, canary.client(ENV_TOKEN_NAME) as admin:
        bodies = [alpha.get("/v1/models"), alpha.get("/v1/stats")]
        everything = admin.get("/v1/stats").json()["corpus"]
    assert all(r.status_code == 200 for r in bodies)
    assert not any(holds(r.content, BRAVO_CANARY) for r in bodies)
    seen = bodies[1].json()["corpus"]
    assert (seen["documents"], everything["documents"]) == (3, 4)  # alpha's and the open two
    assert seen["chunks"] < everything["chunks"]


def test_stats_count_alphas_own_jobs_and_not_the_admins(canary: Canary) -> None:
    def jobs(client: httpx.Client) -> int:
        return sum(client.get("/v1/stats").json()["server"]["jobs"].values())

    with canary.client("alpha") as alpha, canary.client(ENV_TOKEN_NAME) as admin:
        before = jobs(alpha), jobs(admin)
        wait_job(admin, admin.post("/v1/ingest", json={"paths": ["open"]}).json()["job"]["id"])
        after_admins = jobs(alpha), jobs(admin)
        wait_job(alpha, alpha.post("/v1/ingest", json={"paths": ["alpha"]}).json()["job"]["id"])
        after_alphas = jobs(alpha), jobs(admin)
    assert after_admins == (before[0], before[1] + 1)  # not even a count of another's jobs
    assert after_alphas == (before[0] + 1, before[1] + 2)


def test_ingest_jobs_refuse_bravos_document_and_never_show_it(canary: Canary) -> None:
    bravo_file = str(canary.root / "bravo" / "bravo-vault.md")
    with canary.client("alpha") as alpha, canary.client(ENV_TOKEN_NAME) as admin:
        bodies: list[httpx.Response] = []
        tagging: list[dict[str, list[str]]] = [{}, {"groups": ["alpha"]}, {"groups": []}]
        for asked in tagging:
            started = alpha.post("/v1/ingest", json={"paths": ["bravo"], **asked})
            assert started.status_code == 202, started.text
            job = wait_job(alpha, started.json()["job"]["id"])
            assert job["state"] == "succeeded", job
            assert job["report"]["errors"] == [{"source": bravo_file, "reason": REFUSED}]
            assert job["report"]["retagged"] == job["report"]["updated"] == 0
            bodies += [started, alpha.get(started.json()["location"])]
        refused = alpha.post("/v1/ingest", json={"paths": ["bravo"], "groups": ["bravo"]})
        assert refused.status_code == 403 and refused.json()["error"] == "group_refused"
        admins = admin.post("/v1/ingest", json={"paths": ["open"]}).json()["job"]["id"]
        hidden = alpha.get(f"/v1/jobs/{admins}")
        assert hidden.status_code == 404
        bodies += [refused, hidden, alpha.post("/v1/query", json={"question": ASK_BRAVO})]
        assert holds(admin.post("/v1/query", json={"question": ASK_BRAVO}).content, BRAVO_CANARY)
    assert not any(holds(r.content, BRAVO_CANARY) for r in bodies)


def test_error_bodies_never_carry_bravos_content(canary: Canary) -> None:
    with canary.client("alpha") as alpha:
        errors = [
            alpha.post("/v1/ingest", json={"paths": ["bravo/missing.md"]}),  # 404, echoes it
            alpha.post("/v1/query", json={"question": ASK_BRAVO, "top_k": "5"}),  # 422
            alpha.post("/v1/chat/completions", json=chat(ASK_BRAVO, model="bravo-vault")),
            alpha.get("/v1/jobs/bravo-vault"),
            alpha.get("/metrics"),  # admin only
        ]
    assert [r.status_code for r in errors] == [404, 422, 404, 404, 403]
    for r in errors:
        assert r.json()["request_id"] and not holds(r.content, BRAVO_CANARY), r.text


def test_metrics_and_logs_of_alphas_requests_never_carry_bravos_content(
    canary: Canary, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crag_edge")
    with canary.client("alpha") as alpha, canary.client(ENV_TOKEN_NAME) as admin:
        asked = ask(alpha, "query", ASK_BRAVO)
        metrics = admin.get("/metrics")
    assert asked.status_code == metrics.status_code == 200
    assert "crag_decisions" in metrics.text and not holds(metrics.content, BRAVO_CANARY)
    requests = [r for r in caplog.records if getattr(r, "token_name", None) == "alpha"]
    logged = [json.dumps(vars(record), default=str) for record in requests]
    assert logged and not any(holds(line, BRAVO_CANARY) for line in logged)
    # The audit log names evidence by chunk id (those it discarded), never by its text.
    audited = wait_for_audit(canary.audit, "alpha", ASK_BRAVO)
    named = {entry["chunk_id"] for entry in map(json.loads, audited) if "chunk_id" in entry}
    assert named and not named & canary.bravo_chunks, (named, canary.bravo_chunks)
    assert not any(holds(line, BRAVO_CANARY) for line in audited)


def wait_for_audit(audit: Path, token: str, question: str) -> list[str]:
    """The audit lines of `token`'s questions `question` (written after the response)."""
    deadline = time.monotonic() + 30
    while True:
        lines = [
            line
            for line in audit.read_text(encoding="utf-8").splitlines()
            if (entry := json.loads(line)).get("token_name") == token
            and entry.get("question") == question
        ]
        if lines or time.monotonic() > deadline:
            return lines
        time.sleep(0.1)
