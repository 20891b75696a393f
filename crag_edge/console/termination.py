"""SIGTERM stops a command the way Ctrl+C does, but never from inside an import.

A service manager (or `kill`) sends SIGTERM; by default the process dies mid-write without a
word. While a command runs, the signal instead raises `Terminated`, a KeyboardInterrupt, so
every path that stops cleanly on Ctrl+C stops the same way.

Python runs a signal handler at the next bytecode, wherever that is. Inside an import that
can be Python code a native extension's initialisation called (onnx's enums are built from
C++ during `import onnx`): an exception raised there unwinds through C++ that cannot pass
it on, and the process aborts (SIGABRT) instead of stopping. So while any import is under
way the signal is put off: the handler asks for it again a moment later, by which time the
import has finished and the exception can be raised where Python code alone is running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType

TERMINATED_EXIT = 128 + signal.SIGTERM
RETRY_AFTER_IMPORT_S = 0.05  # how soon a put-off SIGTERM is delivered again
_IMPORT_MACHINERY = "<frozen importlib"  # the file name every import's frames carry


class Terminated(KeyboardInterrupt):
    """SIGTERM (a service manager stopping the command, `kill`), raised where Ctrl+C would
    be: it is a KeyboardInterrupt so that every path that stops cleanly on Ctrl+C (an
    ingest's embedding part in flight, a write transaction) stops the same way."""


def inside_import(frame: FrameType | None) -> bool:
    """Whether `frame` or any frame that called it belongs to the import machinery."""
    while frame is not None:
        if frame.f_code.co_filename.startswith(_IMPORT_MACHINERY):
            return True
        frame = frame.f_back
    return False


def _redeliver(signum: int) -> None:
    timer = threading.Timer(RETRY_AFTER_IMPORT_S, os.kill, (os.getpid(), signum))
    timer.daemon = True
    timer.start()


def _raise_terminated(signum: int, frame: FrameType | None) -> None:
    if inside_import(frame):
        _redeliver(signum)
        return
    raise Terminated


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM raises `Terminated`. Only the main thread may set
    handlers, and a handler someone else set (a server's own) is left alone."""
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
