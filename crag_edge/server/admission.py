"""Admission control for model work: a few running, a bounded number waiting, the rest refused.

The LLM and ONNX sessions are shared by every request, and on a 2-core box more than one or
two calls at once only makes each slower. Requests beyond `workers + max_waiting` (or that
wait longer than `timeout_s`) are refused at once with 503 and Retry-After instead of piling
up in memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class Overloaded(Exception):
    """No worker is free and the waiting line is full (or the wait timed out)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Admission:
    """`async with admission.slot():` runs the body on one of `workers` slots."""

    def __init__(self, workers: int, max_waiting: int, timeout_s: float) -> None:
        self.workers = workers
        self.max_waiting = max_waiting
        self.timeout_s = timeout_s
        self._semaphore = asyncio.Semaphore(workers)
        self.waiting = 0
        self.running = 0

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        await self.acquire()
        try:
            yield
        finally:
            self.release()

    async def acquire(self) -> None:
        """Take a slot for work that outlives one `async with` (a streamed answer)."""
        if self.running >= self.workers and self.waiting >= self.max_waiting:
            raise Overloaded("queue_full")
        self.waiting += 1
        try:
            await asyncio.wait_for(self._semaphore.acquire(), self.timeout_s)
        except TimeoutError:
            raise Overloaded("queue_timeout") from None
        finally:
            self.waiting -= 1
        self.running += 1

    def release(self) -> None:
        self.running -= 1
        self._semaphore.release()
