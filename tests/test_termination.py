"""SIGTERM and Ctrl+C during an import are put off until the import is done, then stop the
command; outside an import they stop it at once."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# A module sent a signal while its own body runs (as a native extension's initialisation
# runs Python code), which finishes importing only if nothing was raised there.
SLOW_MODULE = """
import os, signal, sys, time
os.kill(os.getpid(), int(sys.argv[2]))
for _ in range(20):
    time.sleep(0.01)
FINISHED = True
"""

RUNNER = """
import os, sys, time
from crag_edge.console.termination import Terminated, stops_as_interrupts
sys.path.insert(0, sys.argv[1])
try:
    with stops_as_interrupts():
        if sys.argv[3] == "import":
            import slow_module
        else:
            os.kill(os.getpid(), int(sys.argv[2]))
        time.sleep(5)
    print("not stopped")
except Terminated:
    print("terminated", "after import" if "slow_module" in sys.modules else "at once")
except KeyboardInterrupt:
    print("interrupted", "after import" if "slow_module" in sys.modules else "at once")
"""

SIGNALS = [(signal.SIGTERM, "terminated"), (signal.SIGINT, "interrupted")]


def run(tmp_path: Path, signum: int, where: str) -> str:
    (tmp_path / "slow_module.py").write_text(textwrap.dedent(SLOW_MODULE))
    command = [sys.executable, "-c", RUNNER, str(tmp_path), str(int(signum)), where]
    ran = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return ran.stdout.strip()


@pytest.mark.parametrize(("signum", "said"), SIGNALS)
def test_a_signal_inside_an_import_stops_the_command_after_the_import(
    tmp_path: Path, signum: int, said: str
) -> None:
    assert run(tmp_path, signum, "import") == f"{said} after import"


@pytest.mark.parametrize(("signum", "said"), SIGNALS)
def test_a_signal_outside_an_import_stops_the_command_at_once(
    tmp_path: Path, signum: int, said: str
) -> None:
    assert run(tmp_path, signum, "now") == f"{said} at once"
