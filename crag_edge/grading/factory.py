"""Build a `Grader` from settings: load the model tiers that are installed and enabled."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Sequence
from importlib.util import find_spec

from crag_edge.config import GradingSettings, ModelSettings
from crag_edge.grading.cascade import Grader
from crag_edge.grading.llm_judge import DEFAULT_MODE, LlmJudge
from crag_edge.models.chat_model import ChatModel
from crag_edge.models.manifest import load_manifest
from crag_edge.models.provision import model_path
from crag_edge.models.registry import load_cross_encoder
from crag_edge.observability import Metrics
from crag_edge.types import Embedder, ScoredBatch
from crag_edge.version import __version__


class LazyLlmJudge:
    """The LLM tier, loading the (large) model only when an item first reaches it."""

    def __init__(
        self, runtime: Callable[[], ChatModel | None], name: str, focus_tokens: int = 0
    ) -> None:
        self._runtime = runtime
        self._name = name
        self._focus_tokens = focus_tokens
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
                self._judge = LlmJudge(runtime, focus_tokens=self._focus_tokens)
        return self._judge.score(query, passages)


def llm_installed(models: ModelSettings) -> bool:
    """An LLM server is configured, or the default LLM's file is pulled and llama-cpp-python
    is importable."""
    if models.llm_url:
        return True
    spec = load_manifest(models.model_dir).get(models.llm)
    path = model_path(models.model_dir, spec) / spec.files[0].name
    return path.is_file() and find_spec("llama_cpp") is not None


def build_grader(
    grading: GradingSettings,
    models: ModelSettings,
    metrics: Metrics | None = None,
    *,
    llm: Callable[[], ChatModel | None] | None = None,
    embedder: Embedder | None = None,
) -> Grader:
    """A grader with every enabled tier whose model is installed; missing ones are reported
    as `unavailable` in each result rather than failing. `llm` supplies the shared runtime;
    `embedder`, the one an evaluator that reads passages with it shares."""
    tiers = grading.grading_tiers
    cross_encoder = load_cross_encoder(models, embedder) if "cross_encoder" in tiers else None
    versions = {}
    if cross_encoder is not None:
        versions["cross_encoder"] = model_version(models, cross_encoder.name)
    judge = None
    if "llm" in tiers and llm is not None and llm_installed(models):
        focus = grading.judge_focus_tokens
        judge = LazyLlmJudge(llm, models.llm_model_name or models.llm_url or models.llm, focus)
        versions["llm"] = (
            f"{llm_version(models)}:{DEFAULT_MODE}:ctx{models.llm_context}:focus{focus}"
        )
    return Grader(
        grading, cross_encoder=cross_encoder, llm_judge=judge, metrics=metrics, versions=versions
    )


def llm_version(models: ModelSettings) -> str:
    """The LLM judge's cache key: the pulled model's, or the server's URL and model name (a
    server's scores differ slightly from the in-process model's, so they are not mixed)."""
    if models.llm_url:
        return f"{models.llm_model_name or 'listed-first'}@{models.llm_url}/crag-edge-{__version__}"
    return model_version(models, models.llm)


def model_version(models: ModelSettings, model_id: str) -> str:
    """What the evaluation cache keys a model's scores by: its id, the hash of its pinned
    files and the crag-edge release (prompts and pre-processing live in the code)."""
    spec = load_manifest(models.model_dir).get(model_id)
    files = hashlib.sha256("".join(f.sha256 for f in spec.files).encode()).hexdigest()[:16]
    return f"{model_id}@{files}/crag-edge-{__version__}"
