"""Save an SVG of the main screen after one question (the README's screenshot).

    python -m crag_edge.tui.screenshot --db demo.db --out docs/tui.svg "How does RRF work?"

Runs the real app headless (Textual's `run_test`), asks the question, waits for the answer.
"""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from crag_edge.config import Settings
from crag_edge.tui.app import CragApp


async def screenshot(
    db: Path, question: str, out: Path, size: tuple[int, int], timeout_s: float = 600.0
) -> Path:
    app = CragApp(db=db, settings=Settings.load())
    async with app.run_test(size=size) as pilot:
        waited = 0.0
        while app.engine is None:
            if waited > timeout_s:
                raise TimeoutError(f"the corpus {db} did not open in {timeout_s:.0f}s")
            await pilot.pause(0.2)
            waited += 0.2
        await pilot.press(*question, "enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        out.parent.mkdir(parents=True, exist_ok=True)
        app.save_screenshot(filename=out.name, path=str(out.parent))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("question")
    parser.add_argument("--db", type=Path, default=Path("demo.db"))
    parser.add_argument("--out", type=Path, default=Path("docs/tui.svg"))
    parser.add_argument("--size", default="120x36", help="WIDTHxHEIGHT in cells")
    args = parser.parse_args()
    width, height = (int(n) for n in args.size.lower().split("x"))
    path = asyncio.run(screenshot(args.db, args.question, args.out, (width, height)))
    print(path)


if __name__ == "__main__":
    main()
