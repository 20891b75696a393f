"""The fallback contract: one protocol, one error type, one config, and ids for outside evidence.

Fallback results come from outside the corpus being queried, so their chunk and document ids
are synthesised: stable negative hashes that never collide with a corpus rowid (always >= 1).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from crag_edge.retrieval import MODES, Mode
from crag_edge.types import Hit

PROVIDER_NAMES = ("local", "searxng", "tavily")

# The settings the messages point users at (the engine maps them onto `FallbackConfig`).
ENV_PROVIDERS = "CRAG_EDGE_FALLBACK_PROVIDERS"
ENV_TIMEOUT = "CRAG_EDGE_FALLBACK_TIMEOUT_S"
ENV_DB = "CRAG_EDGE_FALLBACK_DB"
ENV_SEARXNG_URL = "CRAG_EDGE_SEARXNG_URL"
ENV_TAVILY_KEY = "CRAG_EDGE_TAVILY_API_KEY"
ENV_TAVILY_URL = "CRAG_EDGE_TAVILY_URL"

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
    `FallbackError`; hits carry `origin="fallback:<name>"` and negative chunk ids."""

    @property
    def name(self) -> str: ...

    @property
    def timeout_s(self) -> float: ...

    @property
    def max_results(self) -> int: ...

    def search(self, query: str, limit: int) -> list[Hit]: ...

    def close(self) -> None:
        """Release files or connections; the provider may not be used afterwards."""
        ...


@dataclass(frozen=True)
class FallbackConfig:
    """Everything `build_providers` needs, decoupled from `Settings` so tests and tools can
    build providers directly. An empty `providers` means `local` when `local_db` is set
    (the air-gapped default), else no fallback at all."""

    providers: tuple[str, ...] = ()
    timeout_s: float = 5.0
    max_results: int = 5
    local_db: Path | None = None
    searxng_url: str | None = None
    tavily_api_key: str | None = None
    tavily_url: str = "https://api.tavily.com"
    retrieval_mode: Mode = "hybrid"
    candidates: int = 100
    rrf_k: int = 60

    def __post_init__(self) -> None:
        if not self.timeout_s > 0:
            raise ValueError(f"fallback timeout_s must be > 0 (got {self.timeout_s})")
        if self.max_results < 1:
            raise ValueError(f"fallback max_results must be >= 1 (got {self.max_results})")
        if self.retrieval_mode not in MODES:
            raise ValueError(
                f"unknown retrieval mode {self.retrieval_mode!r}; use one of {', '.join(MODES)}"
            )


def fallback_id(*parts: str) -> int:
    """A stable negative id for evidence identified by `parts` (same parts, same id)."""
    digest = hashlib.blake2b("\x1f".join(parts).encode("utf-8", "surrogatepass"), digest_size=8)
    return -1 - (int.from_bytes(digest.digest(), "big") & ((1 << _ID_BITS) - 1))
