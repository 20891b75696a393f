"""Time and peak memory of ingesting each small file that amplifies (`tests/amplifiers.py`),
each in a folder of its own beside a canary file, by the CLI under `/usr/bin/time -v`, with
the default settings (docs/formats.md, "Files that amplify"):

    python scripts/measure_amplifiers.py OUT      # writes OUT/<file>/, prints a table

The peak is the largest resident set of the ingest process or of any program it ran
(Tesseract), as `time -v` reports it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.amplifiers import AMPLIFIERS, write


def measure(out: Path, name: str) -> str:
    folder = write(out / name, name)
    db = out / f"{name}.db"
    command = ["/usr/bin/time", "-v", sys.executable, "-m", "crag_edge.cli", "ingest"]
    done = subprocess.run(
        [*command, "--db", str(db), str(folder), "--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    peak = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)[1])
    wall = re.search(r"Elapsed \(wall clock\) time.*: (\S+)", done.stderr)[1]
    report = json.loads(done.stdout)
    lines = [reason for _, reason in report["errors"] + report["warnings"]]
    size = (folder / name).stat().st_size
    outcome = "; ".join(lines) or "read"
    return (
        f"| `{name}` | {size:,} B | {done.returncode} | {wall} | {peak / 1024:,.0f} MB | "
        f"{report['added']} | {outcome} |"
    )


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/measure_amplifiers.py OUT")
    out = Path(sys.argv[1]).resolve()
    print("| file | size | exit | wall time | peak RSS | added | report lines |")
    print("|---|---|---|---|---|---|---|")
    for name in AMPLIFIERS:
        print(measure(out, name), flush=True)


if __name__ == "__main__":
    main()
