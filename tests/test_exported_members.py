"""The public API: what `from crag_edge import ...` offers, and that importing it stays cheap."""

from __future__ import annotations

import subprocess
import sys

import crag_edge
from crag_edge.answer.finished import Answer
from crag_edge.config import Settings, SettingsError
from crag_edge.engine import Engine
from crag_edge.grading.corpus_calibration import CalibrationError
from crag_edge.groups import CorpusView
from crag_edge.models.llm import LlmCallError
from crag_edge.models.registry import ModelNotInstalledError
from crag_edge.result import CragResult
from crag_edge.store import CorpusError
from crag_edge.text_boundary import QuestionError
from crag_edge.types import Decision

EXPORTED = {
    "Answer": Answer,
    "CalibrationError": CalibrationError,
    "CorpusError": CorpusError,
    "CorpusView": CorpusView,
    "CragResult": CragResult,
    "Decision": Decision,
    "Engine": Engine,
    "LlmCallError": LlmCallError,
    "ModelNotInstalledError": ModelNotInstalledError,
    "QuestionError": QuestionError,
    "Settings": Settings,
    "SettingsError": SettingsError,
}


def test_all_lists_exactly_the_public_api_in_order() -> None:
    assert crag_edge.__all__ == sorted(EXPORTED)


def test_each_exported_name_is_the_object_its_module_defines() -> None:
    for name, obj in EXPORTED.items():
        assert getattr(crag_edge, name) is obj, name
        assert obj.__module__.startswith("crag_edge."), name


def test_star_import_gives_the_public_api_and_nothing_else() -> None:
    namespace: dict[str, object] = {}
    exec("from crag_edge import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(EXPORTED)


def test_every_public_attribute_is_exported_or_a_subpackage() -> None:
    public = {name for name in dir(crag_edge) if not name.startswith("_")}
    modules = {name for name in public if type(getattr(crag_edge, name)).__name__ == "module"}
    assert public - modules == set(EXPORTED)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        crag_edge.Nope  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as exc:
        assert "Nope" in str(exc)
    else:
        raise AssertionError("crag_edge.Nope should not exist")


def test_import_does_not_load_the_engine_or_any_model_runtime() -> None:
    code = (
        "import sys, crag_edge\n"
        "heavy = ('crag_edge.engine', 'numpy', 'onnxruntime', 'torch', 'llama_cpp', 'apsw')\n"
        "print(' '.join(m for m in heavy if m in sys.modules))\n"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert loaded == ""
