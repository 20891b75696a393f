"""The shipped evaluator two ways, for benchmarks that compare what ingest pays for it.

The shipped evaluator is a query tower: its passage readings are the embedder's vectors,
which ingest stores anyway. `reading_alone` runs its graph over each passage instead, which
costs what a segment-scorer evaluator (`crag-edge evaluator train`) costs: a second model
pass per chunk. Benchmarks put the two side by side in one run.
"""

from __future__ import annotations

import pytest

from crag_edge.config import Settings
from crag_edge.models.manifest import load_manifest
from crag_edge.models.provision import EMBEDDER_ONNX_INT8, model_path
from crag_edge.models.registry import load_cross_encoder
from crag_edge.models.segment_scorer import OnnxSegmentScorer, segment_head
from crag_edge.types import Embedder


def shipped_evaluator(embedder: Embedder, threads: int = 0) -> OnnxSegmentScorer:
    """The installed evaluator, reading passages with `embedder` (skips when it cannot)."""
    evaluator = load_cross_encoder(Settings.load(onnx_threads=threads).models, embedder)
    if not isinstance(evaluator, OnnxSegmentScorer) or evaluator.passage_reader is None:
        pytest.skip("the installed evaluator does not read passages with the embedder")
    return evaluator


def reading_alone(evaluator: OnnxSegmentScorer, threads: int = 0) -> OnnxSegmentScorer:
    """The same graph reading every passage itself, one model pass each."""
    models = Settings.load().models
    folder = model_path(models.model_dir, load_manifest(models.model_dir).get(evaluator.name))
    graph = folder / EMBEDDER_ONNX_INT8
    head = segment_head(graph)
    assert head is not None
    return OnnxSegmentScorer(
        graph, folder / "tokenizer.json", evaluator.name, head, threads=threads
    )
