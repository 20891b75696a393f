"""Readiness: what a replica needs besides its own process, asked briefly on every probe.

A load balancer sends traffic only to replicas whose /readyz answers 200, so the probe asks
each outside dependency one cheap question with a short deadline: the corpus database a
trivial query, the LLM server (when `llm_url` is set) its model list. A dependency that does
not answer within `PROBE_TIMEOUT_S` takes the replica out of rotation, named with the reason;
liveness (/healthz) asks nothing, so a database outage never gets replicas restarted.
"""

from __future__ import annotations

import time

from crag_edge.config import ModelSettings
from crag_edge.models.chat_model import LlmCallError, LlmServerError
from crag_edge.models.llm_http import CallTimedOut, LlmHttp
from crag_edge.store.backend import CorpusBackend
from crag_edge.store.errors import CorpusError

PROBE_TIMEOUT_S = 2.0


class DependencyProbe:
    """Asks the corpus database and the LLM server (if any) whether they answer."""

    def __init__(self, corpus: CorpusBackend, models: ModelSettings) -> None:
        self._corpus = corpus
        self._llm: LlmHttp | None = None
        if models.llm_url:
            key = models.llm_api_key.get_secret_value() if models.llm_api_key else None
            self._llm = LlmHttp(models.llm_url, key, retries=0)

    @property
    def names(self) -> list[str]:
        """What this probe checks."""
        return ["database", "llm"] if self._llm is not None else ["database"]

    def failures(self) -> dict[str, str]:
        """Each dependency that did not answer, with the reason (empty: all answered)."""
        failed = {}
        try:
            self._corpus.ping(PROBE_TIMEOUT_S)
        except CorpusError as exc:
            failed["database"] = str(exc)
        if self._llm is not None:
            try:
                self._llm.get("/models", time.monotonic() + PROBE_TIMEOUT_S)
            except CallTimedOut:
                failed["llm"] = f"{self._llm.base_url}/models: no answer in {PROBE_TIMEOUT_S:g} s"
            except (LlmCallError, LlmServerError) as exc:
                failed["llm"] = str(exc)
        return failed
