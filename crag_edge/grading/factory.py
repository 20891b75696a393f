"""Build a `Grader` from settings: load the model tiers that are installed and enabled."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from importlib.util import find_spec

from crag_edge import __version__
from crag_edge.config import Settings
from crag_edge.grading.cascade import Grader
from crag_edge.grading.llm_judge import DEFAULT_MODE, LlmJudge
from crag_edge.models.llm import LlamaRuntime
from crag_edge.models.manifest import load_manifest
from crag_edge.models.provision import model_path
from crag_edge.models.registry import load_cross_encoder
from crag_edge.observability import Metrics
from crag_edge.types import ScoredBatch


class LazyLlmJudge:
    """The LLM tier, loading the (large) model only when an item first reaches it."""

    def __init__(self, runtime: Callable[[], LlamaRuntime | None], name: str) -> None:
        self._runtime = runtime
        self._name = name
        self._judge: LlmJudge | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        with self._lock:
            if self._judge is None:
                runtime = self._runtime()
                if runtime is None:
                    neutral = [0.5] * len(passages)
                    return ScoredBatch(
                        neutral,
                        ["LLM could not be loaded; scored 0.5 each"],
                        list(range(len(passages))),
                    )
                self._judge = LlmJudge(runtime)
        return self._judge.score(query, passages)


def llm_installed(settings: Settings) -> bool:
    """The default LLM's file is pulled and llama-cpp-python is importable."""
    spec = load_manifest(settings.model_dir).get(settings.llm)
    path = model_path(settings.model_dir, spec) / spec.files[0].name
    return path.is_file() and find_spec("llama_cpp") is not None


def build_grader(
    settings: Settings,
    metrics: Metrics | None = None,
    *,
    llm: Callable[[], LlamaRuntime | None] | None = None,
) -> Grader:
    """A grader with every enabled tier whose model is installed; missing ones are reported
    as `unavailable` in each result rather than failing. `llm` supplies the shared runtime."""
    tiers = settings.grading_tiers
    cross_encoder = load_cross_encoder(settings) if "cross_encoder" in tiers else None
    versions = {}
    if cross_encoder is not None:
        versions["cross_encoder"] = model_version(settings, cross_encoder.name)
    judge = None
    if "llm" in tiers and llm is not None and llm_installed(settings):
        judge = LazyLlmJudge(llm, settings.llm)
        versions["llm"] = (
            f"{model_version(settings, settings.llm)}:{DEFAULT_MODE}:ctx{settings.llm_context}"
        )
    return Grader(
        settings, cross_encoder=cross_encoder, llm_judge=judge, metrics=metrics, versions=versions
    )


def model_version(settings: Settings, model_id: str) -> str:
    """What the evaluation cache keys a model's scores by: its id, the hash of its pinned
    files and the crag-edge release (prompts and pre-processing live in the code)."""
    spec = load_manifest(settings.model_dir).get(model_id)
    files = hashlib.sha256("".join(f.sha256 for f in spec.files).encode()).hexdigest()[:16]
    return f"{model_id}@{files}/crag-edge-{__version__}"
