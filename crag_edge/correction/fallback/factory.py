"""Providers from configuration: names in preference order, each checked for what it needs.

Configuration mistakes (an unknown name, a provider without its URL, key or database) raise
here, when the engine starts, rather than failing every query later.
"""

from __future__ import annotations

from crag_edge.config import PROVIDER_NAMES, CorrectionSettings, RetrievalSettings
from crag_edge.correction.fallback.base import (
    ENV_DB,
    ENV_PROVIDERS,
    ENV_SEARXNG_URL,
    ENV_TAVILY_KEY,
    FallbackError,
    FallbackProvider,
)
from crag_edge.correction.fallback.local import LocalCorpusProvider
from crag_edge.correction.fallback.searxng import SearxngProvider
from crag_edge.correction.fallback.tavily import TavilyProvider
from crag_edge.types import Embedder


def build_providers(
    config: CorrectionSettings, retrieval: RetrievalSettings, embedder: Embedder
) -> list[FallbackProvider]:
    """The configured providers, in order. `embedder` is the engine's: the local corpus must
    share it, and web results count tokens with its tokenizer, as corpus chunks do; the local
    corpus is searched as `retrieval` says.

    No names configured means `local` if `config.fallback_db` is set, else no fallback.
    """
    names = list(config.fallback_providers) or (["local"] if config.fallback_db else [])
    providers: list[FallbackProvider] = []
    for name in names:
        if name not in PROVIDER_NAMES:
            raise FallbackError(
                name,
                "unknown fallback provider",
                f"use {', '.join(PROVIDER_NAMES)} in {ENV_PROVIDERS}",
            )
        if names.count(name) > 1:
            raise FallbackError(name, "listed more than once", f"fix {ENV_PROVIDERS}")
        providers.append(_build(name, config, retrieval, embedder))
    return providers


def _build(
    name: str, config: CorrectionSettings, retrieval: RetrievalSettings, embedder: Embedder
) -> FallbackProvider:
    timeout_s, max_results = config.fallback_timeout_s, config.fallback_max_results
    if name == "local":
        if config.fallback_db is None:
            raise FallbackError(name, "no fallback corpus configured", f"set {ENV_DB}")
        return LocalCorpusProvider(
            config.fallback_db,
            embedder,
            retrieval=retrieval,
            timeout_s=timeout_s,
            max_results=max_results,
        )
    if name == "searxng":
        if not config.searxng_url:
            raise FallbackError(
                name,
                "no SearXNG URL configured",
                f"set {ENV_SEARXNG_URL} (e.g. http://localhost:8888)",
            )
        return SearxngProvider(
            config.searxng_url,
            timeout_s=timeout_s,
            max_results=max_results,
            tokenizer=embedder.tokenizer,
        )
    if not config.tavily_api_key:
        raise FallbackError(name, "no API key configured", f"set {ENV_TAVILY_KEY}")
    return TavilyProvider(
        config.tavily_api_key.get_secret_value(),
        base_url=config.tavily_url,
        timeout_s=timeout_s,
        max_results=max_results,
        tokenizer=embedder.tokenizer,
    )
