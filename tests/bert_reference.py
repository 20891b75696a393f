"""A pure-NumPy BERT forward pass in float64: the independent check on `bert_onnx`'s graph.

Test helper only. Written from the transformers BertModel definition, sharing no code with
the converter so that a mistake in one is not silently copied into the other.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from safetensors.numpy import load_file

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]

_erf = np.vectorize(math.erf, otypes=[np.float64])


class ReferenceBert:
    """BertModel (+ optional pooler/classifier) over a config.json + model.safetensors folder."""

    def __init__(self, checkpoint_dir: Path) -> None:
        self.config: dict[str, Any] = json.loads((checkpoint_dir / "config.json").read_text())
        raw = load_file(str(checkpoint_dir / "model.safetensors"))
        self.w = {_canonical(k): v.astype(np.float64) for k, v in raw.items()}

    def _linear(self, x: F64, name: str) -> F64:
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def _layer_norm(self, x: F64, name: str) -> F64:
        eps = self.config.get("layer_norm_eps", 1e-12)
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        return (x - mean) / np.sqrt(var + eps) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def hidden_states(self, input_ids: I64, attention_mask: I64, token_type_ids: I64) -> F64:
        """Last layer's [batch, seq, hidden] output."""
        c = self.config
        heads, hidden = c["num_attention_heads"], c["hidden_size"]
        head_dim = hidden // heads
        batch, seq = input_ids.shape
        x = (
            self.w["embeddings.word_embeddings.weight"][input_ids]
            + self.w["embeddings.token_type_embeddings.weight"][token_type_ids]
            + self.w["embeddings.position_embeddings.weight"][np.arange(seq)][None]
        )
        x = self._layer_norm(x, "embeddings.LayerNorm")
        mask_bias = (1.0 - attention_mask[:, None, None, :]) * np.finfo(np.float32).min
        for i in range(c["num_hidden_layers"]):
            p = f"encoder.layer.{i}"

            def split(t: F64) -> F64:
                return t.reshape(batch, seq, heads, head_dim).transpose(0, 2, 1, 3)

            q = split(self._linear(x, f"{p}.attention.self.query"))
            k = split(self._linear(x, f"{p}.attention.self.key"))
            v = split(self._linear(x, f"{p}.attention.self.value"))
            scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(head_dim) + mask_bias
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            probs = scores / scores.sum(-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, hidden)
            attn = self._linear(ctx, f"{p}.attention.output.dense")
            x = self._layer_norm(attn + x, f"{p}.attention.output.LayerNorm")
            inter = self._linear(x, f"{p}.intermediate.dense")
            inter = 0.5 * inter * (1.0 + _erf(inter / math.sqrt(2.0)))
            out = self._linear(inter, f"{p}.output.dense")
            x = self._layer_norm(out + x, f"{p}.output.LayerNorm")
        return x

    def sentence_embedding(self, input_ids: I64, attention_mask: I64, token_type_ids: I64) -> F64:
        """sentence-transformers: masked mean pooling, then L2 normalisation."""
        h = self.hidden_states(input_ids, attention_mask, token_type_ids)
        m = attention_mask[:, :, None].astype(np.float64)
        mean = (h * m).sum(1) / np.maximum(m.sum(1), 1e-9)
        return mean / np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)

    def logits(self, input_ids: I64, attention_mask: I64, token_type_ids: I64) -> F64:
        """BertForSequenceClassification: classifier(tanh(pooler([CLS])))."""
        h = self.hidden_states(input_ids, attention_mask, token_type_ids)
        pooled = np.tanh(self._linear(h[:, 0], "pooler.dense"))
        return self._linear(pooled, "classifier")


def _canonical(name: str) -> str:
    name = name.removeprefix("bert.")
    name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
    return name.replace("LayerNorm.beta", "LayerNorm.bias")
