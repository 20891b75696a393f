"""Turn settings into ready runtimes: find a model's verified files or say how to get them."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from crag_edge.config import ModelSettings, SettingsError
from crag_edge.models.manifest import ModelSpec, load_manifest
from crag_edge.models.provision import EMBEDDER_ONNX, EMBEDDER_ONNX_INT8, model_path

if TYPE_CHECKING:
    from crag_edge.models.cross_encoder import OnnxCrossEncoder
    from crag_edge.models.embedder import OnnxEmbedder
    from crag_edge.models.segment_scorer import OnnxSegmentScorer
    from crag_edge.types import Embedder

_log = logging.getLogger(__name__)


class ModelNotInstalledError(RuntimeError):
    """A model the settings ask for is not in the model folder; the message says how to pull it."""


def installed_file(settings: ModelSettings, model_id: str, name: str) -> Path:
    """The path of one file of a pulled model, or a `ModelNotInstalledError` with the fix."""
    spec = load_manifest(settings.model_dir).get(model_id)
    path = model_path(settings.model_dir, spec) / name
    if not path.is_file():
        raise ModelNotInstalledError(
            f"{spec.role} {model_id!r} is not installed ({path} is missing): run "
            f"`crag-edge models pull {model_id}` (model folder: {settings.model_dir}, "
            f"set CRAG_EDGE_MODEL_DIR to use another)"
        )
    return path


def announce(role: str, model_id: str) -> None:
    """One log line as a model starts loading (`serve` writes it to stderr as it loads, so a
    slow start says what it is waiting for); silent where no logging is configured."""
    _log.info("loading the %s %s", role, model_id, extra={"model": model_id, "role": role})


def embedder_spec(settings: ModelSettings) -> ModelSpec:
    spec = load_manifest(settings.model_dir).get(settings.embedder)
    if spec.role != "embedder":
        raise ModelNotInstalledError(f"{settings.embedder!r} is a {spec.role}, not an embedder")
    return spec


def load_embedder(settings: ModelSettings) -> OnnxEmbedder:
    """The ONNX embedder named by the settings, at the configured precision.

    The model id recorded in a corpus omits the precision: int8 vectors stay within
    cosine ~0.99 of fp32 ones, so a corpus may be queried at either precision.
    """
    from crag_edge.models.embedder import OnnxEmbedder

    spec = embedder_spec(settings)
    graph = EMBEDDER_ONNX_INT8 if settings.embedder_precision == "int8" else EMBEDDER_ONNX
    announce("embedder", spec.model_id)
    return OnnxEmbedder(
        onnx_path=installed_file(settings, spec.model_id, graph),
        tokenizer_path=installed_file(settings, spec.model_id, "tokenizer.json"),
        model_id=spec.model_id,
        threads=settings.onnx_threads,
        batch_size=settings.embed_batch_size,
        max_tokens=settings.embed_max_tokens,
    )


def load_cross_encoder(
    settings: ModelSettings, embedder: Embedder | None = None
) -> OnnxCrossEncoder | OnnxSegmentScorer | None:
    """The configured cross-encoder, or the first installed one; None when none is installed.

    A missing cross-encoder is not an error: the cascade runs without that tier and reports
    it as unavailable. The int8 graph is used when present (faster on CPU); naming a
    model that is not a cross-encoder is a configuration error and raises. An evaluator that
    reads passages with an embedder other than `embedder` is skipped when chosen by default
    and a configuration error when named.
    """
    from crag_edge.models.cross_encoder import MAX_LENGTH
    from crag_edge.models.segment_scorer import PassageReaderError, open_cross_encoder

    manifest = load_manifest(settings.model_dir)
    if settings.cross_encoder is None:
        candidates = manifest.by_role("cross-encoder")
    else:
        spec = manifest.get(settings.cross_encoder)
        if spec.role != "cross-encoder":
            raise ModelNotInstalledError(
                f"cross_encoder = {settings.cross_encoder!r} names a model of role "
                f"{spec.role!r}, not 'cross-encoder'"
            )
        candidates = [spec]
    for spec in candidates:
        folder = model_path(settings.model_dir, spec)
        graphs = [folder / name for name in (EMBEDDER_ONNX_INT8, EMBEDDER_ONNX)]
        graph = next((g for g in graphs if g.is_file()), None)
        tokenizer = folder / "tokenizer.json"
        if graph is None or not tokenizer.is_file():
            continue
        announce("evaluator", spec.model_id)
        try:
            return open_cross_encoder(
                graph,
                tokenizer,
                spec.model_id,
                threads=settings.onnx_threads,
                max_length=min(MAX_LENGTH, _max_positions(folder)),
                embedder=embedder,
            )
        except PassageReaderError as error:
            if settings.cross_encoder is not None:
                raise SettingsError(f"cross_encoder: {error}") from error
            _log.warning("skipping the installed evaluator: %s", error)
    return None


def _max_positions(folder: Path) -> int:
    """The checkpoint's position-table size: longer inputs would fail inside the graph."""
    config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    return int(config.get("max_position_embeddings", 512))
