"""crag-edge: Corrective RAG that runs fully offline.

    from crag_edge import Engine, Settings

    with Engine.open("kb.db", Settings.load(), create=True) as engine:
        engine.ingest(["docs/"])
        result = engine.query("How does the loop decide what to trust?")
        print(result.decision, [item.source for item in result.context])

The layers, bottom to top; each imports only from its own layer and those below it
(`tests/test_layers.py` holds the order and checks it):

- foundation: `types`, `config` (the one `Settings`, a section per component), `citations`,
  `sentences`, `text_boundary`, `version`; then `models/` (model runtimes, provisioning).
- `store/`: the `CorpusBackend` protocol; one SQLite file per corpus (FTS5, sqlite-vec:
  `store.Corpus`) or PostgreSQL + pgvector (`store/postgres/`).
- `ingest/` (files → chunks → vectors), `retrieval/` (dense, lexical, RRF fusion) and
  `grading/`: the cascade rules → signals → cross-encoder → LLM judge, and the decision
  CORRECT / AMBIGUOUS / INCORRECT.
- `correction/`: refine good evidence into strips, expand or rewrite the query, fall back to
  another source.
- `loop/`: the corrective loop that runs those per question (`CragLoop`), a state machine
  returning the `CragResult` of `result.py` that every interface shows.
- `answer/`: the cited answer written from the loop's context.
- `engine.py`: `Engine`, one corpus with its models and settings, the top of the core.
- tools (`evaluation/`, `training/`) and interfaces (`cli/`, `tui/`, `server/`), each a
  thin face over `Engine`.

`kernels/` holds the Numba kernels.

Where to add:

- a fallback provider: a class with the `FallbackProvider` protocol in
  `correction/fallback/` (see `local.py`), its name in `config.ProviderName`, what it
  needs in `config.FALLBACK_NEEDS`, its settings in `config.CorrectionSettings` and its
  construction in `correction/fallback/factory.py:build_providers`.
- a grading tier: a model with the `types.PairScorer` protocol, its name in `config.Tier`,
  built in `grading/factory.py:build_grader` and given its place in
  `grading/cascade.py:Grader`.
- a store backend: a class with the `store/backend.py:CorpusBackend` protocol (see
  `store/postgres/`), a subclass of `store/base.py:SqlCorpus` (the SQL both backends share),
  chosen by its location in `store/factory.py:open_corpus`.

The names below are the public API; each is imported on first use, so `import crag_edge`
stays cheap (the engine pulls in numpy, SQLite and the tokenizer).
"""

import typing as _typing
from importlib import import_module as _import_module

if _typing.TYPE_CHECKING:
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
