"""Audit events and Prometheus metrics: every grading decision is explainable after the fact.

An `AuditLog` collects the structured events of one query (rule hits, discarded items, parse
failures, the decision); the result carries them, and `AuditSink` appends them as JSON lines
to a file shared by all queries. `Metrics` owns its own Prometheus registry, so two engines
in one process (or tests) never share counters.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

# Stage latencies span from under a millisecond (rules) to tens of seconds (LLM judge, slow CPU).
LATENCY_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)
# Fields every audit line written in this context carries: the service puts the name of the
# token that asked here, per request, and the worker threads running the engine copy it.
audit_context: ContextVar[Mapping[str, Any] | None] = ContextVar(
    "crag_edge_audit_context", default=None
)


@dataclass(frozen=True)
class AuditEvent:
    """One thing that happened, with its reasons as plain fields (JSON-serialisable)."""

    event: str
    at: float
    fields: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"event": self.event, "at": self.at, **self.fields}


class AuditLog:
    """The events of one query, in order."""

    def __init__(self) -> None:
        self.events: list[AuditEvent] = []

    def emit(self, event: str, **fields: Any) -> AuditEvent:
        record = AuditEvent(event, time.time(), fields)
        self.events.append(record)
        return record

    def named(self, event: str) -> list[AuditEvent]:
        return [e for e in self.events if e.event == event]


class AuditSink:
    """Appends audit events as JSON lines to one file; safe to share between threads. Each line
    carries the `audit_context` of the writer (who asked) beside the caller's own fields."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def write(self, events: list[AuditEvent], **context: Any) -> None:
        context = {**(audit_context.get() or {}), **context}
        lines = "".join(
            json.dumps(context | e.to_dict(), ensure_ascii=False, default=str) + "\n"
            for e in events
        )
        # The folder must exist: the audit_log setting is checked at start, none is created.
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(lines)


class Metrics:
    """Prometheus counters and latency histograms of one engine."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.decisions = Counter(
            "crag_decisions", "CRAG decisions by outcome", ["decision"], registry=self.registry
        )
        self.fast_path = Counter(
            "crag_fast_path_hits", "Fast-path rule hits by rule", ["rule"], registry=self.registry
        )
        self.discarded = Counter(
            "crag_items_discarded", "Items dropped below discard_below", registry=self.registry
        )
        self.tier_items = Counter(
            "crag_tier_items", "Items scored by each grading tier", ["tier"], registry=self.registry
        )
        self.cache_hits = Counter(
            "crag_cache_hits",
            "Model scores served by the evaluation cache, by tier",
            ["tier"],
            registry=self.registry,
        )
        self.warnings = Counter(
            "crag_grading_warnings",
            "Grading warnings (e.g. unparseable LLM output)",
            ["kind"],
            registry=self.registry,
        )
        self.stage_seconds = Histogram(
            "crag_stage_seconds",
            "Latency of each pipeline stage",
            ["stage"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return generate_latest(self.registry)
