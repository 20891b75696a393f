"""What the web providers share: one bounded HTTP exchange, JSON decoding, and turning
search results into `Hit`s.

Every exchange is bounded in time (a total deadline on top of httpx's per-phase timeouts,
`http_bounds.Watchdog`, so a server that trickles bytes, headers included, cannot hold a
query) and in size (decompressed bytes), and every transport failure becomes a
`FallbackError` that names the host and what to check. A result's text passes the text
boundary and is cut to a chunk's size.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx
from tokenizers import Tokenizer

from crag_edge.correction.fallback.base import ENV_TIMEOUT, FallbackError, fallback_id
from crag_edge.groups import CorpusView
from crag_edge.http_bounds import Watchdog, read_capped, split_credentials
from crag_edge.text_boundary import repair
from crag_edge.types import Chunk, Hit

MAX_REPLY_BYTES = 4 * 1024 * 1024
# A web result is evidence the size of a chunk: a search engine's snippet is a few hundred
# characters; one of megabytes would hold grading and refinement for minutes.
MAX_RESULT_CHARS = 4000
MAX_TITLE_CHARS = 300
USER_AGENT = "crag-edge (fallback search)"


@dataclass(frozen=True)
class Reply:
    """A complete HTTP reply, read within the deadline and size cap."""

    status: int
    headers: httpx.Headers
    body: bytes


@dataclass(frozen=True)
class WebResult:
    """One search result as a web provider reported it, before it becomes a `Hit`."""

    url: str
    title: str
    content: str
    score: float | None
    extra: dict[str, Any] = field(default_factory=dict)


def check_base_url(provider: str, url: str, setting: str) -> tuple[str, httpx.BasicAuth | None]:
    """The base URL without a trailing slash, user or password, and those as basic auth; a
    `FallbackError` naming `setting` if unusable."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise FallbackError(provider, f"invalid URL: {exc}", f"fix {setting}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise FallbackError(
            provider, "invalid URL: need http:// or https:// and a host", f"fix {setting}"
        )
    bare, auth = split_credentials(url)
    return bare.rstrip("/"), auth


def send(
    provider: str,
    method: str,
    url: str,
    *,
    timeout_s: float,
    unreachable_hint: str,
    headers: Mapping[str, str] | None = None,
    params: Mapping[str, str] | None = None,
    json_body: Any = None,
    follow_redirects: bool = False,
    auth: httpx.BasicAuth | None = None,
) -> Reply:
    """One request, read completely within `timeout_s` and `MAX_REPLY_BYTES`; any status."""
    late = FallbackError(
        provider,
        f"no complete reply from {url} within {timeout_s:g} s",
        f"check that the service is responsive, or raise {ENV_TIMEOUT}",
    )
    try:
        with (
            Watchdog(timeout_s) as watchdog,
            httpx.Client(
                auth=auth,
                timeout=timeout_s,
                follow_redirects=follow_redirects,
                max_redirects=3,
                headers={"User-Agent": USER_AGENT},
            ) as client,
            client.stream(
                method,
                url,
                headers=headers,
                params=params,
                json=json_body,
                extensions=watchdog.extensions,
            ) as response,
        ):
            body = read_capped(response, MAX_REPLY_BYTES)
        if watchdog.expired:  # a cut reply without a length reads as complete
            raise late
        if len(body) > MAX_REPLY_BYTES:
            raise FallbackError(
                provider,
                f"reply from {url} exceeds {MAX_REPLY_BYTES // 2**20} MiB",
                "point the setting at a search API, not a file or a page",
            )
        return Reply(response.status_code, response.headers, body)
    except httpx.TimeoutException:
        raise late from None
    except httpx.ConnectError as exc:
        raise FallbackError(provider, f"cannot connect to {url}: {exc}", unreachable_hint) from None
    except httpx.TooManyRedirects:
        raise FallbackError(provider, f"{url} redirects too often", unreachable_hint) from None
    except httpx.HTTPError as exc:
        if watchdog.expired:
            raise late from None
        raise FallbackError(
            provider, f"request to {url} failed: {type(exc).__name__}: {exc}", unreachable_hint
        ) from None


def decode_json(provider: str, reply: Reply, hint: str) -> Any:
    """The reply body as JSON, or a `FallbackError` saying what came back instead."""
    try:
        return json.loads(reply.body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        kind = reply.headers.get("Content-Type", "no Content-Type")
        raise FallbackError(provider, f"reply is not valid JSON ({kind}): {exc}", hint) from None


def retry_after(reply: Reply) -> str:
    """', retry after N s' from a Retry-After header (seconds or an HTTP date), else ''."""
    value = reply.headers.get("Retry-After", "").strip()
    if not value:
        return ""
    return f", retry after {value} s" if value.isdigit() else f", retry after {value}"


def text_field(item: Mapping[str, Any], key: str) -> str:
    """A string field of a JSON object, '' when missing or not a string. A search result's
    text comes from any page on the web, so it passes the text boundary like a document's:
    no escape sequence for the terminal, no lone surrogate (a JSON escape) for the tokenizer."""
    value = item.get(key)
    return repair(value).strip() if isinstance(value, str) else ""


def score_field(item: Mapping[str, Any]) -> float | None:
    """The provider's relevance score, when it sent a number."""
    value = item.get("score")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def result_items(provider: str, data: Any, service: str, hint: str) -> list[dict[str, Any]]:
    """The objects of a reply's `results` list that carry an http(s) `url`.

    A reply without such a list, or whose every result lacks a URL, is not the service's
    format (a proxy page, another API): that is an error, not an empty answer.
    """
    items = data.get("results") if isinstance(data, dict) else None
    if not isinstance(items, list):
        raise FallbackError(
            provider, f"reply has no `results` list, so it is not a {service} search reply", hint
        )
    usable = [
        item for item in items if isinstance(item, dict) and is_web_url(text_field(item, "url"))
    ]
    if items and not usable:
        raise FallbackError(
            provider, f"none of the {len(items)} results has a `url`: not {service}'s format", hint
        )
    return usable


def is_web_url(value: str) -> bool:
    """True for absolute http(s) URLs: the only kind a result may cite."""
    try:
        parsed = httpx.URL(value)
    except httpx.InvalidURL:
        return False
    return parsed.scheme in ("http", "https") and bool(parsed.host)


def url_key(url: str) -> str:
    """A URL reduced to what identifies the page, for removing duplicates across providers:
    scheme, `www.`, fragment, default port and trailing slash do not matter."""
    parsed = httpx.URL(url)
    host = parsed.host.lower().removeprefix("www.")
    port = f":{parsed.port}" if parsed.port else ""
    query = f"?{parsed.query.decode('ascii', 'replace')}" if parsed.query else ""
    return f"{host}{port}{parsed.path.rstrip('/')}{query}"


def web_hits(
    provider: str, results: Sequence[WebResult], count: int, tokenizer: Tokenizer | None
) -> list[Hit]:
    """The first `count` results with distinct URLs, best first, as `Hit`s: text is title and
    snippet (what graders and the generator read), cut to `MAX_RESULT_CHARS`, the source is
    the URL, and the provider's score stays in metadata. A page listed twice fills one place:
    the merge would keep only one of them anyway."""
    firsts: dict[str, WebResult] = {}
    for result in results:
        firsts.setdefault(url_key(result.url), result)
    results = list(firsts.values())[:count]
    texts = [_evidence(result) for result in results]
    tokens = (
        [len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)]
        if tokenizer is not None and texts
        else [0] * len(texts)
    )
    hits = []
    for rank, (result, text, count) in enumerate(zip(results, texts, tokens, strict=True), 1):
        metadata = {"provider": provider, "url": result.url, "provider_score": result.score}
        chunk = Chunk(
            chunk_id=fallback_id("url", result.url, text),
            doc_id=fallback_id("url", result.url),
            ordinal=0,
            text=text,
            start=0,
            end=len(text),
            source=result.url,
            title=result.title[:MAX_TITLE_CHARS],
            metadata={"fallback": metadata | result.extra},
            token_count=count,
        )
        score = 0.0 if result.score is None else result.score
        hits.append(Hit(chunk=chunk, rank=rank, score=score, origin=f"fallback:{provider}"))
    return hits


def _evidence(result: WebResult) -> str:
    """Title and snippet, as graders and the generator read them: a chunk's size at most."""
    parts = (result.title[:MAX_TITLE_CHARS], result.content)
    return "\n\n".join(part for part in parts if part)[:MAX_RESULT_CHARS]


class WebProvider(ABC):
    """What the web search providers share: a checked base URL, a bounded search (`send`)
    whose reply is refused on any status but 200 and read as JSON, and its results turned
    into hits. Each provider says how it asks (`_ask`), what an error status means
    (`_status_error`) and which results it keeps (`_results`)."""

    name: str
    service: str  # as shown in messages: "SearXNG"
    url_setting: str  # the variable that names `base_url`
    not_this_api: str  # the hint for a reply that is not this service's JSON
    api_max_results: int | None = None  # what the API itself accepts at most

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 5.0,
        max_results: int = 5,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.base_url, self._auth = check_base_url(self.name, base_url, self.url_setting)
        self.timeout_s = timeout_s
        self.max_results = max_results
        self.tokenizer = tokenizer

    def search(self, query: str, limit: int, view: CorpusView) -> list[Hit]:
        """Up to `limit` results (at most `max_results`); web results are public, so
        `view` changes nothing."""
        count = min(limit, self.max_results, self.api_max_results or self.max_results)
        if count <= 0 or not query.strip():
            return []
        reply = self._ask(query, count)
        if reply.status != 200:
            raise self._status_error(reply)
        data = decode_json(self.name, reply, self.not_this_api)
        items = result_items(self.name, data, self.service, self.not_this_api)
        return web_hits(self.name, self._results(data, items), count, self.tokenizer)

    def close(self) -> None:  # noqa: B027 (a provider's close; a web one holds nothing)
        """Nothing to release: every search uses its own short-lived connection."""

    def _send_search(
        self,
        method: str,
        unreachable_hint: str,
        *,
        headers: Mapping[str, str],
        params: Mapping[str, str] | None = None,
        json_body: Any = None,
        follow_redirects: bool = False,
    ) -> Reply:
        """The service's `/search` asked (`send`) with this provider's name, deadline and
        credentials; the request's own parts are the provider's."""
        return send(
            self.name,
            method,
            f"{self.base_url}/search",
            timeout_s=self.timeout_s,
            auth=self._auth,
            unreachable_hint=unreachable_hint,
            headers=headers,
            params=params,
            json_body=json_body,
            follow_redirects=follow_redirects,
        )

    @abstractmethod
    def _ask(self, query: str, count: int) -> Reply:
        """The search request for `count` results, sent (`_send_search`)."""

    @abstractmethod
    def _status_error(self, reply: Reply) -> FallbackError:
        """What a reply with a status other than 200 means, and what to do."""

    @abstractmethod
    def _results(self, data: Any, items: list[dict[str, Any]]) -> list[WebResult]:
        """The usable results among the reply's `items`, in the service's order."""
