"""The retrieval evaluator in PyTorch, in two architectures that read the pair in one pass.

- `CrossEncoder` ("cross"): transformers' BertForSequenceClassification, joint attention
  over "[CLS] query [SEP] passage [SEP]" and a classifier on [CLS].
- `SegmentScorer` ("segment"): the same encoder, but each text attends only to itself and
  its positions restart at 0, so the two mean-pooled halves are exactly the bi-encoder's
  sentence embeddings; the head is a per-dimension weighted cosine. Untrained (head =
  the cosine's calibration) it *is* the embedder's cosine, so fine-tuning starts from the
  embedder's general notion of relevance instead of from a random classifier (measured in
  docs/training.md: joint attention trained on SciFact alone falls below cosine on WikiQA).

Written out here (about two hundred lines) rather than taken from transformers: that package
is large, and parameter names that match the HF layout ("bert."-prefixed encoder) save to a
checkpoint that `bert_onnx.convert_bert` turns into the graph the runtime loads. Only the
training code imports torch.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from safetensors.numpy import load_file, save_file
from torch import Tensor, nn

from crag_edge.models.bert_onnx import SEGMENT_ARCHITECTURE

CONFIG = "config.json"
WEIGHTS = "model.safetensors"
TOKENIZER = "tokenizer.json"


class _Embeddings(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        hidden = c["hidden_size"]
        self.word_embeddings = nn.Embedding(c["vocab_size"], hidden)
        self.position_embeddings = nn.Embedding(c["max_position_embeddings"], hidden)
        self.token_type_embeddings = nn.Embedding(c["type_vocab_size"], hidden)
        self.LayerNorm = nn.LayerNorm(hidden, eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(
        self, input_ids: Tensor, token_type_ids: Tensor, positions: Tensor | None = None
    ) -> Tensor:
        if positions is None:
            positions = torch.arange(input_ids.shape[1], device=input_ids.device)[None]
        x = self.word_embeddings(input_ids) + self.token_type_embeddings(token_type_ids)
        x = x + self.position_embeddings(positions)
        return self.dropout(self.LayerNorm(x))


class _SelfAttention(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        hidden = c["hidden_size"]
        self.heads = c["num_attention_heads"]
        self.query = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.value = nn.Linear(hidden, hidden)
        self.dropout_p = c["attention_probs_dropout_prob"]

    def forward(self, x: Tensor, keep: Tensor) -> Tensor:
        batch, seq, hidden = x.shape

        def split(t: Tensor) -> Tensor:
            return t.view(batch, seq, self.heads, hidden // self.heads).transpose(1, 2)

        context = F.scaled_dot_product_attention(
            split(self.query(x)),
            split(self.key(x)),
            split(self.value(x)),
            attn_mask=keep,
            dropout_p=self.dropout_p if self.training else 0.0,
        )
        return context.transpose(1, 2).reshape(batch, seq, hidden)


class _Residual(nn.Module):
    """dense → dropout → add the residual → LayerNorm (BertSelfOutput / BertOutput)."""

    def __init__(self, c: dict[str, Any], width: int) -> None:
        super().__init__()
        self.dense = nn.Linear(width, c["hidden_size"])
        self.LayerNorm = nn.LayerNorm(c["hidden_size"], eps=c["layer_norm_eps"])
        self.dropout = nn.Dropout(c["hidden_dropout_prob"])

    def forward(self, h: Tensor, residual: Tensor) -> Tensor:
        return self.LayerNorm(self.dropout(self.dense(h)) + residual)


class _Attention(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.self = _SelfAttention(c)
        self.output = _Residual(c, c["hidden_size"])

    def forward(self, x: Tensor, keep: Tensor) -> Tensor:
        return self.output(self.self(x, keep), x)


class _Intermediate(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["intermediate_size"])

    def forward(self, x: Tensor) -> Tensor:
        return F.gelu(self.dense(x))  # exact erf GELU, as the ONNX graph computes it


class _Layer(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.attention = _Attention(c)
        self.intermediate = _Intermediate(c)
        self.output = _Residual(c, c["intermediate_size"])

    def forward(self, x: Tensor, keep: Tensor) -> Tensor:
        x = self.attention(x, keep)
        return self.output(self.intermediate(x), x)


class _Encoder(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.layer = nn.ModuleList(_Layer(c) for _ in range(c["num_hidden_layers"]))


class _Pooler(nn.Module):
    def __init__(self, c: dict[str, Any]) -> None:
        super().__init__()
        self.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, x: Tensor) -> Tensor:
        return torch.tanh(self.dense(x[:, 0]))


class _Bert(nn.Module):
    def __init__(self, c: dict[str, Any], *, pooler: bool = True) -> None:
        super().__init__()
        self.embeddings = _Embeddings(c)
        self.encoder = _Encoder(c)
        if pooler:
            self.pooler = _Pooler(c)


class CrossEncoder(nn.Module):
    """BERT reading "[CLS] query [SEP] passage [SEP]" → one relevance logit per pair."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.bert = _Bert(config)
        self.dropout = nn.Dropout(config["hidden_dropout_prob"])
        self.classifier = nn.Linear(config["hidden_size"], 1)

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor) -> Tensor:
        keep = attention_mask.bool()[:, None, None, :]  # [batch, 1, 1, seq]: True = attend
        x = self.bert.embeddings(input_ids, token_type_ids)
        for layer in self.bert.encoder.layer:
            x = layer(x, keep)
        return self.classifier(self.dropout(self.bert.pooler(x)))[:, 0]


class SegmentScorer(nn.Module):
    """BERT reading "[CLS] query [SEP] [CLS] passage [SEP]" with segment-local attention →
    Σ_d w_d·u_d·v_d + b over the two L2-normalised mean-pooled halves u, v."""

    def __init__(self, config: dict[str, Any]) -> None:
        super().__init__()
        self.config = config
        self.bert = _Bert(config, pooler=False)
        self.head = _WeightedCosine(config["hidden_size"])

    def forward(self, input_ids: Tensor, attention_mask: Tensor, token_type_ids: Tensor) -> Tensor:
        second = token_type_ids
        first = 1 - second
        # Positions restart at 0 for the second text, as when it is embedded on its own.
        positions = second * (second.cumsum(1) - 1) + first * (first.cumsum(1) - 1)
        x = self.bert.embeddings(input_ids, torch.zeros_like(second), positions)
        same = second[:, :, None] == second[:, None, :]
        keep = (same & attention_mask.bool()[:, None, :])[:, None]  # [batch, 1, seq, seq]
        for layer in self.bert.encoder.layer:
            x = layer(x, keep)
        real = attention_mask.to(x.dtype)
        u = _mean_normalised(x, real * first.to(x.dtype))
        v = _mean_normalised(x, real * second.to(x.dtype))
        return self.head(u, v)

    def read_query(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        """The first text's reading alone (what the graph's query output computes): for an
        evaluator trained against passage vectors it did not compute (`query-tower`)."""
        x = self.bert.embeddings(input_ids, torch.zeros_like(input_ids))
        keep = attention_mask.bool()[:, None, None, :]
        for layer in self.bert.encoder.layer:
            x = layer(x, keep)
        return _mean_normalised(x, attention_mask.to(x.dtype))


class _WeightedCosine(nn.Module):
    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(1))

    def forward(self, u: Tensor, v: Tensor) -> Tensor:
        return (u * v * self.weight).sum(-1) + self.bias


def _mean_normalised(x: Tensor, mask: Tensor) -> Tensor:
    """sentence-transformers' mean pooling over `mask`, then `F.normalize`."""
    summed = (x * mask[:, :, None]).sum(1)
    mean = summed / mask.sum(1, keepdim=True).clamp(min=1e-9)
    return F.normalize(mean, dim=-1, eps=1e-12)


Evaluator = CrossEncoder | SegmentScorer
ARCHITECTURES = {"cross": "BertForSequenceClassification", "segment": SEGMENT_ARCHITECTURE}


def start_head_at(model: SegmentScorer, scale: float, bias: float) -> None:
    """Set the head to `scale`·cosine + `bias` (a fitted calibration of the untrained model)."""
    with torch.no_grad():
        model.head.weight.fill_(scale)
        model.head.bias.fill_(bias)


def from_pretrained(
    checkpoint_dir: Path,
    *,
    layers: int,
    vocab_rows: list[int] | None,
    max_positions: int,
    seed: int,
    architecture: str = "cross",
) -> Evaluator:
    """An evaluator whose encoder starts from a BERT checkpoint (e.g. all-MiniLM-L6-v2).

    Keeps the first `layers` layers, the embedding rows `vocab_rows` (all when None) and the
    first `max_positions` positions. The cross-encoder's classifier (and a pooler the
    checkpoint lacks) starts random from `seed`; the segment scorer's head starts as plain
    cosine (weights 1, bias 0).
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"unknown architecture {architecture!r}: one of {list(ARCHITECTURES)}")
    base = json.loads((checkpoint_dir / CONFIG).read_text(encoding="utf-8"))
    available = base["num_hidden_layers"]
    if not 1 <= layers <= available:
        raise ValueError(f"--layers must be between 1 and {available}; got {layers}")
    config = {
        **base,
        "_name_or_path": str(base.get("_name_or_path", checkpoint_dir.name)),
        "architectures": [ARCHITECTURES[architecture]],
        "num_labels": 1,
        "id2label": {"0": "LABEL_0"},
        "label2id": {"LABEL_0": 0},
        "num_hidden_layers": layers,
        "vocab_size": len(vocab_rows) if vocab_rows is not None else base["vocab_size"],
        "max_position_embeddings": min(max_positions, base["max_position_embeddings"]),
        "hidden_dropout_prob": base.get("hidden_dropout_prob", 0.1),
        "attention_probs_dropout_prob": base.get("attention_probs_dropout_prob", 0.1),
        "layer_norm_eps": base.get("layer_norm_eps", 1e-12),
        "type_vocab_size": base.get("type_vocab_size", 2),
    }
    torch.manual_seed(seed)
    model: Evaluator
    if architecture == "segment":
        model = SegmentScorer(config)
    else:
        model = CrossEncoder(config)
        nn.init.normal_(model.classifier.weight, std=0.02)
        nn.init.zeros_(model.classifier.bias)
    state = _encoder_state(load_file(str(checkpoint_dir / WEIGHTS)), config, vocab_rows)
    if architecture == "segment":
        state = {k: v for k, v in state.items() if not k.startswith("bert.pooler.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    unexplained = [m for m in missing if not m.startswith(("classifier.", "bert.pooler.", "head."))]
    if unexpected or unexplained:
        raise ValueError(
            f"{checkpoint_dir}: not a BERT checkpoint this model can start from "
            f"(missing {unexplained[:5]}, unexpected {unexpected[:5]})"
        )
    return model


def _encoder_state(
    tensors: dict[str, npt.NDArray[Any]], config: dict[str, Any], vocab_rows: list[int] | None
) -> dict[str, Tensor]:
    """Checkpoint tensors renamed to this model's names, truncated to its shape."""
    state: dict[str, Tensor] = {}
    for raw_name, value in tensors.items():
        name = raw_name.removeprefix("bert.")
        name = name.replace("LayerNorm.gamma", "LayerNorm.weight")
        name = name.replace("LayerNorm.beta", "LayerNorm.bias")
        if name.startswith(("classifier.", "cls.")) or name.endswith("position_ids"):
            continue  # a previous head, MLM head or a buffer: not part of this model
        layer = name.split(".")[2] if name.startswith("encoder.layer.") else None
        if layer is not None and int(layer) >= config["num_hidden_layers"]:
            continue
        if name == "embeddings.word_embeddings.weight" and vocab_rows is not None:
            value = value[np.asarray(vocab_rows)]
        if name == "embeddings.position_embeddings.weight":
            value = value[: config["max_position_embeddings"]]
        state["bert." + name] = torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))
    return state


def save_checkpoint(model: Evaluator, tokenizer: dict[str, Any], out_dir: Path) -> Path:
    """HF-style folder: config.json, model.safetensors ("bert." names + classifier),
    tokenizer.json; what `convert_bert(..., head="classification")` reads."""
    out_dir.mkdir(parents=True, exist_ok=True)
    tensors = {k: v.detach().cpu().contiguous().numpy() for k, v in model.state_dict().items()}
    save_file(tensors, str(out_dir / WEIGHTS), metadata={"format": "pt"})
    (out_dir / CONFIG).write_text(json.dumps(model.config, indent=2) + "\n", encoding="utf-8")
    (out_dir / TOKENIZER).write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    return out_dir


def parameter_count(model: nn.Module) -> int:
    return sum(math.prod(p.shape) for p in model.parameters())
