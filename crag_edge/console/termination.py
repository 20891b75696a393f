"""SIGTERM stops a command the way Ctrl+C does, and neither stops it inside an import.

A service manager (or `kill`) sends SIGTERM; by default the process dies mid-write without a
word. While a command runs, the signal instead raises `Terminated`, a KeyboardInterrupt, so
every path that stops cleanly on Ctrl+C stops the same way.

Python runs a signal handler at the next bytecode, wherever that is. Inside an import that
can be Python code a native extension's initialisation called (onnx's enums are built from
C++ during `import onnx`): an exception raised there unwinds through C++ that cannot pass
it on, and the process aborts (SIGABRT, "terminate called …") instead of stopping. So while
an import is under way either signal is put off: the handler asks for it again a moment
later, by which time the import has finished and the exception is raised where Python code
alone is running.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

TERMINATED_EXIT = 128 + signal.SIGTERM
RETRY_AFTER_IMPORT_S = 0.05  # how soon a put-off signal is delivered again
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


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if inside_import(frame):
        _redeliver(signum)
        return
    raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt


# Each signal taken over, with the handler it must still have: one someone else set (a
# server's own) is left alone.
_TAKEN_OVER: dict[signal.Signals, Any] = {
    signal.SIGTERM: signal.SIG_DFL,
    signal.SIGINT: signal.default_int_handler,
}


@contextlib.contextmanager
def stops_as_interrupts() -> Iterator[None]:
    """While a command runs, SIGTERM raises `Terminated` and Ctrl+C KeyboardInterrupt, both
    put off while an import runs. Only the main thread may set handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = [s for s, usual in _TAKEN_OVER.items() if signal.getsignal(s) is usual]
    for signum in taken:
        signal.signal(signum, _interrupt)
    try:
        yield
    finally:
        for signum in taken:
            signal.signal(signum, _TAKEN_OVER[signum])
