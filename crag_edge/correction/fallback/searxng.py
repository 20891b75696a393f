"""SearXNG, a self-hostable metasearch engine, through its JSON API (`/search?format=json`).

An instance answers `format=json` only when `json` is listed under `search.formats` in its
settings.yml; otherwise it answers 403. Its limiter (bot detection) answers 429 to requests
that do not look like a browser's, e.g. without `text/html` in Accept or without
Accept-Language, so both are sent.
"""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer

from crag_edge.correction.fallback.base import ENV_SEARXNG_URL, FallbackError
from crag_edge.correction.fallback.http import (
    WebResult,
    check_base_url,
    decode_json,
    result_items,
    retry_after,
    score_field,
    send,
    text_field,
    web_hits,
)
from crag_edge.groups import Groups
from crag_edge.types import Hit

_HEADERS = {
    "Accept": "application/json, text/html;q=0.1",
    "Accept-Language": "en;q=0.9, *;q=0.5",
}


class SearxngProvider:
    """Web results from one SearXNG instance; `tokenizer` counts tokens like the corpus does."""

    name = "searxng"

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float = 5.0,
        max_results: int = 5,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        self.base_url, self._auth = check_base_url(self.name, base_url, ENV_SEARXNG_URL)
        self.timeout_s = timeout_s
        self.max_results = max_results
        self.tokenizer = tokenizer

    def search(self, query: str, limit: int, groups: Groups = None) -> list[Hit]:
        count = min(limit, self.max_results)
        if count <= 0 or not query.strip():
            return []
        url = f"{self.base_url}/search"
        reply = send(
            self.name,
            "GET",
            url,
            timeout_s=self.timeout_s,
            auth=self._auth,
            unreachable_hint=f"is SearXNG running there? check {ENV_SEARXNG_URL}",
            headers=_HEADERS,
            params={"q": query, "format": "json"},
            follow_redirects=True,
        )
        if reply.status == 403:
            raise FallbackError(
                self.name,
                f"{url} refused format=json (403 Forbidden): the instance does not list "
                "`json` under `search.formats`",
                "enable `json` under `search.formats` in its settings.yml and restart SearXNG",
            )
        if reply.status == 429:
            raise FallbackError(
                self.name,
                f"rate limited by {self.base_url} (429 Too Many Requests{retry_after(reply)})",
                "wait and retry; on your own instance add this host to `pass_ip` under "
                "`[botdetection.ip_lists]` in limiter.toml, or set `server.limiter: false`",
            )
        if reply.status == 401:
            raise FallbackError(
                self.name,
                f"{url} asks for a login (401 Unauthorized)"
                + (": the user and password were refused" if self._auth else ""),
                f"write them into {ENV_SEARXNG_URL} (https://user:password@host)",
            )
        if reply.status == 404:
            raise FallbackError(
                self.name,
                f"no search endpoint at {url} (404 Not Found)",
                f"set {ENV_SEARXNG_URL} to the instance's base URL (the page with the search box)",
            )
        if reply.status != 200:
            raise FallbackError(
                self.name,
                f"{url} answered HTTP {reply.status}",
                "check the SearXNG instance's logs",
            )
        data = decode_json(
            self.name, reply, f"check that {ENV_SEARXNG_URL} points at a SearXNG instance"
        )
        return web_hits(self.name, self._results(data), count, self.tokenizer)

    def close(self) -> None:
        """Nothing to release: every search uses its own short-lived connection."""

    def _results(self, data: Any) -> list[WebResult]:
        """The usable results of a reply, in SearXNG's order (already by its score)."""
        hint = f"check that {ENV_SEARXNG_URL} points at a SearXNG instance"
        items = result_items(self.name, data, "SearXNG", hint)
        if not items and data.get("unresponsive_engines"):
            raise FallbackError(
                self.name,
                f"no results; engines that failed: {_engines(data['unresponsive_engines'])}",
                "check the instance's outbound network and its engine settings",
            )
        results = []
        for item in items:
            title, content = text_field(item, "title"), text_field(item, "content")
            if not (title or content):
                continue
            engines = item.get("engines")
            results.append(
                WebResult(
                    url=text_field(item, "url"),
                    title=title,
                    content=content,
                    score=score_field(item),
                    extra={"engines": engines if isinstance(engines, list) else []},
                )
            )
        return results


def _engines(unresponsive: Any) -> str:
    """SearXNG lists failed engines as [name, reason] pairs."""
    if not isinstance(unresponsive, list):
        return str(unresponsive)
    return ", ".join(
        f"{entry[0]} ({entry[1]})" if isinstance(entry, list) and len(entry) == 2 else str(entry)
        for entry in unresponsive
    )
