"""Embed one group of chunks on a worker thread while ingest reads and chunks the next.

Reading, parsing and chunking documents (and writing the group before) cost CPU time that
the models would otherwise wait for; onnxruntime releases the GIL, so the embedding of
group N runs while the calling thread prepares group N+1. At most one group is in flight:
memory stays bounded and the caller still writes each group in one transaction, in order,
on its own thread (the database connection never changes thread). A group is embedded in
parts; `close` stops the one in flight at the end of its current part, so an interrupted
ingest of one large file (thousands of chunks in one group) exits in seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

from crag_edge.types import Vector

Group = TypeVar("Group")


class Closing(Exception):
    """Raised inside a group's embedding once `EmbedAhead.close` was called: the group would
    be dropped anyway, so its remaining parts are not worth embedding."""


class EmbedAhead(Generic[Group]):
    """Runs `embed(group)` for one group at a time; `submit` hands back the group before.

    With `overlap=False` every group is embedded on the calling thread as it is submitted
    (what a caller measuring the overlap's gain compares against). Errors of the embedding
    surface on the calling thread, from the `submit` or `drain` that returns its group.
    """

    def __init__(self, embed: Callable[[Group], Vector], *, overlap: bool = True) -> None:
        self._embed = embed
        self._worker = ThreadPoolExecutor(1, "crag-edge-embed") if overlap else None
        self._in_flight: tuple[Group, Future[Vector]] | None = None
        self._closing = threading.Event()

    def keep_going(self) -> None:
        """`embed` calls this between the parts of a group; raises `Closing` after `close`."""
        if self._closing.is_set():
            raise Closing

    def submit(self, group: Group) -> tuple[Group, Vector] | None:
        """Start embedding `group`; returns the previous group with its vectors (None for
        the first), once they are ready."""
        if self._worker is None:
            started: Future[Vector] = Future()
            started.set_result(self._embed(group))
        else:
            started = self._worker.submit(self._embed, group)
        previous, self._in_flight = self._in_flight, (group, started)
        return None if previous is None else (previous[0], previous[1].result())

    def drain(self) -> tuple[Group, Vector] | None:
        """The group still in flight with its vectors, waiting for them; None if none is."""
        previous, self._in_flight = self._in_flight, None
        return None if previous is None else (previous[0], previous[1].result())

    def close(self) -> None:
        """Stop the worker; a group still in flight stops after its current part and is
        dropped (never written: its documents keep their old state, as after an
        interruption). Ctrl+C during that wait (at most one part) is raised after it: a
        process that leaves with the worker inside onnxruntime aborts, and an interrupted
        `Thread.join` takes the thread for stopped while it runs on."""
        in_flight, self._in_flight = self._in_flight, None
        self._closing.set()
        if self._worker is None:
            return
        interrupted: KeyboardInterrupt | None = None
        while in_flight is not None and not in_flight[1].done():
            try:
                wait([in_flight[1]])
            except KeyboardInterrupt as stop:  # Ctrl+C, or SIGTERM as the CLI raises it
                interrupted = stop
        self._worker.shutdown(wait=True)
        if interrupted is not None:
            raise interrupted
