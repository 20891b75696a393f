"""The fallback contract: one protocol, one error type, and ids for outside evidence.

Providers are configured by the `correction` section of the settings (`build_providers`).

Fallback results come from outside the corpus being queried, so their chunk and document ids
are synthesised: stable negative hashes that never collide with a corpus rowid (always >= 1).
"""

from __future__ import annotations

import hashlib
from typing import Protocol

from crag_edge.config import env_name
from crag_edge.groups import CorpusView
from crag_edge.types import Hit

# The settings the messages point users at.
ENV_PROVIDERS = env_name("fallback_providers")
ENV_TIMEOUT = env_name("fallback_timeout_s")
ENV_DB = env_name("fallback_db")
ENV_SEARXNG_URL = env_name("searxng_url")
ENV_TAVILY_KEY = env_name("tavily_api_key")
ENV_TAVILY_URL = env_name("tavily_url")

# 52 bits: ids stay exact in JSON read by JavaScript (doubles hold integers up to 2**53).
_ID_BITS = 52


class FallbackError(Exception):
    """A provider could not answer; `message` says what went wrong, `hint` what to change."""

    def __init__(self, provider: str, message: str, hint: str = "") -> None:
        self.provider = provider
        self.message = message
        self.hint = hint
        super().__init__(f"{provider} fallback: {self.detail}")

    @property
    def detail(self) -> str:
        """Message and hint in one line, without the provider name."""
        return f"{self.message}; {self.hint}" if self.hint else self.message


class FallbackProvider(Protocol):
    """A source of evidence outside the corpus. `search` returns at most
    `min(limit, max_results)` hits, best first, within about `timeout_s`, or raises
    `FallbackError`; hits carry `origin="fallback:<name>"` and negative chunk ids. A
    provider holding documents tagged with access groups returns only those `view` sees
    (`crag_edge.groups.CorpusView`); the web holds none, so web providers ignore it."""

    @property
    def name(self) -> str: ...

    @property
    def timeout_s(self) -> float: ...

    @property
    def max_results(self) -> int: ...

    def search(self, query: str, limit: int, view: CorpusView) -> list[Hit]: ...

    def close(self) -> None:
        """Release files or connections; the provider may not be used afterwards."""
        ...


def fallback_id(*parts: str) -> int:
    """A stable negative id for evidence identified by `parts` (same parts, same id)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return -1 - (int.from_bytes(digest.digest(), "big") & ((1 << _ID_BITS) - 1))
