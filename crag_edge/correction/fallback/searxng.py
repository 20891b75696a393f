"""SearXNG, a self-hostable metasearch engine, through its JSON API (`/search?format=json`).

An instance answers `format=json` only when `json` is listed under `search.formats` in its
settings.yml; otherwise it answers 403. Its limiter (bot detection) answers 429 to requests
that do not look like a browser's, e.g. without `text/html` in Accept or without
Accept-Language, so both are sent.
"""

from __future__ import annotations

from typing import Any

from crag_edge.correction.fallback.base import ENV_SEARXNG_URL, FallbackError
from crag_edge.correction.fallback.http import (
    Reply,
    WebProvider,
    WebResult,
    retry_after,
    score_field,
    text_field,
)

_HEADERS = {
    "Accept": "application/json, text/html;q=0.1",
    "Accept-Language": "en;q=0.9, *;q=0.5",
}


class SearxngProvider(WebProvider):
    """Web results from one SearXNG instance; `tokenizer` counts tokens like the corpus does."""

    name = "searxng"
    service = "SearXNG"
    url_setting = ENV_SEARXNG_URL
    not_this_api = f"check that {ENV_SEARXNG_URL} points at a SearXNG instance"

    def _ask(self, query: str, count: int) -> Reply:
        return self._send_search(
            "GET",
            f"is SearXNG running there? check {ENV_SEARXNG_URL}",
            headers=_HEADERS,
            params={"q": query, "format": "json"},
            follow_redirects=True,
        )

    def _status_error(self, reply: Reply) -> FallbackError:
        url = f"{self.base_url}/search"
        if reply.status == 403:
            return FallbackError(
                self.name,
                f"{url} refused format=json (403 Forbidden): the instance does not list "
                "`json` under `search.formats`",
                "enable `json` under `search.formats` in its settings.yml and restart SearXNG",
            )
        if reply.status == 429:
            return FallbackError(
                self.name,
                f"rate limited by {self.base_url} (429 Too Many Requests{retry_after(reply)})",
                "wait and retry; on your own instance add this host to `pass_ip` under "
                "`[botdetection.ip_lists]` in limiter.toml, or set `server.limiter: false`",
            )
        if reply.status == 401:
            return FallbackError(
                self.name,
                f"{url} asks for a login (401 Unauthorized)"
                + (": the user and password were refused" if self._auth else ""),
                f"write them into {ENV_SEARXNG_URL} (https://user:password@host)",
            )
        if reply.status == 404:
            return FallbackError(
                self.name,
                f"no search endpoint at {url} (404 Not Found)",
                f"set {ENV_SEARXNG_URL} to the instance's base URL (the page with the search box)",
            )
        return FallbackError(
            self.name, f"{url} answered HTTP {reply.status}", "check the SearXNG instance's logs"
        )

    def _results(self, data: Any, items: list[dict[str, Any]]) -> list[WebResult]:
        """SearXNG's results are already in the order of its score; none at all with failed
        engines is an error naming them."""
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
