"""Named, scoped tokens: `crag-edge tokens add|list|revoke` on a real token file, what that file
keeps, and a live service admitting and refusing each token route by route."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, closing, contextmanager
from pathlib import Path
from typing import Any

import apsw
import httpx
import pytest
from typer.testing import CliRunner

pytest.importorskip("fastapi")

from crag_edge.cli import app
from crag_edge.config import ServerSettings
from crag_edge.server import ServerConfig
from crag_edge.server.tokens import TokenError, TokenFile
from tests.live_service import NONSENSE, TOKEN, sample_corpus
from tests.test_server import Running, factory_for, running, wait_until

ROOT = Path(__file__).parent.parent
runner = CliRunner()


def tokens(file: Path, *args: str, env: dict[str, str] | None = None) -> Any:
    return runner.invoke(app, ["tokens", *args, "--file", str(file)], env=env)


def add(file: Path, name: str, scope: str, *extra: str) -> str:
    result = tokens(file, "add", name, "--scope", scope, *extra)
    assert result.exit_code == 0, result.output
    return str(result.stdout.strip())


# -- the token file and its commands ---------------------------------------------------------


def test_add_prints_the_secret_once_and_list_never_shows_it(tmp_path: Path) -> None:
    file = tmp_path / "tokens.db"
    added = tokens(file, "add", "reader", "--scope", "query", "--groups", "finance, hr")
    assert added.exit_code == 0, added.output
    secret = added.stdout.strip()
    assert len(secret) >= 32 and added.stdout == secret + "\n"  # nothing else on stdout
    assert "not stored" in added.stderr
    as_json = tokens(file, "list", "--json")
    table = tokens(file, "list")
    assert as_json.exit_code == table.exit_code == 0
    (row,) = json.loads(as_json.stdout)
    assert {k: row[k] for k in ("name", "scope", "groups", "revoked")} == {
        "name": "reader",
        "scope": "query",
        "groups": ["finance", "hr"],
        "revoked": None,
    }
    assert row["created"].endswith("Z")
    assert "reader" in table.stdout and "finance,hr" in table.stdout
    digest = hashlib.sha256(secret.encode()).hexdigest()
    for shown in (as_json.output, table.output):
        assert secret not in shown and digest not in shown


def test_the_file_keeps_only_a_hash_of_each_secret(tmp_path: Path) -> None:
    file = tmp_path / "tokens.db"
    secrets = [add(file, name, "query") for name in ("one", "two", "three")]
    stored = b"".join(path.read_bytes() for path in tmp_path.iterdir())  # journal included
    for secret in secrets:
        assert secret.encode() not in stored
        assert hashlib.sha256(secret.encode()).digest() in stored  # what is kept instead
    assert stat.S_IMODE(file.stat().st_mode) == 0o600  # hashes are still nobody else's
    assert len(set(secrets)) == 3


@pytest.mark.parametrize(
    "args",
    [
        ["add", "has space", "--scope", "query"],
        ["add", "x" * 65, "--scope", "query"],
        ["add", "", "--scope", "query"],
        ["add", "naïve", "--scope", "query"],
        ["add", "ENV", "--scope", "admin"],  # CRAG_EDGE_API_TOKEN's name
        ["add", "READER", "--scope", "admin"],  # taken, whatever its case
        ["add", "other", "--scope", "query", "--groups", "fin ance"],
        ["add", "other", "--scope", "root"],
    ],
)
def test_bad_or_taken_names_and_options_exit_2(tmp_path: Path, args: list[str]) -> None:
    file = tmp_path / "tokens.db"
    add(file, "reader", "query")
    result = tokens(file, *args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert [info.name for info in TokenFile(file).list()] == ["reader"]


def test_revoke_refuses_the_token_and_keeps_its_name_taken(tmp_path: Path) -> None:
    file = tmp_path / "tokens.db"
    secret = add(file, "reader", "query", "--groups", "finance")
    principal = TokenFile(file).lookup(secret)
    assert principal is not None
    assert (principal.name, principal.scope, principal.groups) == (
        "reader",
        "query",
        frozenset({"finance"}),
    )
    assert TokenFile(file).lookup(secret[:-1] + ("A" if secret[-1] != "A" else "B")) is None
    first, again = tokens(file, "revoke", "reader"), tokens(file, "revoke", "reader")
    assert first.exit_code == again.exit_code == 0 and "already" in again.stderr
    assert TokenFile(file).lookup(secret) is None
    assert json.loads(tokens(file, "list", "--json").stdout)[0]["revoked"] is not None
    assert tokens(file, "add", "reader", "--scope", "query").exit_code == 2
    unknown = tokens(file, "revoke", "nobody")
    assert unknown.exit_code == 1 and unknown.stderr.startswith("error:")


def test_a_missing_or_foreign_file_is_one_line_and_exit_1(tmp_path: Path) -> None:
    missing = tokens(tmp_path / "nope.db", "list")
    foreign_file = tmp_path / "notes.txt"
    foreign_file.write_text("not a database, only words\n" * 100)
    foreign = tokens(foreign_file, "list")
    for result in (missing, foreign):
        assert result.exit_code == 1 and result.stderr.count("\n") == 1, result.output
        assert result.stderr.startswith("error:")
    assert "not a crag-edge token file" in foreign.stderr
    assert foreign_file.read_text().startswith("not a database")  # left as it was


def test_without_a_file_the_command_says_how_to_name_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CRAG_EDGE_TOKENS_FILE", raising=False)
    monkeypatch.chdir(tmp_path)
    bare = runner.invoke(app, ["tokens", "list"])
    assert bare.exit_code == 2 and "CRAG_EDGE_TOKENS_FILE" in bare.stderr
    file = tmp_path / "from-env.db"
    named = runner.invoke(
        app, ["tokens", "add", "ops", "--scope", "admin"], env={"CRAG_EDGE_TOKENS_FILE": str(file)}
    )
    assert named.exit_code == 0 and [i.name for i in TokenFile(file).list()] == ["ops"]


def test_a_token_file_is_auth_even_off_loopback(tmp_path: Path) -> None:
    config = ServerConfig(
        db=tmp_path, settings=ServerSettings(tokens_file=tmp_path / "tokens.db"), host="0.0.0.0"
    )
    config.validate_bind()  # the file's tokens are long random secrets
    assert config.auth_required
    assert not ServerConfig(db=tmp_path).auth_required


def test_serve_refuses_a_token_file_that_is_not_one(tmp_path: Path) -> None:
    env = os.environ | {"CRAG_EDGE_TOKENS_FILE": str(tmp_path / "missing.db")}
    db = tmp_path / "corpus.db"
    db.write_bytes(b"")
    done = subprocess.run(
        [sys.executable, "-m", "crag_edge.server", "--db", str(db), "--port", "0"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("error: tokens_file: no token file at"), done.stderr
    assert done.stderr.count("\n") == 1


# -- the live service ------------------------------------------------------------------------

# Every protected route with a body that succeeds cheaply (no evidence: no model is called)
# and the least scope it needs.
ROUTES: list[tuple[str, str, dict[str, Any] | None, str]] = [
    ("POST", "/v1/query", {"question": NONSENSE}, "query"),
    ("GET", "/v1/models", None, "query"),
    ("POST", "/v1/answer", {"question": NONSENSE}, "answer"),
    (
        "POST",
        "/v1/chat/completions",
        {"model": "crag-edge:corpus", "messages": [{"role": "user", "content": NONSENSE}]},
        "answer",
    ),
    ("GET", "/v1/stats", None, "ingest"),
    ("POST", "/v1/ingest", {"paths": ["note.md"]}, "ingest"),
    ("GET", "/metrics", None, "admin"),
]
LADDER = ["query", "answer", "ingest", "admin"]


def error_code(response: httpx.Response) -> str:
    """The error's code: the service's `error`, or on the OpenAI routes OpenAI's `error.code`."""
    error = response.json()["error"]
    return str(error["code"] if isinstance(error, dict) else error)


class Service:
    """The running service, its token file, the secrets by name and the audit log."""

    def __init__(self, running: Running, file: Path, secrets: dict[str, str], audit: Path):
        self.running, self.file, self.secrets, self.audit = running, file, secrets, audit

    def client(self, name: str | None) -> httpx.Client:
        return self.running.client(token=self.secrets[name] if name else None)


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, embedder: Any) -> Iterator[Service]:
    base = tmp_path_factory.mktemp("tokens")
    db = sample_corpus(base, embedder)
    root = base / "root"
    root.mkdir()
    (root / "note.md").write_text("# Note\n\nHoneybees dance to show where flowers are.\n")
    file = base / "tokens.db"
    secrets = {"env": TOKEN}
    for name, scope in (("reader", "query"), ("asker", "answer"), ("loader", "ingest")):
        secrets[name] = TokenFile(file).add(name, scope, {"finance"})
    audit = base / "audit.jsonl"
    config = ServerConfig(
        db=db,
        settings=ServerSettings(api_token=TOKEN, tokens_file=file),
        ingest_roots=(root.resolve(),),
    )
    with running(config, factory_for(db, embedder, audit_log=audit)) as handle:
        yield Service(handle, file, secrets, audit)


@pytest.mark.models
def test_each_route_admits_its_scope_and_above_and_refuses_the_rest(service: Service) -> None:
    scopes = {"reader": "query", "asker": "answer", "loader": "ingest", "env": "admin"}
    for method, path, body, needed in ROUTES:
        with service.client(None) as anonymous:
            refused = anonymous.request(method, path, json=body)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        for name, scope in scopes.items():
            with service.client(name) as client:
                r = client.request(method, path, json=body)
            if LADDER.index(scope) >= LADDER.index(needed):
                assert r.status_code in (200, 202), (name, path, r.text)
            else:
                assert r.status_code == 403, (name, path, r.text)
                assert error_code(r) == "insufficient_scope"
                assert r.json()["needed_scope"] == needed and r.json()["request_id"]


@pytest.mark.models
def test_the_probes_and_the_schema_stay_open(service: Service) -> None:
    with service.client(None) as anonymous:
        for path in ("/healthz", "/readyz", "/openapi.json"):
            assert anonymous.get(path).status_code == 200, path
        schema = anonymous.get("/openapi.json").json()
    for method, path, _, _ in ROUTES:
        responses = schema["paths"][path][method.lower()]["responses"]
        assert {"401", "403"} <= set(responses), path


@pytest.mark.models
def test_a_job_is_shown_to_its_owner_and_to_admin_only(service: Service) -> None:
    def start(name: str) -> str:
        with service.client(name) as client:
            r = client.post("/v1/ingest", json={"paths": ["note.md"]})
        assert r.status_code == 202, r.text
        assert r.json()["job"]["owner"] == name
        return str(r.json()["job"]["id"])

    loaders, admins = start("loader"), start("env")
    with service.client("loader") as loader, service.client("env") as admin:
        assert loader.get(f"/v1/jobs/{loaders}").status_code == 200
        assert admin.get(f"/v1/jobs/{loaders}").json()["owner"] == "loader"
        hidden = loader.get(f"/v1/jobs/{admins}")
        assert hidden.status_code == 404 and hidden.json()["error"] == "job_not_found"
        assert admin.get(f"/v1/jobs/{admins}").status_code == 200


@pytest.mark.models
def test_tokens_added_or_revoked_take_effect_without_a_restart(service: Service) -> None:
    secret = TokenFile(service.file).add("visitor", "query")
    with service.running.client(token=secret) as visitor:
        assert visitor.get("/v1/models").status_code == 200
        assert TokenFile(service.file).revoke("visitor")
        after = visitor.get("/v1/models")
    assert after.status_code == 401 and error_code(after) == "unauthorized"


@pytest.mark.models
def test_an_unreadable_token_file_refuses_every_token(service: Service) -> None:
    moved = service.file.with_name("moved.db")
    service.file.rename(moved)
    try:
        with service.client("env") as admin, service.client("reader") as reader:
            statuses = [admin.get("/v1/models"), reader.get("/v1/models")]
    finally:
        moved.rename(service.file)
    for r in statuses:
        assert r.status_code == 503 and error_code(r) == "auth_unavailable", r.text


def damage_past_the_header(file: Path) -> None:
    """Garbage over the table's page: the header still says SQLite, reading the rows fails."""
    data = bytearray(file.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page : 2 * page] = b"\xa5" * page
    file.write_bytes(bytes(data))


def drop_the_table(file: Path) -> None:
    with closing(apsw.Connection(str(file))) as conn:
        conn.execute("DROP TABLE tokens")


@contextmanager
def locked(file: Path) -> Iterator[None]:
    """Another process's exclusive lock on the file, held past the service's busy wait."""
    with closing(apsw.Connection(str(file))) as conn:
        conn.execute("BEGIN EXCLUSIVE")
        try:
            yield
        finally:
            conn.execute("ROLLBACK")


@contextmanager
def damaged(file: Path, how: Callable[[Path], None]) -> Iterator[None]:
    kept = file.read_bytes()
    how(file)
    try:
        yield
    finally:
        file.write_bytes(kept)


FAILURES: dict[str, Callable[[Path], AbstractContextManager[None]]] = {
    "damaged": lambda file: damaged(file, damage_past_the_header),
    "no table": lambda file: damaged(file, drop_the_table),
    "locked": locked,
}


@pytest.mark.parametrize("failure", FAILURES)
def test_a_token_file_failing_as_a_database_is_a_token_error(tmp_path: Path, failure: str) -> None:
    file = tmp_path / "tokens.db"
    secret = TokenFile(file).add("reader", "query")
    with FAILURES[failure](file), pytest.raises(TokenError, match="token file") as caught:
        TokenFile(file).lookup(secret)
    assert "\n" not in str(caught.value)


@pytest.mark.models
@pytest.mark.parametrize("failure", FAILURES)
def test_a_damaged_missing_table_or_locked_token_file_is_503_auth_unavailable(
    service: Service, failure: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crag_edge.server")
    with FAILURES[failure](service.file), service.client("reader") as reader:
        r = reader.get("/v1/models")
    assert r.status_code == 503 and error_code(r) == "auth_unavailable", r.text
    logged = [rec for rec in caplog.records if rec.getMessage() == "token file unreadable"]
    assert logged and all(rec.exc_info is None for rec in logged)
    assert "token file" in str(logged[-1].error)  # type: ignore[attr-defined]
    with service.client("reader") as reader:  # the file restored: served again
        assert reader.get("/v1/models").status_code == 200


@pytest.mark.models
def test_the_request_log_and_audit_log_name_the_token_never_its_secret(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="crag_edge.server")
    with service.client("reader") as reader:
        assert reader.post("/v1/query", json={"question": "How do honeybees dance?"}).is_success

    def reader_query_logged() -> bool:
        # The request line is written once the response has gone out, so it may trail the reply.
        return any(
            r.getMessage() == "request"
            and getattr(r, "token_name", None) == "reader"
            and getattr(r, "route", "") == "/v1/query"
            for r in caplog.records
        )

    wait_until(reader_query_logged)
    lines = [json.loads(line) for line in service.audit.read_text().splitlines()]
    assert any(line.get("token_name") == "reader" for line in lines)
    everything = service.audit.read_text() + "".join(str(vars(r)) for r in caplog.records)
    assert not any(secret in everything for secret in service.secrets.values())


@pytest.mark.models
def test_mcp_tools_run_as_the_token_and_check_its_scope(service: Service) -> None:
    pytest.importorskip("mcp")
    outcome = asyncio.run(mcp_calls(service.running.url, service.secrets["reader"]))
    assert outcome["ask"] is False  # a query tool: allowed
    assert outcome["answer"] is True and "insufficient_scope" in outcome["answer_text"]
    lines = [json.loads(line) for line in service.audit.read_text().splitlines()]
    assert any(
        line.get("token_name") == "reader" and line.get("question") == "What is MCP audit?"
        for line in lines
    )


async def mcp_calls(url: str, secret: str) -> dict[str, Any]:
    """`ask` and `answer` over the service's /mcp: whether each came back as an error."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    headers = {"Authorization": f"Bearer {secret}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=300) as http,
        streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        asked = await session.call_tool("ask", {"question": "What is MCP audit?"})
        answered = await session.call_tool("answer", {"question": "What is MCP audit?"})
    text = " ".join(getattr(part, "text", "") for part in answered.content)
    return {"ask": asked.is_error, "answer": answered.is_error, "answer_text": text}
