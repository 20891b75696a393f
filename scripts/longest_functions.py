"""List the longest function and method bodies in a package, to keep each one readable.

A body is measured from its first statement after the docstring to the end of its last
statement, so the signature and the docstring do not count, and a nested function counts
both on its own and inside the function that holds it. The house rule is that a body fits
on a screen; this shows which ones do not.

    python scripts/longest_functions.py            # the ten longest bodies in crag_edge/
    python scripts/longest_functions.py -n 20 crag_edge/server
"""

from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass(frozen=True)
class Body:
    path: Path
    line: int
    qualname: str
    lines: int


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last one."""
    statements = node.body
    if ast.get_docstring(node, clean=False) is not None and len(statements) > 1:
        statements = statements[1:]
    last = statements[-1].end_lineno or statements[-1].lineno
    return last - statements[0].lineno + 1


def _walk(node: ast.AST, path: Path, prefix: str) -> Iterator[Body]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, _FUNCTIONS):
            qualname = f"{prefix}{child.name}"
            yield Body(path, child.lineno, qualname, body_lines(child))
            yield from _walk(child, path, f"{qualname}.")
        elif isinstance(child, ast.ClassDef):
            yield from _walk(child, path, f"{prefix}{child.name}.")
        else:
            yield from _walk(child, path, prefix)


def function_bodies(root: Path) -> list[Body]:
    """Every function and method under `root`, longest first."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    bodies = [
        body
        for path in files
        for body in _walk(ast.parse(path.read_text(encoding="utf-8"), str(path)), path, "")
    ]
    return sorted(bodies, key=lambda body: (-body.lines, str(body.path), body.line))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path("crag_edge"))
    parser.add_argument("-n", "--count", type=int, default=10, help="how many to list")
    args = parser.parse_args(argv)
    for body in function_bodies(args.root)[: args.count]:
        print(f"{body.path}:{body.line} {body.qualname} {body.lines}")


if __name__ == "__main__":
    main()
