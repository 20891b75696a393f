"""Bounded load test of a running `crag-edge serve` on loopback (docs/service.md).

For each concurrency level, `--requests` POST /v1/query calls are made by that many clients
(each request has a client timeout; the whole level has a time cap). Reported per level:
throughput of answered requests, p50/p95 latency of 200s, counts by status (503 = refused
at capacity, with Retry-After), and lost requests (transport errors or timeouts), which must
be 0: every request gets an answer, refused or served.

    crag-edge serve --db demo.db &      # CRAG_EDGE_GRADING_TIERS='["signals"]' for fast path
    python scripts/loadtest_server.py --url http://127.0.0.1:8080 --levels 1 4 16
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections import Counter
from urllib.parse import urlsplit

import httpx

from crag_edge.server.config import is_loopback

# Questions the sample corpus answers in one round (no correction, no LLM): the fast path.
QUESTIONS = [
    "What is reciprocal rank fusion?",
    "How do honeybees tell other bees where flowers are?",
    "What does WAL mode change in SQLite?",
    "How does photosynthesis store energy?",
    "How is software deployed on an air-gapped network?",
]


def run_level(
    url: str, clients: int, requests: int, timeout_s: float, cap_s: float, token: str | None
) -> dict[str, object]:
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    iterations: Counter[int] = Counter()
    lock = threading.Lock()
    next_index = iter(range(requests))
    deadline = time.monotonic() + cap_s
    headers = {"Authorization": f"Bearer {token}"} if token else {}

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=timeout_s, headers=headers) as client:
            while time.monotonic() < deadline:
                with lock:
                    i = next(next_index, None)
                if i is None:
                    return
                started = time.perf_counter()
                try:
                    r = client.post("/v1/query", json={"question": QUESTIONS[i % len(QUESTIONS)]})
                    key = str(r.status_code)
                    if r.status_code == 200:
                        rounds = r.json()["iterations"]
                        with lock:
                            iterations[rounds] += 1
                except httpx.TransportError as exc:
                    key = f"lost:{type(exc).__name__}"
                elapsed = time.perf_counter() - started
                with lock:
                    statuses[key] += 1
                    if key == "200":
                        latencies.append(elapsed)

    started = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - started
    sent = sum(statuses.values())
    ordered = sorted(latencies)

    def pct(p: float) -> float | None:
        return (
            round(ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000, 1)
            if ordered
            else None
        )

    return {
        "clients": clients,
        "sent": sent,
        "not_sent_time_cap": requests - sent,
        "statuses": dict(statuses),
        "served_by_iterations": dict(iterations),
        "lost": sum(v for k, v in statuses.items() if k.startswith("lost")),
        "wall_s": round(wall, 2),
        "served_per_s": round(statuses["200"] / wall, 2) if wall else 0.0,
        "p50_ms": pct(0.50),
        "p95_ms": pct(0.95),
        "mean_ms": round(statistics.fmean(ordered) * 1000, 1) if ordered else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--requests", type=int, default=48, help="requests per level")
    parser.add_argument("--timeout", type=float, default=120.0, help="per-request timeout (s)")
    parser.add_argument("--cap", type=float, default=300.0, help="time cap per level (s)")
    parser.add_argument("--token", default=None)
    args = parser.parse_args()
    host = urlsplit(args.url).hostname or ""
    if not is_loopback(host):
        parser.error("the load test only targets loopback servers")
    for clients in args.levels:
        print(
            json.dumps(
                run_level(args.url, clients, args.requests, args.timeout, args.cap, args.token)
            )
        )


if __name__ == "__main__":
    main()
