"""No import cycle among the `crag_edge` modules.

A cycle makes the import order matter (a module half-initialised when the other one reads it)
and ties layers that should only depend downwards. The graph is read from the source with
`ast`: every `import` / `from ... import` of a `crag_edge` module, at module level or inside a
function (a lazy import still ties the two modules), except those under `if TYPE_CHECKING:`,
which never run.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import crag_edge

PACKAGE_ROOT = Path(crag_edge.__file__).parent

Graph = dict[str, set[str]]


def module_names(root: Path) -> dict[str, Path]:
    """Dotted name → file for every module of the package at `root`."""
    names = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    return names


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def import_nodes(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under `node`, skipping the bodies of `if TYPE_CHECKING:`."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and is_type_checking(child.test):
            for orelse in child.orelse:
                yield from import_nodes(ast.Module(body=[orelse], type_ignores=[]))
        else:
            yield from import_nodes(child)


def from_base(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module a `from ... import` reads from, with a relative one resolved against the
    importing module's package."""
    if not node.level:
        return node.module or ""
    package = module.split(".") if is_package else module.split(".")[:-1]
    package = package[: len(package) - (node.level - 1)]
    return ".".join([*package, *([node.module] if node.module else [])])


def imported(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> Iterator[str]:
    """The dotted names `node` imports: for `from a import b`, `a.b` (maybe a module) and `a`."""
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    base = from_base(node, module, is_package)
    yield base
    yield from (f"{base}.{alias.name}" for alias in node.names)


def import_graph(root: Path) -> Graph:
    """Module → the package's modules it imports. `from a import b` imports the module `a.b`
    when there is one; `a` itself only when some name comes from it (its `__init__`)."""
    names = module_names(root)
    graph: Graph = {name: set() for name in names}
    for name, path in names.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in import_nodes(tree):
            base, *members = imported(node, name, path.name == "__init__.py")
            if isinstance(node, ast.Import):
                targets = {base, *members}
            else:
                targets = {m if m in names else base for m in members}
            graph[name].update(t for t in targets if t in names and t != name)
    return graph


def find_cycle(graph: Graph) -> list[str] | None:
    """One import cycle as a path that ends where it starts, or None."""
    done: set[str] = set()
    for start in sorted(graph):
        path: list[str] = []
        on_path: set[str] = set()
        stack = [(start, iter(sorted(graph[start])))]
        if start in done:
            continue
        path.append(start)
        on_path.add(start)
        while stack:
            node, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
            elif child in on_path:
                return [*path[path.index(child) :], child]
            elif child not in done:
                stack.append((child, iter(sorted(graph[child]))))
                path.append(child)
                on_path.add(child)
    return None


def test_crag_edge_has_no_import_cycle() -> None:
    graph = import_graph(PACKAGE_ROOT)
    assert "crag_edge.tui.app" in graph["crag_edge.tui"]  # the lazy import is read
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " → ".join(cycle or [])


def test_the_check_finds_a_cycle_and_ignores_type_checking_imports(tmp_path: Path) -> None:
    """The check itself: a cycle through a function-level import is found; one that only
    exists under TYPE_CHECKING is not."""
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.sub import b\n")
    (package / "sub" / "b.py").write_text("def f():\n    from .. import c\n")
    (package / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import pkg.a\n"
    )
    graph = import_graph(package)
    assert graph["pkg.a"] == {"pkg.sub.b"} and graph["pkg.sub.b"] == {"pkg.c"}
    assert find_cycle(graph) is None
    (package / "c.py").write_text("import pkg.a\n")
    assert find_cycle(import_graph(package)) == ["pkg.a", "pkg.sub.b", "pkg.c", "pkg.a"]
