"""Service replicas on one corpus: two `crag-edge serve` processes on one PostgreSQL database
(pgserver) and one LLM server (llama-cpp-python's, SmolLM2 at temperature 0) answer alike,
see each other's ingests and jobs; a replica killed with SIGKILL mid-ingest leaves every
document old or new and its job failed; /readyz turns 503 when the LLM server goes away."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.server import ServerConfig
from crag_edge.store.factory import open_corpus
from tests.live_service import SAMPLE, SETTINGS, WAL
from tests.servers import LlmServer, llama_cpp_server
from tests.test_remote_llm import N_CTX, model_file  # noqa: F401 (a fixture)
from tests.test_server import running, serve_process

pytestmark = [pytest.mark.models, pytest.mark.slow]

# Every replica's `server_job_stale_after_s`: a killed replica's job reads failed this soon.
STALE_S = 6
ZORBLAT = "The Zorblat reactor in Quentaris is cooled with chilled lemon juice every Tuesday."
BATCH = 24  # documents rewritten by the ingest that is killed
# Small chunks: many cheap ones, so that the killed ingest commits several groups of them.
CHUNKS: dict[str, Any] = {"chunk_tokens": 32, "chunk_overlap": 0}


def replica_settings(llm: LlmServer) -> dict[str, str]:
    """The environment of a replica: the shared LLM server, brief deterministic answers."""
    return {
        "llm_url": llm.url,
        "llm_context": str(N_CTX),
        "llm_timeout_s": "120",
        "llm_max_tokens": str(SETTINGS["llm_max_tokens"]),
        "rewrite_with_llm": "false",
        "server_job_stale_after_s": str(STALE_S),
    } | {name: str(value) for name, value in CHUNKS.items()}


@pytest.fixture(scope="module")
def llm(model_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlmServer]:  # noqa: F811
    with llama_cpp_server(model_file, tmp_path_factory.mktemp("llm") / "server.log") as server:
        yield server


@pytest.fixture(scope="module")
def corpus_url(postgres_database: str, embedder: Any) -> str:
    """The sample corpus in the module's PostgreSQL database."""
    settings = Settings.load(**SETTINGS, **CHUNKS)
    with Engine.open(postgres_database, settings, create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
    return postgres_database


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("ingest-root")


@pytest.fixture(scope="module")
def replicas(corpus_url: str, root: Path, llm: LlmServer) -> Iterator[tuple[str, str]]:
    """Replicas A and B: their base URLs."""
    settings = replica_settings(llm)
    with (
        serve_process(corpus_url, root, **settings) as (first, a),
        serve_process(corpus_url, root, **settings) as (second, b),
    ):
        PIDS.update({a: first.pid, b: second.pid})
        yield a, b


PIDS: dict[str, int] = {}  # each replica's process, by its URL


def wait_job(url: str, job_id: str, *, until: tuple[str, ...]) -> dict[str, Any]:
    deadline = time.monotonic() + 180
    while True:
        job: dict[str, Any] = httpx.get(f"{url}/v1/jobs/{job_id}", timeout=30).json()
        if job["state"] in until:
            return job
        assert time.monotonic() < deadline, job
        time.sleep(0.2)


def ingest(url: str, *paths: str) -> str:
    reply = httpx.post(f"{url}/v1/ingest", json={"paths": list(paths)}, timeout=30)
    assert reply.status_code == 202, reply.text
    return str(reply.json()["job"]["id"])


def retrieval(url: str, question: str) -> tuple[Any, ...]:
    result = httpx.post(f"{url}/v1/query", json={"question": question}, timeout=300).json()
    hits = tuple((h["chunk_id"], h["rank"], round(h["score"], 6)) for h in result["hits"])
    return result["decision"], hits, tuple(c["chunk_id"] for c in result["context"])


def answer(url: str, question: str) -> str:
    client = openai.OpenAI(base_url=f"{url}/v1", api_key="unused", max_retries=0, timeout=300)
    (model,) = [listed.id for listed in client.models.list().data]  # named by the database
    completion = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": question}]
    )
    return str(completion.choices[0].message.content)


def test_the_same_question_gets_the_same_result_and_answer_from_either_replica(
    replicas: tuple[str, str],
) -> None:
    a, b = replicas
    assert retrieval(a, WAL) == retrieval(b, WAL)
    assert retrieval(a, WAL)[1]  # something was retrieved
    # The LLM server reuses the evaluated prefix of its previous prompt, and a prompt evaluated
    # whole or in part may differ in the last bits of its logits: both replicas ask after the
    # same prompt was asked once, so that the server is in the same state for each.
    assert answer(a, WAL).strip()
    from_b = answer(b, WAL)
    assert from_b.strip() and answer(a, WAL) == from_b


def test_an_ingest_through_one_replica_is_seen_and_followed_on_the_other(
    replicas: tuple[str, str], root: Path
) -> None:
    a, b = replicas
    (root / "zorblat.md").write_text(f"# Zorblat\n\n{ZORBLAT}\n", encoding="utf-8")
    job_id = ingest(a, "zorblat.md")
    job = wait_job(b, job_id, until=("succeeded", "failed", "cancelled"))
    assert job["state"] == "succeeded" and job["report"]["added"] == 1, job
    assert job["replica"].endswith(f":{PIDS[a]}")  # run by A, read on B
    hits = httpx.post(f"{b}/v1/query", json={"question": "How is the Zorblat reactor cooled?"})
    assert hits.json()["hits"][0]["source"].endswith("zorblat.md")
    stats = httpx.get(f"{b}/v1/stats").json()["server"]["jobs"]
    assert stats.get("succeeded", 0) >= 1


def write_batch(folder: Path, version: str, paragraphs: int) -> None:
    """`BATCH` documents of about five chunks per paragraph, every sentence naming
    `version`."""
    folder.mkdir(exist_ok=True)
    for i in range(BATCH):
        text = "\n\n".join(
            f"Paragraph {p} of note {i}, {version} edition. " + f"{version} detail {p}. " * 40
            for p in range(paragraphs)
        )
        (folder / f"note{i:02d}.md").write_text(f"# Note {i}\n\n{text}\n", encoding="utf-8")


OTHER = {"old": "new", "new": "old"}


def old_or_new(url: str, folder: Path) -> dict[str, str]:
    """Each document of `folder` with the one edition all its chunks are of, after checking
    that its chunks are all there (ordinals 0..n-1) and each is its stored text's slice."""
    editions = {}
    with open_corpus(url, readonly=True) as corpus:
        chunks = corpus.get_chunks(corpus.chunk_ids()).values()
        for source in (s for s in corpus.list_sources() if s.startswith(str(folder))):
            stored = corpus.document(source)
            assert stored is not None
            text = corpus.document_text(stored.id)
            mine = sorted((c for c in chunks if c.doc_id == stored.id), key=lambda c: c.ordinal)
            assert [c.ordinal for c in mine] == list(range(len(mine))), source
            assert all(text[c.start : c.end] == c.text for c in mine), source
            found = {e for e in ("old", "new") if f"{e} edition" in text}
            assert len(found) == 1, source
            (edition,) = found
            assert all(edition in c.text and (OTHER[edition] not in c.text) for c in mine), source
            editions[Path(source).name] = edition
    return editions


def test_a_replica_killed_mid_ingest_leaves_documents_whole_and_its_job_failed(
    replicas: tuple[str, str], corpus_url: str, root: Path, llm: LlmServer
) -> None:
    a, b = replicas
    batch = root / "batch"
    write_batch(batch, "old", 1)
    assert wait_job(b, ingest(a, "batch"), until=("succeeded",))["report"]["added"] == BATCH
    write_batch(batch, "new", 6)
    with serve_process(corpus_url, root, **replica_settings(llm)) as (doomed, c):
        job_id = ingest(c, "batch")
        deadline = time.monotonic() + 180
        while (seen := httpx.get(f"{b}/v1/jobs/{job_id}").json())["progress"]["done"] < 1:
            assert seen["state"] == "running" and time.monotonic() < deadline, seen
            time.sleep(0.05)
        os.kill(doomed.pid, signal.SIGKILL)
        doomed.wait(30)
    editions = old_or_new(corpus_url, batch)
    assert len(editions) == BATCH
    assert set(editions.values()) == {"old", "new"}, "killed before or after the ingest"
    job = wait_job(b, job_id, until=("failed", "succeeded", "cancelled"))
    assert job["state"] == "failed" and "replica stopped updating it" in job["error"], job
    assert httpx.get(f"{a}/v1/jobs/{job_id}").json()["state"] == "failed"


def test_readiness_is_503_naming_the_llm_server_when_it_is_down(
    corpus_url: str,
    embedder: Any,
    model_file: Path,  # noqa: F811
    tmp_path: Path,
) -> None:
    with llama_cpp_server(model_file, tmp_path / "llm.log") as own_llm:
        settings = Settings.load(**SETTINGS, llm_url=own_llm.url)

        def factory() -> Engine:
            return Engine.open(corpus_url, settings, embedder=embedder)

        with running(ServerConfig(db=corpus_url), factory) as replica, replica.client() as c:
            ready = c.get("/readyz")
            assert ready.status_code == 200
            assert ready.json() == {"ready": True, "checked": ["database", "llm"]}
            own_llm.process.kill()
            own_llm.process.wait()
            down = c.get("/readyz")
            assert down.status_code == 503
            body = down.json()
            assert body["ready"] is False and set(body["failed"]) == {"llm"}, body
            assert own_llm.url in body["failed"]["llm"]
            assert c.get("/healthz").status_code == 200  # alive: not to be restarted
