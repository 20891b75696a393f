"""Fallback providers: evidence from outside the corpus when grading finds it missing.

`build_providers(settings.correction, settings.retrieval, embedder)` builds them;
`run_fallbacks(providers, query, limit, timeout)` asks them all at once and returns a
`FallbackOutcome` whose hits are ordinary `Hit`s (`origin="fallback:<provider>"`, negative
chunk ids) ready for grading, plus which providers answered and why the others did not.
"""

from crag_edge.correction.fallback.base import (
    FallbackError,
    FallbackProvider,
    fallback_id,
)
from crag_edge.correction.fallback.factory import build_providers
from crag_edge.correction.fallback.local import LocalCorpusProvider
from crag_edge.correction.fallback.runner import FallbackOutcome, merge, run_fallbacks
from crag_edge.correction.fallback.searxng import SearxngProvider
from crag_edge.correction.fallback.tavily import TavilyProvider

__all__ = [
    "FallbackError",
    "FallbackOutcome",
    "FallbackProvider",
    "LocalCorpusProvider",
    "SearxngProvider",
    "TavilyProvider",
    "build_providers",
    "fallback_id",
    "merge",
    "run_fallbacks",
]
