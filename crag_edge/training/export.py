"""From a trained torch model to an installed cross-encoder: ONNX, int8, checks, card, manifest.

The torch model is saved as an HF-style checkpoint and converted by the same torch-free
`convert_bert` that `models pull` uses, so what ships is what the runtime has always loaded.
The conversion is then checked against torch on real pairs (max |logit difference|), the
int8 graph's ranking quality is measured, and the files are registered in
`<model_dir>/manifest.local.toml` (sha256-pinned, `local` source) and pulled like any model.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
import tomllib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from tokenizers import Encoding

from crag_edge.grading.auc import roc_auc
from crag_edge.models.bert_onnx import convert_bert
from crag_edge.models.manifest import LOCAL_MANIFEST, ModelSpec, load_manifest
from crag_edge.models.onnx_session import create_session, pad_batch
from crag_edge.models.provision import EMBEDDER_ONNX, EMBEDDER_ONNX_INT8, sha256_of
from crag_edge.models.quantize import quantize_int8
from crag_edge.models.segment_scorer import open_cross_encoder
from crag_edge.types import Embedder

CARD = "MODEL_CARD.md"
RELEASE_DIR = "release"
# What the runtime needs: the int8 graph, its tokenizer, the config (max positions), the card.
RELEASE_FILES = (EMBEDDER_ONNX_INT8, "tokenizer.json", "config.json", CARD)
MAX_FP32_DIFF = 1e-3  # a larger torch/ONNX gap means a conversion bug, not rounding
LATENCY_PAIRS = 20
LATENCY_RUNS = 5


class ExportError(RuntimeError):
    """The exported graph does not compute what the trained model computes."""


def export_onnx(checkpoint: Path, out_dir: Path) -> tuple[Path, Path]:
    """fp32 and int8 graphs of a saved checkpoint."""
    fp32 = convert_bert(checkpoint, out_dir / EMBEDDER_ONNX, head="classification")
    return fp32, quantize_int8(fp32, out_dir / EMBEDDER_ONNX_INT8)


def onnx_logits(
    graph: Path, encodings: Sequence[Encoding], threads: int, batch_size: int = 32
) -> npt.NDArray[np.float32]:
    """Logits of a classification graph for already-encoded pairs, in input order."""
    session = create_session(graph, threads)
    out = np.empty(len(encodings), dtype=np.float32)
    for start in range(0, len(encodings), batch_size):
        batch = list(encodings[start : start + batch_size])
        out[start : start + len(batch)] = session.run(["logits"], pad_batch(batch))[0][:, 0]
    return out


def agreement(reference: npt.NDArray[np.float32], other: npt.NDArray[np.float32]) -> float:
    return float(np.max(np.abs(reference - other))) if len(reference) else 0.0


def auc(logits: npt.NDArray[np.float32], labels: Sequence[float]) -> float | None:
    """ROC-AUC against labels rounded to 0/1; None when one class is missing."""
    hard = [int(label >= 0.5) for label in labels]
    if len(set(hard)) < 2:
        return None
    return round(roc_auc(logits.tolist(), hard), 4)


def latency_ms(
    graph: Path,
    tokenizer: Path,
    query: str,
    passages: Sequence[str],
    embedder: Embedder | None = None,
) -> float:
    """Median milliseconds to score `passages` (20) for one query, 2 threads, as the cascade
    does without stored passage readings; the first call warms up and is not counted.
    `embedder`: the passage reader of a `query-tower` evaluator."""
    scorer = open_cross_encoder(graph, tokenizer, "latency", threads=2, embedder=embedder)
    scorer.score(query, passages)
    runs = []
    for _ in range(LATENCY_RUNS):
        started = time.perf_counter()
        scorer.score(query, passages)
        runs.append((time.perf_counter() - started) * 1000)
    return round(statistics.median(runs), 1)


def release(out_dir: Path, files: dict[str, Path]) -> Path:
    """Copy the files the runtime needs into `<out>/release/`, the folder that is registered."""
    target = out_dir / RELEASE_DIR
    target.mkdir(parents=True, exist_ok=True)
    for name in RELEASE_FILES:
        shutil.copyfile(files[name], target / name)
    return target


def pinned_file(path: Path, source: dict[str, str]) -> dict[str, Any]:
    """A manifest `files` entry for `path`: its name, size and sha256, and one source."""
    return {
        "name": path.name,
        "size": path.stat().st_size,
        "sha256": sha256_of(path),
        "sources": [source],
    }


def register(
    model_dir: Path, model_id: str, folder: Path, license_text: str, description: str
) -> ModelSpec:
    """Add (or replace) `model_id` in `<model_dir>/manifest.local.toml`, role cross-encoder,
    every file pinned by size and sha256 with a `local` source in `folder`."""
    entry: dict[str, Any] = {
        "role": "cross-encoder",
        "license": license_text,
        "description": description,
        "files": [
            pinned_file(folder / name, {"kind": "local", "path": str((folder / name).resolve())})
            for name in RELEASE_FILES
        ],
    }
    path = model_dir / LOCAL_MANIFEST
    data = tomllib.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    models: dict[str, Any] = data.get("models", {})
    models[model_id] = entry
    model_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(manifest_toml(models), encoding="utf-8")
    tmp.replace(path)
    return load_manifest(model_dir).get(model_id)


LOCAL_COMMENT = (
    "# Models added on this machine (e.g. by `crag-edge evaluator train`); same format as",
    "# the built-in manifest. Listed before the built-in models, so they are preferred.",
)


def manifest_toml(models: dict[str, Any], comment: Sequence[str] = LOCAL_COMMENT) -> str:
    """The manifest's own small TOML subset (the stdlib reads TOML but cannot write it)."""
    lines = list(comment)
    for model_id, entry in models.items():
        key = _toml_value(model_id)
        lines += ["", f"[models.{key}]"]
        lines += [f"{k} = {_toml_value(v)}" for k, v in entry.items() if k != "files"]
        for file in entry.get("files", []):
            lines += ["", f"[[models.{key}.files]]"]
            lines += [f"{k} = {_toml_value(v)}" for k, v in file.items() if k != "sources"]
            lines.append("sources = [")
            for source in file.get("sources", []):
                inline = ", ".join(f"{k} = {_toml_value(v)}" for k, v in source.items())
                lines.append(f"    {{ {inline} }},")
            lines.append("]")
    return "\n".join(lines) + "\n"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)  # JSON string escapes are valid TOML
    raise TypeError(f"cannot write {type(value).__name__} to the manifest")


ARCHITECTURE_TEXT = {
    "cross": "joint attention over the pair, a new 1-logit classifier on [CLS] (pooler)",
    "segment": (
        "segment scorer: each text attends only to itself (positions restart), a weighted "
        "cosine of the two mean-pooled halves; untrained, it is exactly the embedder's cosine"
    ),
    "query-tower": (
        "query tower: a segment scorer whose passage half is the embedder itself, frozen, "
        "and whose query half and weighted-cosine head were trained against its vectors"
    ),
}


RUNTIME_TEXT = {
    "cross": "One forward pass per (query, passage) pair.",
    "segment": (
        "Its reading of each passage is stored at ingest, so grading a hit list costs one "
        "query encoding."
    ),
    "query-tower": (
        "Its reading of a passage is the embedder's vector of it, which ingest stores for "
        "retrieval anyway: each chunk is read once, and grading a hit list costs one query "
        "encoding."
    ),
}


EVALUATOR_ABOUT = (
    "A model that reads a (query, passage) pair and scores whether the passage is relevant\n"
    "evidence for the query (sigmoid of one logit). It is the cross-encoder tier of crag-edge's\n"
    "grading cascade, int8, CPU."
)


def model_card(report: dict[str, Any]) -> str:
    """MODEL_CARD.md: what the model is, what it was trained on (with licences), how it was
    trained, how well it does and how to reproduce it."""
    data, train, checks = report["data"], report["training"], report["checks"]
    origins = "\n".join(f"| {k} | {v} |" for k, v in sorted(data["origins"].items()))
    val = checks.get("validation_auc_torch")
    return f"""# {report["model_id"]}: {report.get("kind", "crag-edge retrieval evaluator")}

{report.get("about", EVALUATOR_ABOUT)}
{RUNTIME_TEXT[train["architecture"]]}

## Model

- Base: `{train["base_model"]}` (Apache-2.0): its first {train["layers"]} layers;
  {ARCHITECTURE_TEXT[train["architecture"]]}; vocabulary {train["vocab_size"]:,} tokens,
  {train["max_positions"]} positions.
- Parameters: {train["parameters"]:,}; files: `model.int8.onnx` {report["size_bytes"]["int8"]:,} B
  (int8 dynamic, per-channel), fp32 graph {report["size_bytes"]["fp32"]:,} B (not shipped).

## Data

Corpus: `{data["db"]}` ({data["chunks"]:,} chunks). Human labels: {data["labels_file"] or "none"}.
LLM labeller: {data["llm"] or "none (heuristic pseudo-queries, hard labels)"}.
Pairs: {data["pairs"]:,} ({data["train_pairs"]:,} train, {data["validation_pairs"]:,} validation,
split by query); labelling complete: {data["complete"]}.

| origin | pairs |
|---|---|
{origins}

Data licence and attribution: {report["data_license"]}

## Training

BCE on (soft) labels, AdamW lr {train["learning_rate"]}, batch {train["batch_size"]},
max {train["max_length"]} tokens, {train["steps_done"]} of {train["total_steps"]} steps
(planned {train["planned_steps"]} for {train["epochs"]} epochs; the schedule is fitted to the
budget), {train["seconds"]} s on {train["threads"]} CPU threads, torch {train["torch"]};
final loss {train["final_loss"]}; seed {train["seed"]}.

## Checks and metrics

- ONNX fp32 vs torch: max |logit diff| {checks["onnx_fp32_max_abs_diff"]:.2e}
  on {checks["pairs_checked"]} pairs (must be < {MAX_FP32_DIFF:g}); int8 vs torch
  {checks["onnx_int8_max_abs_diff"]:.3f}.
- Validation ROC-AUC (held-out queries of the data above): torch {val}, int8 ONNX
  {checks.get("validation_auc_int8")}.
- Latency, {LATENCY_PAIRS} pairs, int8, 2 threads: {checks["latency_ms_20_pairs"]} ms (median of
  {LATENCY_RUNS}; depends on passage length and machine load).

## Reproduce

```sh
{report["command"]}
```
"""
