"""crag-edge: Corrective RAG that runs fully offline.

    from crag_edge import Engine, Settings

    with Engine.open("kb.db", Settings.load(), create=True) as engine:
        engine.ingest(["docs/"])
        result = engine.query("How does the loop decide what to trust?")
        print(result.decision, [item.source for item in result.context])

The layers, every module with its one job and where to add a provider, a grading tier, a
step of the loop or a store backend: docs/architecture.md (`tests/test_layers.py` holds the
layer order and checks it).

The names below are the public API; each is imported on first use, so `import crag_edge`
stays cheap (the engine pulls in numpy, SQLite and the tokenizer).
"""

import typing as _typing
from importlib import import_module as _import_module

if _typing.TYPE_CHECKING:
    from crag_edge.answer.finished import Answer
    from crag_edge.config import Settings, SettingsError
    from crag_edge.engine import Engine
    from crag_edge.grading.corpus_calibration import CalibrationError
    from crag_edge.groups import CorpusView
    from crag_edge.models.llm import LlmCallError
    from crag_edge.models.registry import ModelNotInstalledError
    from crag_edge.result import CragResult
    from crag_edge.store.errors import CorpusError
    from crag_edge.text_boundary import QuestionError
    from crag_edge.types import Decision

from crag_edge.version import __version__ as __version__

__all__ = [
    "Answer",
    "CalibrationError",
    "CorpusError",
    "CorpusView",
    "CragResult",
    "Decision",
    "Engine",
    "LlmCallError",
    "ModelNotInstalledError",
    "QuestionError",
    "Settings",
    "SettingsError",
]

# The module that defines each public name. The errors are the ones a caller of `Engine`
# meets: bad settings, an unusable corpus file, a model not pulled, a generation that failed
# mid-answer, a calibration without its LLM, a question with nothing to search for.
_HOMES = {
    "Answer": "crag_edge.answer.finished",
    "CalibrationError": "crag_edge.grading.corpus_calibration",
    "CorpusError": "crag_edge.store.errors",
    "CorpusView": "crag_edge.groups",
    "CragResult": "crag_edge.result",
    "Decision": "crag_edge.types",
    "Engine": "crag_edge.engine",
    "LlmCallError": "crag_edge.models.llm",
    "ModelNotInstalledError": "crag_edge.models.registry",
    "QuestionError": "crag_edge.text_boundary",
    "Settings": "crag_edge.config",
    "SettingsError": "crag_edge.config",
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'crag_edge' has no attribute {name!r}")
    value = getattr(_import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
