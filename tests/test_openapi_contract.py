"""The service's OpenAPI schema is its contract, checked against the live server: what the
schema allows is answered, what the server refuses the schema refuses too, every error
status is documented with the one error body, and schemathesis, driven by the served schema,
finds no 5xx and no response that breaks it."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("schemathesis")

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.config import SchemathesisConfig

from crag_edge.config import ServerSettings
from crag_edge.server import ServerConfig
from crag_edge.server.errors import OPENAI_PATHS
from crag_edge.text_boundary import WORD_PATTERN
from tests.live_service import TOKEN, sample_corpus
from tests.test_server import Running, factory_for, running

MAX_QUESTION_CHARS = 300
AUTH_HEADERS = {"Authorization": f"Bearer {TOKEN}"}
BEES = "How do honeybees tell other bees where flowers are?"
# What each operation may answer besides success; each error with the one error body (every
# protected one 503 too: an unreadable token file).
ERROR_STATUSES = {
    ("post", "/v1/query"): {400, 401, 403, 408, 413, 422, 503},
    ("post", "/v1/search"): {400, 401, 403, 408, 413, 422, 503},
    ("post", "/v1/answer"): {400, 401, 403, 408, 413, 422, 503},
    ("post", "/v1/ingest"): {400, 401, 403, 404, 408, 413, 422, 503},
    ("get", "/v1/jobs/{job_id}"): {401, 403, 404, 503},
    ("get", "/v1/stats"): {401, 403, 503},
    ("get", "/metrics"): {401, 403, 503},
    ("get", "/v1/models"): {401, 403, 503},
    ("post", "/v1/chat/completions"): {400, 401, 403, 404, 408, 413, 422, 503},
}


@pytest.fixture(scope="module")
def ingest_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("contract-root").resolve()
    (root / "note.md").write_text("# Note\n\nHoneybees dance to show where flowers are.\n")
    return root


@pytest.fixture(scope="module")
def server(
    tmp_path_factory: pytest.TempPathFactory, embedder: Any, ingest_root: Path
) -> Iterator[Running]:
    db = sample_corpus(tmp_path_factory.mktemp("contract"), embedder)
    config = ServerConfig(
        db=db,
        settings=ServerSettings(api_token=TOKEN, server_max_question_chars=MAX_QUESTION_CHARS),
        ingest_roots=(ingest_root,),
    )
    with running(config, factory_for(db, embedder)) as handle:
        yield handle


@pytest.fixture(scope="module")
def openapi(server: Running) -> dict[str, Any]:
    with server.client() as client:
        schema: dict[str, Any] = client.get("/openapi.json").json()
    return schema


def test_questions_and_paths_cannot_be_empty_and_carry_the_servers_limits(
    openapi: dict[str, Any],
) -> None:
    models = openapi["components"]["schemas"]
    question = models["QueryRequest"]["properties"]["question"]
    assert question["minLength"] == 1 and question["maxLength"] == MAX_QUESTION_CHARS
    assert question["pattern"] == WORD_PATTERN  # a letter or digit: blanks or "???" are none
    paths = models["IngestRequest"]["properties"]["paths"]
    assert paths["minItems"] == 1 and paths["maxItems"] == ServerSettings().server_max_ingest_paths
    assert paths["items"]["minLength"] == 1


def test_error_statuses_are_documented_with_the_error_body(openapi: dict[str, Any]) -> None:
    error_body = openapi["components"]["schemas"]["ErrorBody"]
    assert set(error_body["required"]) == {"error", "message", "request_id"}
    for (method, path), statuses in ERROR_STATUSES.items():
        responses = openapi["paths"][path][method]["responses"]
        documented = {int(status) for status in responses if int(status) >= 400}
        assert statuses <= documented, (method, path, documented)
        body = "OpenAiErrorBody" if path in OPENAI_PATHS else "ErrorBody"
        for status in documented:
            schema = responses[str(status)]["content"]["application/json"]["schema"]
            assert schema == {"$ref": f"#/components/schemas/{body}"}, (path, status)
    assert "HTTPValidationError" not in openapi["components"]["schemas"]


def test_protected_operations_declare_the_bearer_scheme(openapi: dict[str, Any]) -> None:
    assert openapi["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
    for method, path in ERROR_STATUSES:
        assert openapi["paths"][path][method]["security"] == [{"HTTPBearer": []}], path
    for probe in ("/healthz", "/readyz"):
        assert "security" not in openapi["paths"][probe]["get"]


@pytest.mark.parametrize("top_k", [True, "5", 5.5])
def test_numbers_in_request_bodies_are_strict(server: Running, top_k: Any) -> None:
    with server.client() as client:
        loose = client.post("/v1/query", json={"question": BEES, "top_k": top_k})
        # JSON Schema's integers: 5.0 is one
        exact = [client.post("/v1/query", json={"question": BEES, "top_k": k}) for k in (5, 5.0)]
    assert loose.status_code == 422 and loose.json()["error"] == "invalid_request"
    assert [r.status_code for r in exact] == [200, 200], [r.text for r in exact]


@pytest.mark.parametrize("body", [{"question": ""}, {"question": " \t\n"}])
def test_what_the_schema_refuses_is_refused(server: Running, body: dict[str, Any]) -> None:
    with server.client() as client:
        assert client.post("/v1/query", json=body).status_code == 422
        assert client.post("/v1/ingest", json={"paths": [""]}).status_code == 422


def test_chat_requests_check_the_fields_they_read(server: Running) -> None:
    with server.client() as client:
        model = client.get("/v1/models").json()["data"][0]["id"]
        asked = {"model": model, "messages": [{"role": "user", "content": BEES}]}
        flag = client.post("/v1/chat/completions", json=asked | {"stream": "true"})
        part = client.post(
            "/v1/chat/completions",
            json=asked | {"messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
        )
    assert flag.status_code == 422 and part.status_code == 422


# -- schemathesis against the live server ----------------------------------------------------


@pytest.fixture(scope="module")
def served_schema(server: Running) -> Any:
    """The schema the server serves, with a fixed seed: a failure replays the same cases."""
    config = SchemathesisConfig.from_dict({"seed": 16, "request-timeout": 120})
    return schemathesis.openapi.from_url(f"{server.url}/openapi.json", config=config)


# The cheap operations and /v1/query with the small models; answers (LLM generation) have
# their own tests (test_server, test_openai_api).
contract = schemathesis.pytest.from_fixture("served_schema").exclude(
    path_regex=r"^/v1/(answer|chat/completions)$"
)


@contract.parametrize()
@settings(
    max_examples=25,
    deadline=None,  # a query's time is not what is tested here
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_the_live_server_keeps_its_openapi_contract(case: Any) -> None:
    case.call_and_validate(headers=AUTH_HEADERS)


def test_paths_that_are_not_text_are_refused_in_the_error_shape(
    server: Running, ingest_root: Path
) -> None:
    """A lone surrogate (JSON can send one) or a file name that is not UTF-8 is no 500."""
    with server.client() as client:
        lone = client.post(
            "/v1/ingest",
            content=b'{"paths": ["notes\\ud800.md"]}',
            headers={"Content-Type": "application/json"},
        )
        odd = ingest_root / "odd"
        odd.mkdir()
        try:
            (odd / os.fsdecode(b"broken\xff.md")).symlink_to(ingest_root / "missing.md")
            broken = client.post("/v1/ingest", json={"paths": ["odd"]})
        finally:
            shutil.rmtree(odd)
    assert lone.status_code == 422 and lone.json()["error"] == "invalid_request", lone.text
    assert broken.status_code == 403 and "broken\\xff.md" in broken.json()["message"], broken.text
