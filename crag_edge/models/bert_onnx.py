"""Torch-free BERT → ONNX conversion: the graph is written op by op with `onnx.helper`.

Why not `torch.onnx.export`: torch is not installable everywhere crag-edge runs, and the
runtime must never need it. BERT is small enough to spell out; the tests check the graph
against a NumPy reference forward pass.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper, numpy_helper
from safetensors.numpy import load_file

OPSET = 17
# IR 8 is the oldest IR that carries opset 17: the widest range of onnxruntime versions loads it.
IR_VERSION = 8
INPUT_NAMES = ("input_ids", "attention_mask", "token_type_ids")
# Same additive mask as transformers: masked keys get the most negative float32.
MASK_VALUE = float(np.finfo(np.float32).min)
# config.json `architectures` of crag-edge's segment scorer (see `crag_edge.training.model`).
SEGMENT_ARCHITECTURE = "CragEdgeSegmentScorer"
# A segment scorer's extra outputs: each text's pooled vector, which depends on that text alone
# (`crag_edge.models.segment_scorer` stores passage vectors and applies the head itself).
SEGMENT_VECTOR_OUTPUTS = ("query_vector", "passage_vector")
SEGMENT_HEAD = ("head.weight", "head.bias")

Head = Literal["embedding", "classification"]


class _Weights:
    """Checkpoint tensors by their BertModel name, whatever prefix or legacy name they carry."""

    def __init__(self, tensors: dict[str, npt.NDArray[Any]], source: Path) -> None:
        self._tensors = tensors
        self._source = source
        self.prefix = "bert." if "bert.embeddings.word_embeddings.weight" in tensors else ""

    def get(self, name: str, *, prefixed: bool = True) -> npt.NDArray[np.float32]:
        full = self.prefix + name if prefixed else name
        candidates = [full]
        if full.endswith("LayerNorm.weight"):
            candidates.append(full.removesuffix("weight") + "gamma")
        elif full.endswith("LayerNorm.bias"):
            candidates.append(full.removesuffix("bias") + "beta")
        for candidate in candidates:
            if candidate in self._tensors:
                return self._tensors[candidate].astype(np.float32)
        raise ValueError(f"{self._source}: missing tensor {full!r} (is this a BERT checkpoint?)")


class _Graph:
    """Collects nodes and initializers; every `op` call returns the name of its single output."""

    def __init__(self, weights: _Weights) -> None:
        self.weights = weights
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._names: set[str] = set()
        self._count = 0

    def op(self, op_type: str, *inputs: str, **attrs: Any) -> str:
        self._count += 1
        out = f"{op_type.lower()}_{self._count}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [out], **attrs))
        return out

    def const(self, name: str, value: npt.NDArray[Any]) -> str:
        """Register an initializer once; later calls with the same name reuse it."""
        if name not in self._names:
            self._names.add(name)
            self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def weight(self, name: str, *, prefixed: bool = True, transpose: bool = False) -> str:
        value = self.weights.get(name, prefixed=prefixed)
        return self.const(name, value.T if transpose else value)

    def linear(self, x: str, name: str, *, prefixed: bool = True) -> str:
        """torch `nn.Linear`: weights stored transposed so MatMul (and its int8 form) apply."""
        w = self.weight(f"{name}.weight", prefixed=prefixed, transpose=True)
        b = self.weight(f"{name}.bias", prefixed=prefixed)
        return self.op("Add", self.op("MatMul", x, w), b)

    def layer_norm(self, x: str, name: str, eps: float) -> str:
        scale, bias = self.weight(f"{name}.weight"), self.weight(f"{name}.bias")
        return self.op("LayerNormalization", x, scale, bias, axis=-1, epsilon=eps)


def _check_config(config: dict[str, Any], path: Path) -> None:
    """Reject configs whose forward pass differs from the one this module builds."""
    model_type = config.get("model_type", "bert")
    if model_type != "bert":
        raise ValueError(f"{path}: unsupported model_type {model_type!r} (only 'bert')")
    position = config.get("position_embedding_type", "absolute")
    if position != "absolute":
        raise ValueError(f"{path}: unsupported position_embedding_type {position!r}")
    act = config.get("hidden_act", "gelu")
    if act != "gelu":
        raise ValueError(f"{path}: unsupported hidden_act {act!r} (only exact erf 'gelu')")
    for key in ("hidden_size", "num_attention_heads", "num_hidden_layers"):
        if key not in config:
            raise ValueError(f"{path}: config lacks {key!r}")
    if config["hidden_size"] % config["num_attention_heads"]:
        raise ValueError(f"{path}: hidden_size is not a multiple of num_attention_heads")


def _embeddings(g: _Graph, eps: float) -> str:
    words = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), "input_ids")
    types = g.op("Gather", g.weight("embeddings.token_type_embeddings.weight"), "token_type_ids")
    # Positions 0..seq-1 are the first `seq` rows of the table: a Slice, no Range/Gather needed.
    seq_len = g.op("Shape", "input_ids", start=1, end=2)
    zero = g.const("zero_1d", np.array([0], np.int64))
    pos = g.op("Slice", g.weight("embeddings.position_embeddings.weight"), zero, seq_len, zero)
    summed = g.op("Add", g.op("Add", words, types), pos)
    return g.layer_norm(summed, "embeddings.LayerNorm", eps)


def _segment_embeddings(g: _Graph, eps: float) -> str:
    """Both texts embedded as if alone: token type 0 everywhere, positions restart at 0 for
    the second text (token type 1): pos = t·(cumsum(t)-1) + (1-t)·(cumsum(1-t)-1)."""
    words = g.op("Gather", g.weight("embeddings.word_embeddings.weight"), "input_ids")
    type_0 = g.const("type_0", g.weights.get("embeddings.token_type_embeddings.weight")[0])
    along_seq = g.const("cumsum_axis", np.array(1, np.int64))
    one = g.const("one_i", np.array(1, np.int64))
    second = "token_type_ids"
    first = g.op("Sub", one, second)

    def restarted(mask: str) -> str:
        return g.op("Mul", mask, g.op("Sub", g.op("CumSum", mask, along_seq), one))

    positions = g.op("Add", restarted(second), restarted(first))
    pos = g.op("Gather", g.weight("embeddings.position_embeddings.weight"), positions)
    summed = g.op("Add", g.op("Add", words, type_0), pos)
    return g.layer_norm(summed, "embeddings.LayerNorm", eps)


def _segment_attention_bias(g: _Graph) -> str:
    """[batch, 1, seq, seq] additive mask: a token attends to real tokens of its own text."""
    types = "token_type_ids"
    row = g.op("Unsqueeze", types, g.const("axis_2", np.array([2], np.int64)))
    col = g.op("Unsqueeze", types, g.const("axis_1", np.array([1], np.int64)))
    same = g.op("Cast", g.op("Equal", row, col), to=TensorProto.FLOAT)
    keys = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    keys = g.op("Unsqueeze", keys, g.const("axis_1", np.array([1], np.int64)))
    keep = g.op("Unsqueeze", g.op("Mul", same, keys), g.const("axis_1", np.array([1], np.int64)))
    inverted = g.op("Sub", g.const("one_f", np.array(1.0, np.float32)), keep)
    return g.op("Mul", inverted, g.const("mask_value", np.array(MASK_VALUE, np.float32)))


def _attention_bias(g: _Graph) -> str:
    """[batch, 1, 1, seq] additive mask, computed once and shared by every layer."""
    mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", mask, g.const("axes_1_2", np.array([1, 2], np.int64)))
    inverted = g.op("Sub", g.const("one_f", np.array(1.0, np.float32)), mask)
    return g.op("Mul", inverted, g.const("mask_value", np.array(MASK_VALUE, np.float32)))


def _attention(g: _Graph, x: str, bias: str, prefix: str, heads: int, hidden: int) -> str:
    head_dim = hidden // heads
    split = g.const("split_heads_shape", np.array([0, 0, heads, head_dim], np.int64))

    def project(name: str, perm: list[int]) -> str:
        reshaped = g.op("Reshape", g.linear(x, f"{prefix}.self.{name}"), split)
        return g.op("Transpose", reshaped, perm=perm)

    q = project("query", [0, 2, 1, 3])  # [batch, heads, seq, head_dim]
    k = project("key", [0, 2, 3, 1])  # [batch, heads, head_dim, seq]
    v = project("value", [0, 2, 1, 3])
    scale = g.const("attention_scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), bias)
    context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
    context = g.op("Transpose", context, perm=[0, 2, 1, 3])
    merge = g.const("merge_heads_shape", np.array([0, 0, hidden], np.int64))
    merged = g.op("Reshape", context, merge)
    return g.linear(merged, f"{prefix}.output.dense")


def _gelu(g: _Graph, x: str) -> str:
    """Exact GELU, 0.5·x·(1 + erf(x/√2)): opset 17 has no Gelu op."""
    erf = g.op("Erf", g.op("Div", x, g.const("sqrt2", np.array(math.sqrt(2), np.float32))))
    one_plus = g.op("Add", erf, g.const("one_f", np.array(1.0, np.float32)))
    return g.op("Mul", g.op("Mul", x, one_plus), g.const("half", np.array(0.5, np.float32)))


def _ffn(g: _Graph, x: str, prefix: str) -> str:
    return g.linear(_gelu(g, g.linear(x, f"{prefix}.intermediate.dense")), f"{prefix}.output.dense")


def _layer(g: _Graph, x: str, bias: str, index: int, config: dict[str, Any]) -> str:
    prefix, eps = f"encoder.layer.{index}", config.get("layer_norm_eps", 1e-12)
    heads, hidden = config["num_attention_heads"], config["hidden_size"]
    attended = _attention(g, x, bias, f"{prefix}.attention", heads, hidden)
    x = g.layer_norm(g.op("Add", attended, x), f"{prefix}.attention.output.LayerNorm", eps)
    return g.layer_norm(g.op("Add", _ffn(g, x, prefix), x), f"{prefix}.output.LayerNorm", eps)


def _mean_pool_normalize(g: _Graph, hidden_states: str, mask: str | None = None) -> str:
    """sentence-transformers' mean pooling over real tokens (or the float [batch, seq]
    `mask`), then `F.normalize` (eps 1e-12)."""
    if mask is None:
        mask = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    mask = g.op("Unsqueeze", mask, g.const("axis_2", np.array([2], np.int64)))
    axis_1 = g.const("axis_1", np.array([1], np.int64))
    summed = g.op("ReduceSum", g.op("Mul", hidden_states, mask), axis_1, keepdims=0)
    counts = g.op("ReduceSum", mask, axis_1, keepdims=0)
    counts = g.op("Max", counts, g.const("count_eps", np.array(1e-9, np.float32)))
    mean = g.op("Div", summed, counts)
    norm = g.op("ReduceL2", mean, axes=[-1], keepdims=1)
    norm = g.op("Max", norm, g.const("norm_eps", np.array(1e-12, np.float32)))
    return g.op("Div", mean, norm)


def _pooler_classifier(g: _Graph, hidden_states: str) -> str:
    """BertForSequenceClassification: tanh(dense([CLS])) then the classifier layer."""
    cls = g.op("Gather", hidden_states, g.const("cls_index", np.array(0, np.int64)), axis=1)
    pooled = g.op("Tanh", g.linear(cls, "pooler.dense"))
    return g.linear(pooled, "classifier", prefixed=False)


def _weighted_cosine(g: _Graph, hidden_states: str) -> tuple[str, str, str]:
    """The segment scorer's head: Σ_d w_d·u_d·v_d + b over the two texts' mean embeddings;
    returns the logit and the two vectors u (query) and v (passage)."""
    real = g.op("Cast", "attention_mask", to=TensorProto.FLOAT)
    second = g.op("Mul", real, g.op("Cast", "token_type_ids", to=TensorProto.FLOAT))
    first = g.op("Sub", real, second)
    u = _mean_pool_normalize(g, hidden_states, first)
    v = _mean_pool_normalize(g, hidden_states, second)
    weight, bias = (g.weight(name, prefixed=False) for name in SEGMENT_HEAD)
    weighted = g.op("Mul", g.op("Mul", u, v), weight)
    summed = g.op("ReduceSum", weighted, g.const("axis_last", np.array([-1], np.int64)))
    return g.op("Add", summed, bias), u, v  # logit: [batch, 1]


def convert_bert(checkpoint_dir: Path, out_path: Path, head: Head) -> Path:
    """Write `checkpoint_dir` (config.json + model.safetensors) as an opset-17 ONNX graph.

    Inputs are int64 `input_ids`, `attention_mask`, `token_type_ids` of shape [batch, seq].
    head="embedding" outputs `sentence_embedding` [batch, hidden], mean-pooled and
    L2-normalised in the graph; head="classification" outputs `logits` [batch, num_labels]
    (for crag-edge's segment scorer, `SEGMENT_ARCHITECTURE` in the config: [batch, 1], plus
    `SEGMENT_VECTOR_OUTPUTS` [batch, hidden]).
    """
    config_path = checkpoint_dir / "config.json"
    config = json.loads(config_path.read_text(encoding="utf-8"))
    _check_config(config, config_path)
    weights = _Weights(load_file(str(checkpoint_dir / "model.safetensors")), checkpoint_dir)
    g = _Graph(weights)

    segment = SEGMENT_ARCHITECTURE in config.get("architectures", [])
    if segment and head != "classification":
        raise ValueError(f"{config_path}: a segment scorer has only the classification head")
    eps = config.get("layer_norm_eps", 1e-12)
    x = _segment_embeddings(g, eps) if segment else _embeddings(g, eps)
    bias = _segment_attention_bias(g) if segment else _attention_bias(g)
    for index in range(config["num_hidden_layers"]):
        x = _layer(g, x, bias, index, config)

    hidden = config["hidden_size"]
    named: dict[str, tuple[str, int]] = {}  # graph output -> (tensor, width)
    if head == "embedding":
        named["sentence_embedding"] = (_mean_pool_normalize(g, x), hidden)
    elif head == "classification" and segment:
        logit, u, v = _weighted_cosine(g, x)
        named["logits"] = (logit, 1)
        named.update(zip(SEGMENT_VECTOR_OUTPUTS, ((u, hidden), (v, hidden)), strict=True))
    elif head == "classification":
        width = weights.get("classifier.bias", prefixed=False).size
        named["logits"] = (_pooler_classifier(g, x), width)
    else:
        raise ValueError(f"unknown head {head!r}: expected 'embedding' or 'classification'")
    for output_name, (tensor, _) in named.items():
        g.nodes.append(helper.make_node("Identity", [tensor], [output_name]))

    dims = ["batch", "seq"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT64, dims) for n in INPUT_NAMES]
    outputs = [
        helper.make_tensor_value_info(name, TensorProto.FLOAT, ["batch", width])
        for name, (_, width) in named.items()
    ]
    graph = helper.make_graph(g.nodes, f"bert_{head}", inputs, outputs, g.initializers)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        ir_version=IR_VERSION,
        producer_name="crag-edge",
    )
    onnx.checker.check_model(model)
    return _save_atomic(model, out_path)


def _save_atomic(model: onnx.ModelProto, out_path: Path) -> Path:
    """A crash mid-write must never leave a truncated graph where a valid one is expected."""
    out_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = out_path.with_name(f".{out_path.name}.{os.getpid()}.tmp")
    try:
        onnx.save_model(model, str(tmp))
        os.replace(tmp, out_path)
    finally:
        tmp.unlink(missing_ok=True)
    return out_path
