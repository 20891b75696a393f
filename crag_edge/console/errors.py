"""How the command line reports failures: the project's own errors as one `error:` line,
everything else (a bug) with its traceback.

An error type listed here is a condition the user can fix (a setting, a file, a model to
pull), so its message is the whole story. Any other exception is a bug: hiding it behind one
line would hide where it happened. `--debug` (or CRAG_EDGE_DEBUG=1) shows the traceback of
the expected errors too. Shared by `crag_edge.cli` and `crag_edge.training.cli`.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, TypeVar

import typer

from crag_edge.config import SettingsError
from crag_edge.console.output import err, tell
from crag_edge.console.termination import TERMINATED_EXIT, Terminated, stops_as_interrupts
from crag_edge.evaluation import EvalDataError
from crag_edge.grading.corpus_calibration import CalibrationError
from crag_edge.models.chat_model import LlmServerError
from crag_edge.models.errors import ModelFileError
from crag_edge.models.llm import LlmCallError, LlmUnavailableError
from crag_edge.models.manifest import ManifestError, UnknownModelError
from crag_edge.models.provision import PullError
from crag_edge.models.registry import ModelNotInstalledError
from crag_edge.store import CorpusError
from crag_edge.text_boundary import QuestionError, printable_path

DEBUG_ENV = "CRAG_EDGE_DEBUG"
EXPECTED_ERRORS: tuple[type[Exception], ...] = (
    SettingsError,
    CalibrationError,
    ManifestError,
    PullError,
    ModelNotInstalledError,
    ModelFileError,
    LlmUnavailableError,
    LlmCallError,
    LlmServerError,
    CorpusError,
    EvalDataError,
    QuestionError,
    OSError,  # a file the command reads or writes: missing, a folder, no permission
)
# What was typed or set is wrong (exit 2), rather than something the command met (exit 1).
USAGE_ERRORS = (SettingsError, QuestionError, UnknownModelError)
SETTINGS_EXIT, FAILURE_EXIT, INTERRUPTED_EXIT = 2, 1, 130

F = TypeVar("F", bound=Callable[..., Any])
# Set by the root `--debug` option (which also reads CRAG_EDGE_DEBUG) for the command it runs.
_SHOW_TRACEBACKS: ContextVar[bool] = ContextVar("crag_edge_show_tracebacks", default=False)


def file_access_message(error: OSError) -> str:
    """An `OSError` from a file a command was given, said as the file and the reason."""
    where = printable_path(error.filename) if error.filename else None
    reason = error.strerror or str(error)
    return f"{where}: {reason}" if where else reason


def show_tracebacks(flag: bool) -> None:
    """Whether expected errors print their traceback before their line (the `--debug` flag)."""
    _SHOW_TRACEBACKS.set(flag)


def fail(exc: Exception) -> typer.Exit:
    """Print an expected error as one line (after its traceback under --debug); return the
    exit to raise: 2 for a bad setting, question or model id (`USAGE_ERRORS`), 1 for anything
    else. Call it inside `except`."""
    if _SHOW_TRACEBACKS.get():
        err.print_exception(show_locals=False)
    said = file_access_message(exc) if isinstance(exc, OSError) else str(exc)
    tell(("error:", "bold red"), f" {said}")
    return typer.Exit(SETTINGS_EXIT if isinstance(exc, USAGE_ERRORS) else FAILURE_EXIT)


def friendly_errors(command: F) -> F:
    """Wrap a command: expected errors become one line, Ctrl+C exits 130 and SIGTERM 143,
    each with one line; bugs propagate (Typer prints their traceback)."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with stops_as_interrupts():
                return command(*args, **kwargs)
        except EXPECTED_ERRORS as exc:
            raise fail(exc) from None
        except Terminated:
            tell(("terminated", "yellow"))
            raise typer.Exit(TERMINATED_EXIT) from None
        except KeyboardInterrupt:
            tell(("interrupted", "yellow"))
            raise typer.Exit(INTERRUPTED_EXIT) from None

    return wrapper  # type: ignore[return-value]
