"""Run every configured provider at once, within one deadline, and merge what comes back.

Providers run in threads (their work is network or SQLite I/O, which releases the GIL). The
caller waits at most `timeout` seconds: a provider still running then is recorded as a
timeout and its thread finishes on its own, bounded by the provider's own timeout. A question
cancelled meanwhile stops the wait, and its providers' HTTP calls are cut. A failure
never raises; it is recorded with the reason and the fix.

Results are merged with Reciprocal Rank Fusion rather than by score: the providers' scores are
not comparable (SearXNG's grows with the number of engines, Tavily's lies in [0, 1], the local
corpus's is an RRF score itself). With disjoint results RRF is a fair interleave, rank 1 of
each provider before any rank 2, in the configured order; a URL that several providers
return counts once and rises, since agreement between independent sources is evidence.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextvars import copy_context
from dataclasses import dataclass, field, replace
from typing import Any

from crag_edge.cancellation import check_cancelled
from crag_edge.correction.fallback.base import ENV_TIMEOUT, FallbackError, FallbackProvider
from crag_edge.correction.fallback.http import url_key
from crag_edge.groups import CorpusView
from crag_edge.http_bounds import CANCEL_POLL_S
from crag_edge.retrieval import rrf
from crag_edge.types import Hit


@dataclass(frozen=True)
class FallbackOutcome:
    """Merged hits (ranked, capped, without duplicate URLs), the providers that answered,
    `(provider, reason)` for each that did not, and each provider's wall time."""

    hits: list[Hit]
    used: list[str] = field(default_factory=list)
    failures: list[tuple[str, str]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


def run_fallbacks(
    providers: Sequence[FallbackProvider],
    query: str,
    limit: int,
    timeout: float,
    *,
    rrf_k: int = 60,
    view: CorpusView,
) -> FallbackOutcome:
    """Ask every provider for `limit` results concurrently, on behalf of a caller who sees
    `view` (`crag_edge.groups.CorpusView`); never raises for a provider."""
    if not providers or limit <= 0 or not query.strip():
        return FallbackOutcome([])
    started = time.perf_counter()
    pool = ThreadPoolExecutor(max_workers=len(providers), thread_name_prefix="crag-fallback")
    try:
        # Each provider in the caller's context: a cancelled question cuts its HTTP call.
        futures = [
            pool.submit(copy_context().run, _timed, p, query, limit, view) for p in providers
        ]
        _wait_cancellable(futures, timeout)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    waited_ms = round((time.perf_counter() - started) * 1000, 3)
    used: list[str] = []
    failures: list[tuple[str, str]] = []
    timings: dict[str, float] = {}
    answers: list[list[Hit]] = []
    for provider, future in zip(providers, futures, strict=True):
        if not future.done():
            timings[provider.name] = waited_ms
            failures.append(
                (
                    provider.name,
                    f"no answer within {timeout:g} s; check that it is responsive, "
                    f"or raise {ENV_TIMEOUT}",
                )
            )
            continue
        result, timings[provider.name] = future.result()
        if isinstance(result, FallbackError):
            failures.append((provider.name, result.detail))
        elif isinstance(result, Exception):  # a provider bug must not cost the query either
            failures.append((provider.name, f"unexpected {type(result).__name__}: {result}"))
        else:
            used.append(provider.name)
            answers.append(result[:limit])
    return FallbackOutcome(merge(answers, limit, rrf_k), used, failures, timings)


def _wait_cancellable(futures: Sequence[Future[Any]], timeout: float) -> None:
    """Wait for every future, at most `timeout` seconds, and no longer than it takes to see
    that the question was cancelled (`cancellation`)."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        _, pending = wait(futures, timeout=min(left, CANCEL_POLL_S))
        check_cancelled()
        if not pending:
            return


def merge(answers: Sequence[Sequence[Hit]], limit: int, rrf_k: int = 60) -> list[Hit]:
    """Fuse ranked lists (in preference order) by RRF, one hit per URL or chunk, capped."""
    ids: dict[str, int] = {}
    first: dict[int, Hit] = {}
    # Ids are handed out rank by rank across lists, so RRF's final tie-break (lowest id)
    # keeps the configured provider order among hits of equal rank.
    for depth in range(max((len(hits) for hits in answers), default=0)):
        for hits in answers:
            if depth < len(hits):
                item = ids.setdefault(_identity(hits[depth]), len(ids))
                first.setdefault(item, hits[depth])
    ranked = {
        str(position): [(ids[_identity(hit)], hit.score) for hit in hits]
        for position, hits in enumerate(answers)
    }
    fused = rrf(ranked, rrf_k)[:limit]
    return [replace(first[f.item_id], rank=rank, score=f.score) for rank, f in enumerate(fused, 1)]


def _timed(
    provider: FallbackProvider, query: str, limit: int, view: CorpusView
) -> tuple[list[Hit] | Exception, float]:
    """The provider's hits or its exception, with the time it took either way."""
    started = time.perf_counter()
    try:
        result: list[Hit] | Exception = provider.search(query, limit, view)
    except Exception as exc:
        result = exc
    return result, round((time.perf_counter() - started) * 1000, 3)


def _identity(hit: Hit) -> str:
    """Web results are the same evidence when their URLs match; corpus chunks by chunk id."""
    origin = hit.chunk.metadata.get("fallback", {})
    url = origin.get("url") if isinstance(origin, dict) else None
    return f"url:{url_key(url)}" if isinstance(url, str) else f"chunk:{hit.chunk.chunk_id}"
