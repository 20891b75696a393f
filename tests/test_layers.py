"""The layer contract: each module imports only from its own layer or the ones below it.

The order is written once, here, bottom to top; docs/architecture.md ("Layers") says it in
words, and the README and `crag_edge/__init__.py` link there. A module's layer is that of the
longest prefix of its dotted name listed below, so a tool's own command line (`training.cli`)
can sit with the interfaces while the rest of its package sits with the tools. The graph is
the one the cycle check reads (`tests.test_imports.import_graph`): every import that runs,
lazy ones included. Within the store, neither backend imports the other: what both need
lives in `store/` itself.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_imports import PACKAGE_ROOT, Graph, import_graph

LAYERS: list[tuple[str, list[str]]] = [
    (
        "foundation",
        [
            "version",
            "types",
            "config",
            "text_boundary",
            "sentences",
            "progress",
            "renamed",
            "cancellation",
            "observability",
            "groups",
            "locations",
            "http_bounds",
            "kernels",
            "attached",
            "citations",
        ],
    ),
    ("models", ["models"]),
    ("store", ["store"]),
    ("retrieval, ingest and grading", ["retrieval", "ingest", "grading"]),
    ("correction", ["correction"]),
    ("loop", ["loop", "result"]),
    ("answer", ["answer"]),
    ("engine", ["engine", "arguments"]),
    ("tools", ["evaluation", "training"]),
    ("interfaces", ["cli", "console", "tui", "server", "training.cli"]),
    ("public API", [""]),
]
STORE_BACKENDS = ("store.sqlite", "store.postgres")


def layer_of(module: str, package: str = "crag_edge") -> int:
    """The index in `LAYERS` of the longest listed prefix of `module`."""
    relative = module.removeprefix(package).removeprefix(".")
    best, best_length = None, -1
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            matches = relative == prefix or relative.startswith(prefix + ".") or prefix == ""
            if matches and len(prefix) > best_length:
                best, best_length = index, len(prefix)
    assert best is not None, f"{module} is in no layer: add it to LAYERS"
    return best


def upward_imports(graph: Graph, package: str) -> list[str]:
    """Every import from a higher layer, as 'importer (layer) → imported (layer)'."""
    return sorted(
        f"{importer} ({LAYERS[layer_of(importer, package)][0]}) → "
        f"{imported} ({LAYERS[layer_of(imported, package)][0]})"
        for importer, targets in graph.items()
        for imported in targets
        if layer_of(imported, package) > layer_of(importer, package)
    )


def backend_of(module: str, package: str = "crag_edge") -> str | None:
    """The store backend (of `STORE_BACKENDS`) that `module` belongs to, or None."""
    relative = module.removeprefix(package).removeprefix(".")
    return next((b for b in STORE_BACKENDS if relative == b or relative.startswith(b + ".")), None)


def cross_backend_imports(graph: Graph, package: str) -> list[str]:
    """Every import of one store backend's module by the other's, as 'importer → imported'."""
    arrows = []
    for importer, targets in graph.items():
        own = backend_of(importer, package)
        others = {t for t in targets if backend_of(t, package) not in (None, own)}
        arrows += [f"{importer} → {target}" for target in others if own is not None]
    return sorted(arrows)


def test_every_module_belongs_to_a_listed_layer() -> None:
    unlisted = [
        name
        for name in import_graph(PACKAGE_ROOT)
        if name != "crag_edge" and layer_of(name) == len(LAYERS) - 1
    ]
    assert not unlisted, f"modules in no layer (add them to LAYERS): {unlisted}"


def test_no_module_imports_from_a_layer_above_it() -> None:
    arrows = upward_imports(import_graph(PACKAGE_ROOT), "crag_edge")
    assert not arrows, "imports that run upwards:\n" + "\n".join(arrows)


def test_the_check_finds_an_upward_import(tmp_path: Path) -> None:
    """The check itself: an engine-level import inside the store is found, a downward one
    is not, and a lazy import inside a function counts."""
    package = tmp_path / "crag_edge"
    (package / "store").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store" / "__init__.py").write_text("from crag_edge import types\n")
    (package / "types.py").write_text("")
    (package / "engine.py").write_text("from crag_edge.store import Corpus\n")
    assert upward_imports(import_graph(package), "crag_edge") == []
    (package / "store" / "corpus.py").write_text("def f():\n    import crag_edge.engine\n")
    assert upward_imports(import_graph(package), "crag_edge") == [
        "crag_edge.store.corpus (store) → crag_edge.engine (engine)"
    ]


def test_neither_store_backend_imports_the_other() -> None:
    arrows = cross_backend_imports(import_graph(PACKAGE_ROOT), "crag_edge")
    assert not arrows, "store backends importing each other (share through store/):\n" + "\n".join(
        arrows
    )


def test_the_check_finds_a_backend_importing_the_other(tmp_path: Path) -> None:
    """The check itself: a backend importing the shared half is fine, importing the other
    backend (lazily, too) is found, whichever way round."""
    store = tmp_path / "crag_edge" / "store"
    for backend in ("sqlite", "postgres"):
        (store / backend).mkdir(parents=True)
        (store / backend / "__init__.py").write_text("")
    for module in ("__init__.py", "store/__init__.py", "store/cache_key.py"):
        (tmp_path / "crag_edge" / module).write_text("")
    (store / "sqlite" / "cache.py").write_text("from crag_edge.store.cache_key import x\n")
    (store / "postgres" / "caches.py").write_text("from crag_edge.store import cache_key\n")
    assert cross_backend_imports(import_graph(tmp_path / "crag_edge"), "crag_edge") == []
    (store / "postgres" / "caches.py").write_text("from crag_edge.store.sqlite.cache import x\n")
    (store / "sqlite" / "cache.py").write_text("def f():\n    import crag_edge.store.postgres\n")
    assert cross_backend_imports(import_graph(tmp_path / "crag_edge"), "crag_edge") == [
        "crag_edge.store.postgres.caches → crag_edge.store.sqlite.cache",
        "crag_edge.store.sqlite.cache → crag_edge.store.postgres",
    ]
