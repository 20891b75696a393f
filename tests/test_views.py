"""The caller's view fails closed: below the engine, nothing searches, counts or lists the
corpus without being told whose view it is (`crag_edge.groups.CorpusView`).

Retrieval, the loop, the corrections (the local fallback among them), the answer's support
check and the store take a view with no default, so a call that forgets it is a TypeError
(and a mypy error) rather than a search over every document; the store refuses a set or None
handed where a view belongs, since either would be read with another meaning. Above the
engine, every face names the view it asks with, the owner's included."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import crag_edge
from crag_edge.groups import CorpusView
from crag_edge.store import CorpusBackend
from crag_edge.store.factory import open_or_create_corpus
from tests.test_store import DIM, add_two_docs, unit

PACKAGE = Path(crag_edge.__file__).parent
BELOW_THE_ENGINE = ("retrieval", "loop", "correction", "answer", "store")
# What names or types a caller's view: a parameter of either has no default.
VIEW_NAMES = {"view", "groups", "caller"}
VIEW_TYPES = re.compile(r"\b(CorpusView|Groups)\b")
# The engine's methods that search for a caller: every face passes `view=` to them.
ENGINE_SEARCHES = {"query", "answer", "search", "search_passages"}


def modules_below_the_engine() -> Iterator[Any]:
    for package in BELOW_THE_ENGINE:
        root = importlib.import_module(f"crag_edge.{package}")
        yield root
        for found in pkgutil.walk_packages(root.__path__, f"{root.__name__}."):
            yield importlib.import_module(found.name)


def callables_of(module: Any) -> Iterator[tuple[str, Any]]:
    """Every function and class method a module defines, dataclasses' `__init__` included."""
    for name, value in vars(module).items():
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isfunction(value):
            yield name, value
        elif inspect.isclass(value):
            for attribute, member in vars(value).items():
                if inspect.isfunction(member):
                    yield f"{name}.{attribute}", member


def defaulted_views(function: Any) -> list[str]:
    """The parameters of `function` that take a view (by type, or a view's name annotated
    as possibly None) and have a default."""
    found = []
    for parameter in inspect.signature(function).parameters.values():
        annotation = str(parameter.annotation)
        takes_view = bool(VIEW_TYPES.search(annotation)) or (
            parameter.name in VIEW_NAMES and "None" in annotation
        )
        if takes_view and parameter.default is not inspect.Parameter.empty:
            found.append(f"{parameter.name}={parameter.default!r}")
    return found


def test_no_function_below_the_engine_has_a_default_view() -> None:
    checked, offenders = 0, []
    for module in modules_below_the_engine():
        for name, function in callables_of(module):
            checked += 1
            if found := defaulted_views(function):
                offenders.append(f"{module.__name__}.{name}({', '.join(found)})")
    assert checked > 300  # the walk reached the packages' modules
    assert offenders == []


def test_no_nested_function_below_the_engine_defaults_groups_or_view_either() -> None:
    """The walk above sees module-level functions and methods; this one reads the source for
    the rest (closures, lambdas)."""
    offenders = []
    for package in BELOW_THE_ENGINE:
        for path in sorted((PACKAGE / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                    offenders += [
                        f"{path.relative_to(PACKAGE)}:{node.lineno} {name}"
                        for name in _defaulted_names(node.args)
                        if name in {"view", "groups"}
                    ]
    assert offenders == []


def _defaulted_names(args: ast.arguments) -> list[str]:
    positional = [*args.posonlyargs, *args.args]
    with_default = positional[len(positional) - len(args.defaults) :]
    keyword = [
        arg for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True) if default
    ]
    return [arg.arg for arg in [*with_default, *keyword]]


def test_every_face_names_the_view_it_asks_the_engine_with() -> None:
    """The engine's own default is the owner's (whoever opened the corpus file); a face in
    this package never leans on it, so a face serving a caller cannot forget the caller.
    A method handed on to run elsewhere (`run_in_threadpool(engine.search, ..., view=...)`)
    counts as called by the call it is handed to."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == PACKAGE / "engine.py":
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
        for node in ast.walk(tree):
            if not _engine_search(node):
                continue
            making = [call for call in calls if call.func is node or node in call.args]
            if not any("view" in {kw.arg for kw in call.keywords} for call in making):
                offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}")
    assert offenders == []


def _engine_search(node: ast.AST) -> bool:
    """Whether `node` is `engine.query` (or `self.engine.answer`, ...)."""
    return (
        isinstance(node, ast.Attribute)
        and node.attr in ENGINE_SEARCHES
        and ast.unparse(node.value).split(".")[-1] == "engine"
    )


@pytest.fixture
def corpus(corpus_location: Path | str) -> Iterator[CorpusBackend]:
    with open_or_create_corpus(corpus_location, "test-embedder", DIM) as created:
        add_two_docs(created)
        yield created


def test_a_store_search_without_a_view_is_a_type_error(corpus: CorpusBackend) -> None:
    vector = unit(1, 0, 0, 0)
    with pytest.raises(TypeError, match="view"):
        corpus.search_terms(["cat"], 5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="view"):
        corpus.search_vec(vector, 5)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="view"):
        corpus.stats()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="view"):
        corpus.list_documents()  # type: ignore[call-arg]


@pytest.mark.parametrize("given", [None, frozenset({"hr"}), {"hr"}, "hr"])
def test_a_store_refuses_what_is_not_a_view(corpus: CorpusBackend, given: Any) -> None:
    """None would read as every document, a set as its own view: neither is taken for one."""
    for call in (
        lambda: corpus.search_terms(["cat"], 5, view=given),
        lambda: corpus.search_vec(unit(1, 0, 0, 0), 5, view=given),
        lambda: corpus.stats(view=given),
        lambda: corpus.list_documents(view=given),
    ):
        with pytest.raises(TypeError, match="expected a CorpusView"):
            call()


def test_the_owners_view_sees_what_a_view_of_no_groups_sees_in_an_untagged_corpus(
    corpus: CorpusBackend,
) -> None:
    """Both views reach the store's searches (untagged documents are everyone's)."""
    everything, untagged_only = CorpusView.everything(), CorpusView.of(())
    for view in (everything, untagged_only):
        assert {c for c, _ in corpus.search_terms(["cat"], 5, view=view)} == {1, 2}
        assert len(corpus.search_vec(unit(1, 0, 0, 0), 5, view=view)) == 3
    assert corpus.stats(view=everything).documents == corpus.stats(view=untagged_only).documents


def test_a_view_is_built_by_name_from_checked_groups() -> None:
    assert not CorpusView.everything().limited
    assert CorpusView.of(["hr", "finance"]) == CorpusView(frozenset({"finance", "hr"}))
    assert CorpusView.of(()).limited
    with pytest.raises(TypeError, match="str"):
        CorpusView.of("hr")
    with pytest.raises(ValueError, match="invalid group name"):
        CorpusView.of({"a b"})
    with pytest.raises(TypeError, match="frozenset"):
        CorpusView(["hr"])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="frozenset"):
        CorpusView(frozenset({1}))  # type: ignore[arg-type]
