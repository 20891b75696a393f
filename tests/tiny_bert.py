"""Tiny random BERT sequence-classification checkpoints: real files, seconds to convert.

Test helper shared by the converter and cross-encoder tests; saved as transformers would
save a BertForSequenceClassification (safetensors + config.json).
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

from crag_edge.models.bert_onnx import SEGMENT_ARCHITECTURE, convert_bert
from crag_edge.models.manifest import LOCAL_MANIFEST

MINILM_VOCAB = 30522

TINY_CONFIG: dict[str, Any] = {
    "architectures": ["BertForSequenceClassification"],
    "model_type": "bert",
    "hidden_act": "gelu",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_attention_heads": 4,
    "num_hidden_layers": 2,
    "max_position_embeddings": 64,
    "type_vocab_size": 2,
    "vocab_size": 100,
    "layer_norm_eps": 1e-12,
    "position_embedding_type": "absolute",
}
NUM_LABELS = 3


def tiny_checkpoint(
    directory: Path,
    *,
    prefix: str = "bert.",
    legacy_ln: bool = False,
    num_labels: int = NUM_LABELS,
    segment: bool = False,
    **config: Any,
) -> Path:
    """Write a random checkpoint to `directory`; `config` overrides `TINY_CONFIG` entries.

    `prefix=""` and `legacy_ln=True` reproduce old checkpoints (bare BertModel names,
    LayerNorm gamma/beta). `segment=True` writes crag-edge's segment scorer instead (a
    weighted-cosine `head`, no classifier).
    """
    cfg = {**TINY_CONFIG, **config}
    if segment:
        cfg["architectures"] = [SEGMENT_ARCHITECTURE]
    rng = np.random.default_rng(0)
    hidden, inter = cfg["hidden_size"], cfg["intermediate_size"]

    def normal(*shape: int) -> np.ndarray:
        return rng.normal(0.0, 0.2, size=shape).astype(np.float32)

    tensors = {
        "embeddings.word_embeddings.weight": normal(cfg["vocab_size"], hidden),
        "embeddings.position_embeddings.weight": normal(cfg["max_position_embeddings"], hidden),
        "embeddings.token_type_embeddings.weight": normal(cfg["type_vocab_size"], hidden),
        "embeddings.LayerNorm.weight": 1.0 + normal(hidden),
        "embeddings.LayerNorm.bias": normal(hidden),
        "pooler.dense.weight": normal(hidden, hidden),
        "pooler.dense.bias": normal(hidden),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"encoder.layer.{i}"
        for name, (rows, cols) in {
            "attention.self.query": (hidden, hidden),
            "attention.self.key": (hidden, hidden),
            "attention.self.value": (hidden, hidden),
            "attention.output.dense": (hidden, hidden),
            "intermediate.dense": (inter, hidden),
            "output.dense": (hidden, inter),
        }.items():
            tensors[f"{p}.{name}.weight"] = normal(rows, cols)
            tensors[f"{p}.{name}.bias"] = normal(rows)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            tensors[f"{p}.{ln}.weight"] = 1.0 + normal(hidden)
            tensors[f"{p}.{ln}.bias"] = normal(hidden)
    if legacy_ln:
        legacy = {"LayerNorm.weight": "LayerNorm.gamma", "LayerNorm.bias": "LayerNorm.beta"}
        for new, old in legacy.items():
            tensors = {k.replace(new, old): v for k, v in tensors.items()}
    tensors = {prefix + k: v for k, v in tensors.items()}
    if segment:
        tensors["head.weight"] = 1.0 + normal(hidden)
        tensors["head.bias"] = normal(1)
    else:
        tensors["classifier.weight"] = normal(num_labels, hidden)
        tensors["classifier.bias"] = normal(num_labels)
    directory.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(directory / "model.safetensors"))
    (directory / "config.json").write_text(json.dumps(cfg))
    return directory


def tiny_classifier(folder: Path, tokenizer: Path, labels: int = 1) -> Path:
    """A tiny cross-encoder folder with MiniLM's tokenizer.json and its fp32 `model.onnx`."""
    tiny_checkpoint(folder, num_labels=labels, vocab_size=MINILM_VOCAB, max_position_embeddings=512)
    shutil.copy(tokenizer, folder / "tokenizer.json")
    convert_bert(folder, folder / "model.onnx", "classification")
    return folder


def register_local(model_dir: Path, source: Path, model_id: str) -> None:
    """A manifest.local.toml entry for the files in `source`, pinned by their real hashes."""
    files = []
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        data = (source / name).read_bytes()
        files.append(
            f'[[models."{model_id}".files]]\nname = "{name}"\nsize = {len(data)}\n'
            f'sha256 = "{hashlib.sha256(data).hexdigest()}"\n'
            f'sources = [{{ kind = "local", path = "{source / name}" }}]\n'
        )
    header = (
        f'[models."{model_id}"]\nrole = "cross-encoder"\nlicense = "Apache-2.0"\n'
        f'convert = "bert-classification"\n'
    )
    model_dir.mkdir(parents=True, exist_ok=True)
    (model_dir / LOCAL_MANIFEST).write_text(header + "\n".join(files), encoding="utf-8")
