"""Tavily, a hosted search API for LLM applications: `POST /search` with a bearer API key.

Replies are `{"query", "results": [{"title", "url", "content", "score"}], ...}`; errors carry
`{"detail": {"error": "..."}}`. Besides 401/429, Tavily uses 432 (plan limit) and 433
(pay-as-you-go limit). The key is sent only in the Authorization header and never appears in
an error message.
"""

from __future__ import annotations

from typing import Any

from tokenizers import Tokenizer

from crag_edge.correction.fallback.base import ENV_TAVILY_KEY, ENV_TAVILY_URL, FallbackError
from crag_edge.correction.fallback.http import (
    Reply,
    WebProvider,
    WebResult,
    decode_json,
    retry_after,
    score_field,
    text_field,
)
from crag_edge.groups import CorpusView
from crag_edge.text_boundary import one_line
from crag_edge.types import Hit

TAVILY_URL = "https://api.tavily.com"


class TavilyProvider(WebProvider):
    """Web results from the Tavily search API (basic depth: one credit per search)."""

    name = "tavily"
    service = "Tavily"
    url_setting = ENV_TAVILY_URL
    not_this_api = f"check that {ENV_TAVILY_URL} is the Tavily API"
    api_max_results = 20  # the API refuses max_results above 20

    def __init__(
        self,
        api_key: str | None,
        *,
        base_url: str = TAVILY_URL,
        timeout_s: float = 5.0,
        max_results: int = 5,
        tokenizer: Tokenizer | None = None,
    ) -> None:
        super().__init__(
            base_url, timeout_s=timeout_s, max_results=max_results, tokenizer=tokenizer
        )
        self.api_key = api_key

    def __repr__(self) -> str:
        return f"TavilyProvider(base_url={self.base_url!r}, api_key=<hidden>)"

    def search(self, query: str, limit: int, view: CorpusView) -> list[Hit]:
        if not self.api_key:
            raise FallbackError(self.name, "no API key configured", f"set {ENV_TAVILY_KEY}")
        return super().search(query, limit, view)

    def _ask(self, query: str, count: int) -> Reply:
        return self._send_search(
            "POST",
            f"check the network path to Tavily, or {ENV_TAVILY_URL}",
            headers={"Authorization": f"Bearer {self.api_key}", "Accept": "application/json"},
            json_body={"query": query, "max_results": count, "search_depth": "basic"},
        )

    def _status_error(self, reply: Reply) -> FallbackError:
        status, detail = reply.status, _detail(reply)
        if self.api_key:
            detail = detail.replace(self.api_key, "<hidden>")
        key_hint = f"check {ENV_TAVILY_KEY}"
        if status == 401:
            return FallbackError(
                self.name, f"API key rejected (401 Unauthorized{detail})", key_hint
            )
        if status == 403:
            return FallbackError(self.name, f"access forbidden (403 Forbidden{detail})", key_hint)
        if status == 429:
            return FallbackError(
                self.name,
                f"rate limited (429 Too Many Requests{retry_after(reply)}{detail})",
                "wait and retry, or send fewer queries per minute",
            )
        if status == 432:
            return FallbackError(
                self.name,
                f"the plan's credit limit is used up (432{detail})",
                "upgrade the Tavily plan or wait for the monthly reset",
            )
        if status == 433:
            return FallbackError(
                self.name,
                f"the pay-as-you-go limit is reached (433{detail})",
                "raise the pay-as-you-go limit in the Tavily dashboard",
            )
        if 300 <= status < 400:  # not followed: the key would go along
            target = one_line(reply.headers.get("Location", "nowhere"))[:200]
            return FallbackError(
                self.name,
                f"{self.base_url} redirects to {target} (HTTP {status})",
                f"set {ENV_TAVILY_URL} to the address it redirects to",
            )
        if status == 400:
            return FallbackError(
                self.name,
                f"request refused (400 Bad Request{detail})",
                "the Tavily API may have changed; report it with this message",
            )
        return FallbackError(
            self.name,
            f"{self.base_url} answered HTTP {status}{detail}",
            "Tavily may be unavailable; retry later" if status >= 500 else key_hint,
        )

    def _results(self, data: Any, items: list[dict[str, Any]]) -> list[WebResult]:
        return [
            WebResult(
                url=text_field(item, "url"),
                title=text_field(item, "title"),
                content=text_field(item, "content"),
                score=score_field(item),
            )
            for item in items
            if text_field(item, "title") or text_field(item, "content")
        ]


def _detail(reply: Reply) -> str:
    """': <reason>' from Tavily's `{"detail": {"error": ...}}` error body, else ''."""
    try:
        data = decode_json(TavilyProvider.name, reply, "")
    except FallbackError:
        return ""
    detail = data.get("detail") if isinstance(data, dict) else None
    if isinstance(detail, dict):
        detail = detail.get("error")
    return f": {one_line(detail)[:200]}" if isinstance(detail, str) and detail else ""
