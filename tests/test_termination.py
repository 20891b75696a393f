"""SIGTERM during an import is put off until the import is done, then stops the command."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

# A module that is sent SIGTERM while its own body runs (as a native extension's
# initialisation runs Python code), then finishes importing only if nothing was raised there.
SLOW_MODULE = """
import os, signal, time
os.kill(os.getpid(), signal.SIGTERM)
for _ in range(20):
    time.sleep(0.01)
FINISHED = True
"""

RUNNER = """
import sys, time
from crag_edge.console.termination import Terminated, sigterm_as_interrupt
sys.path.insert(0, sys.argv[1])
try:
    with sigterm_as_interrupt():
        import slow_module
        time.sleep(5)
    print("not stopped")
except Terminated:
    print("stopped after import" if "slow_module" in sys.modules else "stopped inside import")
"""


def test_sigterm_inside_an_import_stops_the_command_after_the_import(tmp_path: Path) -> None:
    (tmp_path / "slow_module.py").write_text(textwrap.dedent(SLOW_MODULE))
    ran = subprocess.run(
        [sys.executable, "-c", RUNNER, str(tmp_path)], capture_output=True, text=True, timeout=60
    )
    assert ran.stdout.strip() == "stopped after import", ran.stderr


def test_sigterm_outside_an_import_stops_the_command_at_once() -> None:
    runner = (
        "import os, signal, time\n"
        "from crag_edge.console.termination import Terminated, sigterm_as_interrupt\n"
        "try:\n"
        "    with sigterm_as_interrupt():\n"
        "        os.kill(os.getpid(), signal.SIGTERM)\n"
        "        time.sleep(5)\n"
        "    print('not stopped')\n"
        "except Terminated:\n"
        "    print('stopped')\n"
    )
    ran = subprocess.run([sys.executable, "-c", runner], capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip() == "stopped", ran.stderr
