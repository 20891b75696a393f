"""Fallback providers against real services: HTTP servers on 127.0.0.1 that speak SearXNG's
and Tavily's response formats (and their failure modes), and a real second corpus built with
the real embedder."""

from __future__ import annotations

import json
import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from crag_edge.config import CorrectionSettings, RetrievalSettings, Settings, SettingsError
from crag_edge.correction.fallback import (
    FallbackError,
    FallbackProvider,
    LocalCorpusProvider,
    SearxngProvider,
    TavilyProvider,
    build_providers,
    fallback_id,
    merge,
    run_fallbacks,
)
from crag_edge.engine import Engine
from crag_edge.groups import CorpusView, Groups
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.store import Corpus
from crag_edge.types import Hit
from tests.servers import (
    TLS_CERT,
    ApiRequest,
    ApiResponse,
    api_server,
    socket_server,
    trickle,
)

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SAMPLE = Path(__file__).resolve().parent.parent / "sample_corpus"
KEY = "tvly-test-0123456789abcdef"


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The fake services are on 127.0.0.1: a proxy configured in the environment must not
    intercept them."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    yield


# -- fake services speaking the real formats --------------------------------------------------


def json_reply(status: int, data: Any, headers: dict[str, str] | None = None) -> ApiResponse:
    return (
        status,
        {"Content-Type": "application/json", **(headers or {})},
        json.dumps(data).encode(),
    )


def searxng_result(url: str, title: str, content: str, score: float) -> dict[str, Any]:
    """One entry of SearXNG's `results`, with the fields a real instance sends."""
    return {
        "url": url,
        "title": title,
        "content": content,
        "engine": "duckduckgo",
        "engines": ["duckduckgo", "wikipedia"],
        "positions": [1, 2],
        "parsed_url": ["https", url.split("/")[2], "/", "", "", ""],
        "template": "default.html",
        "category": "general",
        "score": score,
    }


WEB = [
    searxng_result(
        "https://en.wikipedia.org/wiki/Waggle_dance",
        "Waggle dance - Wikipedia",
        "The waggle dance is a behavior of honey bees that communicates the direction "
        "and distance of flowers to nest mates.",
        4.0,
    ),
    searxng_result(
        "https://www.nature.com/articles/bee-navigation",
        "How bees navigate",
        "Foragers use the sun as a compass and measure distance by optic flow.",
        2.5,
    ),
    {"title": "an answer box without a link", "content": "skipped: nothing to cite"},
    searxng_result(
        "https://example.org/apiculture", "Apiculture basics", "Hives, frames and queens.", 1.0
    ),
]


def searxng(
    results: list[dict[str, Any]] = WEB,
    *,
    formats: tuple[str, ...] = ("html", "json"),
    unresponsive: list[list[str]] | None = None,
) -> Callable[[ApiRequest], ApiResponse]:
    """SearXNG's /search: 403 for a format not in `search.formats`, and its limiter's 429 for
    requests whose headers do not look like a browser's (bot detection)."""

    def respond(request: ApiRequest) -> ApiResponse:
        if request.path not in ("/", "/search"):
            return 404, {"Content-Type": "text/html"}, b"<h1>Not Found</h1>"
        headers = request.headers
        if (
            "text/html" not in headers.get("Accept", "")
            or not headers.get("Accept-Language")
            or "gzip" not in headers.get("Accept-Encoding", "")
            or headers.get("Connection", "").lower() == "close"
        ):
            return 429, {"Content-Type": "text/plain"}, b"Too Many Requests"
        fmt = request.query.get("format", ["html"])[0]
        if fmt not in formats:
            return 403, {"Content-Type": "text/html"}, b"<h1>Forbidden</h1>"
        query = request.query["q"][0]
        return json_reply(
            200,
            {
                "query": query,
                "number_of_results": 0,
                "results": results,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": unresponsive or [],
            },
        )

    return respond


def tavily(seen: list[ApiRequest] | None = None) -> Callable[[ApiRequest], ApiResponse]:
    """Tavily's POST /search with bearer-key auth and its `{"detail": {"error"}}` errors."""

    def respond(request: ApiRequest) -> ApiResponse:
        if seen is not None:
            seen.append(request)
        if request.method != "POST" or request.path != "/search":
            return json_reply(404, {"detail": "Not Found"})
        if request.headers.get("Authorization") != f"Bearer {KEY}":
            return json_reply(
                401, {"detail": {"error": "Unauthorized: missing or invalid API key."}}
            )
        body = json.loads(request.body)
        results = [
            {
                "title": "Honey bee communication",
                "url": "http://en.wikipedia.org/wiki/Waggle_dance/",  # SearXNG's first, respelled
                "content": "Bees perform a waggle dance to share where food is.",
                "score": 0.91,
                "raw_content": None,
            },
            {
                "title": "Photosynthesis explained",
                "url": "https://biology.example.edu/photosynthesis#intro",
                "content": "Plants turn light, water and carbon dioxide into sugar.",
                "score": 0.55,
                "raw_content": None,
            },
            {
                "title": "Pollination",
                "url": "https://garden.example.com/pollination",
                "content": "Bees carry pollen between flowers.",
                "score": 0.42,
                "raw_content": None,
            },
        ][: body["max_results"]]
        return json_reply(
            200,
            {
                "query": body["query"],
                "follow_up_questions": None,
                "answer": None,
                "images": [],
                "results": results,
                "response_time": 0.42,
            },
        )

    return respond


def status(
    code: int, data: Any, headers: dict[str, str] | None = None
) -> Callable[..., ApiResponse]:
    return lambda request: json_reply(code, data, headers)


def raw(body: bytes, content_type: str = "application/json") -> Callable[..., ApiResponse]:
    return lambda request: (200, {"Content-Type": content_type}, body)


def slow(seconds: float, inner: Callable[[ApiRequest], ApiResponse]) -> Callable[..., ApiResponse]:
    def respond(request: ApiRequest) -> ApiResponse:
        time.sleep(seconds)
        return inner(request)

    return respond


@pytest.fixture
def closed_port_url() -> str:
    """A URL on which nothing listens (a server that has just been shut down)."""
    with api_server(raw(b"{}")) as url:
        pass
    return url


def failure(call: Callable[[], object]) -> FallbackError:
    with pytest.raises(FallbackError) as info:
        call()
    return info.value


# -- SearXNG ------------------------------------------------------------------------------


def test_searxng_results_become_hits(embedder: OnnxEmbedder) -> None:
    with api_server(searxng()) as url:
        provider = SearxngProvider(url + "/", max_results=5, tokenizer=embedder.tokenizer)
        hits = provider.search("how do bees tell where flowers are", 10, view=EVERYTHING)
    assert [h.chunk.source for h in hits] == [
        "https://en.wikipedia.org/wiki/Waggle_dance",
        "https://www.nature.com/articles/bee-navigation",
        "https://example.org/apiculture",
    ]  # the result without a URL has nothing to cite and is skipped
    first = hits[0]
    assert first.origin == "fallback:searxng" and first.rank == 1 and first.score == 4.0
    assert first.chunk.title == "Waggle dance - Wikipedia"
    assert first.chunk.text.startswith("Waggle dance - Wikipedia\n\nThe waggle dance is")
    assert (first.chunk.start, first.chunk.end) == (0, len(first.chunk.text))
    assert first.chunk.token_count == len(
        embedder.tokenizer.encode(first.chunk.text, add_special_tokens=False).ids
    )
    assert first.chunk.metadata["fallback"]["engines"] == ["duckduckgo", "wikipedia"]
    assert all(h.chunk.chunk_id < 0 and h.chunk.doc_id < 0 for h in hits)
    assert len({h.chunk.chunk_id for h in hits}) == len(hits)


def test_web_results_pass_the_text_boundary(embedder: OnnxEmbedder) -> None:
    """A snippet is document text from outside: escape sequences would reach the terminal
    that prints the answer, and a lone surrogate (a JSON escape) would stop the tokenizer."""
    dirty = searxng_result(
        "https://evil.example/page",
        "Bees\x1b]0;owned\x07 and flowers",
        "Bees dance\x1b[2J to\x00 share \ud83d routes.",
        1.0,
    )
    with api_server(searxng([dirty])) as url:
        hits = SearxngProvider(url, tokenizer=embedder.tokenizer).search("bees", 5, view=EVERYTHING)
    assert hits[0].chunk.title == "Bees]0;owned and flowers"
    assert hits[0].chunk.text.endswith("Bees dance[2J to share \ufffd routes.")


def test_a_web_result_is_cut_to_a_chunks_size() -> None:
    """A snippet of megabytes would hold grading and refinement for minutes."""
    huge = searxng_result("https://big.example/", "Bees " * 1000, "Bees dance. " * 250_000, 1.0)
    with api_server(searxng([huge])) as url:
        hit = SearxngProvider(url).search("bees", 5, view=EVERYTHING)[0]
    assert len(hit.chunk.title) == 300 and len(hit.chunk.text) == 4000
    assert hit.chunk.text.startswith(hit.chunk.title + "\n\nBees dance.")


def test_a_page_listed_twice_fills_one_place() -> None:
    respelled = searxng_result("http://www.nature.com/articles/bee-navigation/", "Again", "x", 3.0)
    with api_server(searxng([WEB[0], WEB[1], respelled, WEB[3]])) as url:
        hits = SearxngProvider(url, max_results=3).search("bees", 10, view=EVERYTHING)
    assert [h.chunk.title for h in hits] == [
        "Waggle dance - Wikipedia",
        "How bees navigate",
        "Apiculture basics",
    ]


def test_searxng_caps_results() -> None:
    with api_server(searxng()) as url:
        assert len(SearxngProvider(url, max_results=2).search("bees", 10, view=EVERYTHING)) == 2
        assert len(SearxngProvider(url, max_results=5).search("bees", 1, view=EVERYTHING)) == 1


def test_searxng_403_means_json_format_disabled() -> None:
    with api_server(searxng(formats=("html",))) as url:
        error = failure(lambda: SearxngProvider(url).search("bees", 5, view=EVERYTHING))
    assert "403" in error.message and "`json`" in error.message
    assert "`search.formats`" in error.hint and "settings.yml" in error.hint
    assert error.hint.startswith("enable `json` under `search.formats` in its settings.yml")


def test_searxng_429_reports_rate_limit_and_retry_after() -> None:
    limited = status(429, {"error": "rate limited"}, {"Retry-After": "30"})
    with api_server(limited) as url:
        error = failure(lambda: SearxngProvider(url).search("bees", 5, view=EVERYTHING))
    assert "rate limited" in error.message and "429" in error.message
    assert "retry after 30 s" in error.message
    assert "limiter" in error.hint


def test_searxng_slow_reply_times_out_within_bound() -> None:
    with api_server(slow(4.0, searxng())) as url:
        provider = SearxngProvider(url, timeout_s=1.0)
        started = time.monotonic()
        error = failure(lambda: provider.search("bees", 5, view=EVERYTHING))
        elapsed = time.monotonic() - started
    assert "within 1 s" in error.message
    assert elapsed < 1.0 + 2.0


def test_searxng_that_trickles_its_headers_is_cut_off_at_the_deadline() -> None:
    """httpx bounds each read, not the exchange: one header byte at a time (ten seconds of
    them) must not hold the query, nor the thread that asks, past the query's timeout."""
    body = json.dumps({"results": WEB}).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"x" * 150
    finished: list[bytes] = []

    def talk(connection: socket.socket, request: bytes) -> None:
        trickle(connection, head, 0.05)
        finished.append(head)
        connection.sendall(b"\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))

    with socket_server(talk) as url:
        error = failure(
            lambda: SearxngProvider(url, timeout_s=1.0).search("bees", 5, view=EVERYTHING)
        )
    assert "no complete reply" in error.message and "within 1 s" in error.message
    assert finished == []  # the connection was cut while the server was still trickling


def test_an_https_server_that_trickles_is_cut_off_at_the_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Tavily is HTTPS: the connection to cut is the TLS one, not the plain socket under it."""
    monkeypatch.setenv("SSL_CERT_FILE", str(TLS_CERT))
    finished: list[bool] = []

    def talk(connection: socket.socket, request: bytes) -> None:
        trickle(connection, b"HTTP/1.1 200 OK\r\nX-Padding: " + b"x" * 150, 0.05)
        finished.append(True)

    with socket_server(talk, tls=True) as url:
        error = failure(
            lambda: TavilyProvider(KEY, base_url=url, timeout_s=1.0).search("q", 5, view=EVERYTHING)
        )
    assert "no complete reply" in error.message and "within 1 s" in error.message
    assert finished == []  # the connection was cut while the server was still trickling


def test_searxng_malformed_json() -> None:
    with api_server(raw(b'{"results": [{"url": "https://a.example"')) as url:
        error = failure(lambda: SearxngProvider(url).search("bees", 5, view=EVERYTHING))
    assert "not valid JSON" in error.message and "application/json" in error.message


def test_searxng_html_page_instead_of_api() -> None:
    with api_server(raw(b"<html><body>login</body></html>", "text/html")) as url:
        error = failure(lambda: SearxngProvider(url).search("bees", 5, view=EVERYTHING))
    assert "not valid JSON (text/html)" in error.message and "SEARXNG_URL" in error.hint


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ([{"url": "https://a.example"}], "no `results` list"),
        ({"results": {"url": "https://a.example"}}, "no `results` list"),
        ({"answers": []}, "no `results` list"),
        ({"results": [{"link": "https://a.example", "title": "x"}]}, "none of the 1 results"),
    ],
)
def test_searxng_wrong_shape(data: Any, expected: str) -> None:
    with api_server(status(200, data)) as url:
        error = failure(lambda: SearxngProvider(url).search("bees", 5, view=EVERYTHING))
    assert expected in error.message


def test_searxng_no_results_because_engines_failed() -> None:
    broken = searxng([], unresponsive=[["duckduckgo", "timeout"], ["wikipedia", "CAPTCHA"]])
    with api_server(broken) as url:
        error = failure(lambda: SearxngProvider(url).search("bees", 5, view=EVERYTHING))
    assert "duckduckgo (timeout), wikipedia (CAPTCHA)" in error.message


def test_searxng_empty_answer_is_not_an_error() -> None:
    with api_server(searxng([])) as url:
        assert SearxngProvider(url).search("bees", 5, view=EVERYTHING) == []


def test_searxng_wrong_path_and_refused_connection(closed_port_url: str) -> None:
    with api_server(searxng()) as url:
        error = failure(
            lambda: SearxngProvider(url + "/instance").search("bees", 5, view=EVERYTHING)
        )
    assert "404" in error.message and "base URL" in error.hint
    error = failure(lambda: SearxngProvider(closed_port_url).search("bees", 5, view=EVERYTHING))
    assert "cannot connect" in error.message and "is SearXNG running" in error.hint


def test_a_password_in_the_searxng_url_is_sent_but_never_shown() -> None:
    """Behind basic auth: the URL's user and password authenticate every request, and no
    error (which reaches results, the audit log and API clients) quotes the password."""
    seen: list[str] = []

    def guarded(request: ApiRequest) -> ApiResponse:
        seen.append(request.headers.get("Authorization", ""))
        return 503, {"Content-Type": "text/html"}, b"<h1>maintenance</h1>"

    with api_server(guarded) as url:
        secured = url.replace("http://", "http://alice:s3cret@")
        error = failure(lambda: SearxngProvider(secured).search("bees", 5, view=EVERYTHING))
    assert seen == ["Basic YWxpY2U6czNjcmV0"]  # alice:s3cret
    assert "answered HTTP 503" in error.message and "s3cret" not in str(error)


def test_searxng_behind_a_login_says_where_the_login_goes() -> None:
    login = status(401, {"detail": "login"}, {"WWW-Authenticate": 'Basic realm="searx"'})
    with api_server(login) as url:
        error = failure(lambda: SearxngProvider(url).search("bees", 5, view=EVERYTHING))
        refused = failure(
            lambda: SearxngProvider(url.replace("//", "//bob:wrong@")).search(
                "bees", 5, view=EVERYTHING
            )
        )
    assert "asks for a login (401 Unauthorized)" in error.message
    assert error.hint == "write them into CRAG_EDGE_SEARXNG_URL (https://user:password@host)"
    assert refused.message.endswith(": the user and password were refused")
    assert "wrong" not in str(refused)


def test_searxng_invalid_url_is_a_config_error() -> None:
    error = failure(lambda: SearxngProvider("localhost:8888"))
    assert "http://" in error.message and "CRAG_EDGE_SEARXNG_URL" in error.hint


# -- Tavily -------------------------------------------------------------------------------


def test_tavily_results_become_hits(embedder: OnnxEmbedder) -> None:
    seen: list[ApiRequest] = []
    with api_server(tavily(seen)) as url:
        provider = TavilyProvider(KEY, base_url=url, max_results=2, tokenizer=embedder.tokenizer)
        hits = provider.search("bee communication", 10, view=EVERYTHING)
    body = json.loads(seen[0].body)
    assert body == {"query": "bee communication", "max_results": 2, "search_depth": "basic"}
    assert KEY not in seen[0].body.decode()  # the key travels only in the header
    assert [h.chunk.title for h in hits] == ["Honey bee communication", "Photosynthesis explained"]
    assert hits[0].origin == "fallback:tavily" and hits[0].score == 0.91
    assert hits[0].chunk.metadata["fallback"]["provider_score"] == 0.91
    assert hits[0].chunk.token_count > 0 and hits[0].chunk.chunk_id < 0


def test_tavily_missing_key_fails_before_any_request() -> None:
    seen: list[ApiRequest] = []
    with api_server(tavily(seen)) as url:
        error = failure(
            lambda: TavilyProvider(None, base_url=url).search("bees", 5, view=EVERYTHING)
        )
        failure(lambda: TavilyProvider("", base_url=url).search("bees", 5, view=EVERYTHING))
    assert seen == []
    assert "no API key" in error.message and "CRAG_EDGE_TAVILY_API_KEY" in error.hint


def test_tavily_rejected_key() -> None:
    with api_server(tavily()) as url:
        error = failure(
            lambda: TavilyProvider("tvly-wrong", base_url=url).search("bees", 5, view=EVERYTHING)
        )
    assert "401" in error.message and "invalid API key" in error.message
    assert error.hint == "check CRAG_EDGE_TAVILY_API_KEY"
    assert "tvly-wrong" not in str(error) and "tvly-wrong" not in repr(TavilyProvider("tvly-wrong"))


@pytest.mark.parametrize(
    ("code", "headers", "message", "hint"),
    [
        (403, {}, "403 Forbidden", "check CRAG_EDGE_TAVILY_API_KEY"),
        (
            429,
            {"Retry-After": "12"},
            "rate limited (429 Too Many Requests, retry after 12 s",
            "wait",
        ),
        (432, {}, "credit limit", "plan"),
        (433, {}, "pay-as-you-go limit", "dashboard"),
        (500, {}, "HTTP 500", "retry later"),
    ],
)
def test_tavily_error_statuses(code: int, headers: dict[str, str], message: str, hint: str) -> None:
    error_body = {"detail": {"error": f"reason {code} for {KEY}"}}
    with api_server(status(code, error_body, headers)) as url:
        error = failure(
            lambda: TavilyProvider(KEY, base_url=url).search("bees", 5, view=EVERYTHING)
        )
    assert message in error.message and hint in error.hint
    assert f"reason {code}" in error.message and KEY not in str(error)


def test_tavily_error_detail_is_quoted_on_one_line() -> None:
    detail = {"detail": {"error": "Unauthorized:\r\n\x1b[31mmissing\x1b[0m\n  key"}}
    with api_server(status(401, detail)) as url:
        error = failure(lambda: TavilyProvider(KEY, base_url=url).search("q", 5, view=EVERYTHING))
    assert error.message == "API key rejected (401 Unauthorized: Unauthorized: [31mmissing[0m key)"


def test_a_tavily_url_that_redirects_names_where_it_points() -> None:
    moved = status(308, {}, {"Location": "https://api.tavily.example/search"})
    with api_server(moved) as url:
        error = failure(lambda: TavilyProvider(KEY, base_url=url).search("q", 5, view=EVERYTHING))
    assert "redirects to https://api.tavily.example/search (HTTP 308)" in error.message
    assert error.hint == "set CRAG_EDGE_TAVILY_URL to the address it redirects to"


def test_tavily_slow_malformed_and_wrong_shape() -> None:
    with api_server(slow(4.0, tavily())) as url:
        started = time.monotonic()
        error = failure(
            lambda: TavilyProvider(KEY, base_url=url, timeout_s=1.0).search("q", 5, view=EVERYTHING)
        )
        assert time.monotonic() - started < 1.0 + 2.0
    assert "within 1 s" in error.message
    with api_server(raw(b"Internal error<br>")) as url:
        assert (
            "not valid JSON"
            in failure(
                lambda: TavilyProvider(KEY, base_url=url).search("q", 5, view=EVERYTHING)
            ).message
        )
    with api_server(status(200, {"answer": "42"})) as url:
        error = failure(lambda: TavilyProvider(KEY, base_url=url).search("q", 5, view=EVERYTHING))
    assert "no `results` list" in error.message and "TAVILY_URL" in error.hint


# -- the local corpus ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def second_db(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Path:
    """A second, real corpus (four of the sample documents), built with the real embedder."""
    folder = tmp_path_factory.mktemp("fallback-docs")
    for name in (
        "honeybees.txt",
        "photosynthesis.html",
        "sqlite-wal.md",
        "air-gapped-deployment.txt",
    ):
        shutil.copy(SAMPLE / name, folder / name)
    db = tmp_path_factory.mktemp("fallback") / "second.db"
    with Engine.open(db, Settings.load(), create=True, embedder=embedder) as engine:
        engine.ingest([folder])
    return db


def test_local_hits_are_relabelled_corpus_chunks(second_db: Path, embedder: OnnxEmbedder) -> None:
    provider = LocalCorpusProvider(second_db, embedder, max_results=3)
    try:
        hits = provider.search(
            "How do honeybees tell each other where flowers are?", 10, view=EVERYTHING
        )
    finally:
        provider.close()
    assert 0 < len(hits) <= 3
    top = hits[0]
    assert top.origin == "fallback:local"
    assert top.chunk.source == f"{second_db.resolve()}#{top.chunk.metadata['fallback']['source']}"
    assert top.chunk.source.endswith("honeybees.txt")
    assert top.chunk.chunk_id < 0 and top.chunk.doc_id < 0 and top.dense_score is not None
    origin = top.chunk.metadata["fallback"]
    with Corpus.open(second_db, readonly=True) as corpus:
        original = corpus.get_chunks([origin["chunk_id"]])[origin["chunk_id"]]
        document = corpus.document_text(origin["doc_id"])
    assert top.chunk.text == original.text == document[top.chunk.start : top.chunk.end]
    assert top.chunk.token_count == original.token_count > 0


def test_local_corpus_is_opened_lazily_and_read_only(
    second_db: Path, embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    path = tmp_path / "later.db"
    provider = LocalCorpusProvider(path, embedder)  # nothing there yet: no error until used
    error = failure(lambda: provider.search("bees", 5, view=EVERYTHING))
    assert "no fallback corpus" in error.message and "crag-edge ingest --db" in error.hint
    shutil.copy(second_db, path)  # built after the failure: picked up without a restart
    before = path.read_bytes()
    assert provider.search("waggle dance", 5, view=EVERYTHING)
    provider.close()
    assert path.read_bytes() == before


def test_local_foreign_corrupt_and_mismatched_files(embedder: OnnxEmbedder, tmp_path: Path) -> None:
    foreign = tmp_path / "foreign.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    error = failure(
        lambda: LocalCorpusProvider(foreign, embedder).search("bees", 5, view=EVERYTHING)
    )
    assert "not a crag-edge corpus" in error.message and "CRAG_EDGE_FALLBACK_DB" in error.hint

    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"SQLite format 3\x00" + b"\xff" * 50)
    error = failure(
        lambda: LocalCorpusProvider(corrupt, embedder).search("bees", 5, view=EVERYTHING)
    )
    assert "truncated" in error.message and "rebuild" in error.hint

    other = tmp_path / "other.db"
    Corpus.create(other, "some-other-embedder", embedder.dim).close()
    error = failure(lambda: LocalCorpusProvider(other, embedder).search("bees", 5, view=EVERYTHING))
    assert "some-other-embedder" in error.message and "same embedder" in error.hint


def test_local_waits_for_the_corpus_at_most_its_timeout(
    second_db: Path, embedder: OnnxEmbedder
) -> None:
    provider = LocalCorpusProvider(second_db, embedder, timeout_s=0.2)
    provider._lock.acquire()  # an earlier search, abandoned at its deadline, still running
    try:
        error = failure(lambda: provider.search("bees", 5, view=EVERYTHING))
    finally:
        provider._lock.release()
    assert "still busy" in error.message and "CRAG_EDGE_FALLBACK_TIMEOUT_S" in error.hint
    assert provider.search("bees", 5, view=EVERYTHING)
    provider.close()


# -- running several providers ------------------------------------------------------------


class Scripted:
    """A provider that answers from a script: for failures no real service can produce."""

    timeout_s = 1.0
    max_results = 5

    def __init__(self, name: str, answer: list[Hit] | Exception) -> None:
        self.name = name
        self.answer = answer

    def search(self, query: str, limit: int, groups: Groups = None) -> list[Hit]:
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer[:limit]

    def close(self) -> None:
        pass


def test_slow_provider_does_not_hold_back_the_fast_one() -> None:
    with api_server(slow(6.0, searxng())) as slow_url, api_server(tavily()) as fast_url:
        providers: list[FallbackProvider] = [
            SearxngProvider(slow_url, timeout_s=10.0),  # its own timeout is not what stops it
            TavilyProvider(KEY, base_url=fast_url, timeout_s=10.0),
        ]
        started = time.monotonic()
        outcome = run_fallbacks(providers, "bees", 5, timeout=1.5, view=EVERYTHING)
        elapsed = time.monotonic() - started
    assert elapsed < 1.5 + 2.0
    assert outcome.used == ["tavily"] and {h.origin for h in outcome.hits} == {"fallback:tavily"}
    assert len(outcome.failures) == 1
    name, reason = outcome.failures[0]
    assert name == "searxng" and "no answer within 1.5 s" in reason
    assert set(outcome.timings_ms) == {"searxng", "tavily"}


def test_failures_are_recorded_never_raised(closed_port_url: str) -> None:
    providers: list[FallbackProvider] = [
        SearxngProvider(closed_port_url),
        TavilyProvider(None),
        Scripted("buggy", RuntimeError("provider bug")),
    ]
    outcome = run_fallbacks(providers, "bees", 5, timeout=5.0, view=EVERYTHING)
    assert outcome.hits == [] and outcome.used == []
    reasons = dict(outcome.failures)
    assert "cannot connect" in reasons["searxng"]
    assert reasons["tavily"] == "no API key configured; set CRAG_EDGE_TAVILY_API_KEY"
    assert reasons["buggy"] == "unexpected RuntimeError: provider bug"
    assert set(outcome.timings_ms) == {"searxng", "tavily", "buggy"}


def test_merge_interleaves_removes_duplicate_urls_and_caps() -> None:
    with api_server(searxng()) as s_url, api_server(tavily()) as t_url:
        outcome = run_fallbacks(
            [SearxngProvider(s_url), TavilyProvider(KEY, base_url=t_url)],
            "bees",
            4,
            timeout=5.0,
            view=EVERYTHING,
        )
    sources = [h.chunk.source for h in outcome.hits]
    # The waggle-dance page from both (respelled by Tavily) counts once and ranks first; the
    # rest alternate in the configured order, cut at the limit.
    assert sources == [
        "https://en.wikipedia.org/wiki/Waggle_dance",
        "https://www.nature.com/articles/bee-navigation",
        "https://biology.example.edu/photosynthesis#intro",
        "https://example.org/apiculture",
    ]
    assert [h.rank for h in outcome.hits] == [1, 2, 3, 4]
    scores = [h.score for h in outcome.hits]
    assert scores == sorted(scores, reverse=True) and scores[0] > scores[1]
    assert outcome.used == ["searxng", "tavily"] and outcome.failures == []


def test_merge_of_nothing() -> None:
    assert merge([], 5) == [] and merge([[], []], 5) == []


def test_all_three_providers_from_config(second_db: Path, embedder: OnnxEmbedder) -> None:
    with api_server(searxng()) as s_url, api_server(tavily()) as t_url:
        settings = Settings.load(
            fallback_providers=["local", "searxng", "tavily"],
            fallback_max_results=3,
            fallback_db=second_db,
            searxng_url=s_url,
            tavily_api_key=KEY,
            tavily_url=t_url,
        )
        providers = build_providers(settings.correction, settings.retrieval, embedder)
        try:
            outcome = run_fallbacks(
                providers, "how do bees find flowers", 6, timeout=10.0, view=EVERYTHING
            )
        finally:
            for provider in providers:
                provider.close()
    assert outcome.used == ["local", "searxng", "tavily"] and outcome.failures == []
    # The page both web providers found leads, then rank 1, 2, 3 of each in configured order.
    assert [h.origin.removeprefix("fallback:") for h in outcome.hits] == [
        "searxng",
        "local",
        "local",
        "searxng",
        "tavily",
        "local",
    ]
    ids = [h.chunk.chunk_id for h in outcome.hits]
    assert len(set(ids)) == len(ids) and all(i < 0 for i in ids)
    json.dumps([h.chunk.metadata for h in outcome.hits])  # serialisable for the result


def test_nothing_to_ask() -> None:
    assert run_fallbacks([], "bees", 5, 1.0, view=EVERYTHING).hits == []
    never = Scripted("never", AssertionError("must not be called"))
    assert run_fallbacks([never], "  ", 5, 1.0, view=EVERYTHING).failures == []
    assert run_fallbacks([never], "bees", 0, 1.0, view=EVERYTHING).failures == []


# -- configuration --------------------------------------------------------------------------


def test_build_providers_checks_names_and_required_settings(
    embedder: OnnxEmbedder, tmp_path: Path
) -> None:
    retrieval = RetrievalSettings.defaults()
    assert build_providers(CorrectionSettings.defaults(), retrieval, embedder) == []
    local_db = CorrectionSettings.model_validate({"fallback_db": tmp_path / "b.db"})
    default = build_providers(local_db, retrieval, embedder)
    assert [p.name for p in default] == ["local"]  # local is the air-gapped default
    cases = {
        ("bing",): "unknown fallback provider",
        ("local", "local"): "listed more than once",
        ("local",): "no fallback corpus configured",
        ("searxng",): "no SearXNG URL configured",
        ("tavily",): "no API key configured",
    }
    for names, message in cases.items():
        with pytest.raises(FallbackError) as info:
            # Unvalidated, as a caller building the section by hand might pass it.
            unchecked = CorrectionSettings.model_construct(fallback_providers=list(names))
            build_providers(unchecked, retrieval, embedder)
        assert info.value.message == message
        if names == ("bing",):
            assert "local, searxng, tavily" in info.value.hint
    with pytest.raises(SettingsError, match="CRAG_EDGE_FALLBACK_TIMEOUT_S"):
        Settings.load(fallback_timeout_s=0)
    with pytest.raises(SettingsError, match="CRAG_EDGE_FALLBACK_MAX_RESULTS"):
        Settings.load(fallback_max_results=0)


def test_fallback_ids_are_stable_negative_and_json_safe() -> None:
    ids = {fallback_id("https://a.example", str(i)) for i in range(1000)}
    assert len(ids) == 1000 and all(-(2**52) <= i < 0 for i in ids)
    assert fallback_id("x", "y") == fallback_id("x", "y") != fallback_id("xy")


def test_local_provider_is_safe_to_share_between_threads(
    second_db: Path, embedder: OnnxEmbedder
) -> None:
    provider = LocalCorpusProvider(second_db, embedder)
    results: list[int] = []
    errors: list[BaseException] = []

    def ask() -> None:
        try:
            results.append(len(provider.search("photosynthesis light", 3, view=EVERYTHING)))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    provider.close()
    assert errors == [] and results == [3, 3, 3, 3]
