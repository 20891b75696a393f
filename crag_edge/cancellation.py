"""Work that stops when nobody waits for it any more.

A question's work (retrieval, grading, corrections, the answer) can take minutes on a busy
machine; its caller may leave long before (a client hangs up, the TUI's Esc, Ctrl+C). The
caller holds a `Cancellation` and hands it to `Engine.query` or `Engine.answer`; cancelling it
makes the work raise `Cancelled` at its next check, so a server's worker is free again
within a stage, a prompt chunk or a token.

The checks sit where the work is cut into small steps: every stage's start and end
(`progress.Stopwatch`), and inside the model calls, between prompt chunks and after each
generated token or judged prompt, and an HTTP call to an LLM server or a web search is cut
(`http_bounds.Watchdog`). The calls deep inside the grader and the answer are not handed the
token: the engine runs its work inside `Cancellation.scope`, and those checks read the token
of the work running there (`check_cancelled`, `current`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar


class Cancelled(Exception):
    """The caller cancelled the work (it went away, or asked to stop); raised at the next
    check. Not a `RuntimeError`: the model calls' own failures are, and are handled as such."""


class Cancellation:
    """A token the caller sets (`cancel`) and the work checks (`check`); thread-safe."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask the work to stop; the first reason given is the one it stops with."""
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Raise `Cancelled` once the work was cancelled."""
        if self._event.is_set():
            raise Cancelled(self.reason)

    @contextmanager
    def scope(self) -> Iterator[None]:
        """Make this the token `check_cancelled` reads in the block (on this thread)."""
        token = _current.set(self)
        try:
            yield
        finally:
            _current.reset(token)


_current: ContextVar[Cancellation | None] = ContextVar("crag_edge_cancellation", default=None)


def current() -> Cancellation | None:
    """The token of the work running here (`Cancellation.scope`), None outside any: for
    what watches the work from elsewhere (an HTTP call's watchdog thread)."""
    return _current.get()


def check_cancelled() -> None:
    """Raise `Cancelled` when the work running here was cancelled (`Cancellation.scope`); a
    no-op outside any scope."""
    token = _current.get()
    if token is not None:
        token.check()


@contextmanager
def maybe_scope(cancel: Cancellation | None) -> Iterator[None]:
    """`cancel.scope()`, or nothing when there is no token."""
    if cancel is None:
        yield
        return
    with cancel.scope():
        yield
