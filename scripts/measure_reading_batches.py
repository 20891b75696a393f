"""Can the evaluator's stored readings be computed in batches? Measures, on chunks of a corpus:

- how far an int8 reading computed inside a padded, length-sorted batch (attention masks
  set) is from the same text's reading alone: int8 dynamic quantization takes one activation
  scale over the whole batch, so a reading would depend on its neighbours;
- an fp32 graph (the shipped int8 weights dequantized: readings independent of the batch)
  in batches, against int8 one text at a time, in the same run (chunks/s, ratio).

    python scripts/measure_reading_batches.py --db scifact-subset.db --chunks 256 --repeats 3
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import numpy.typing as npt
import onnx
from onnx import helper, numpy_helper
from onnxruntime import InferenceSession
from tokenizers import Encoding

from crag_edge.config import Settings
from crag_edge.models.bert_onnx import SEGMENT_VECTOR_OUTPUTS
from crag_edge.models.cross_encoder import MAX_LENGTH
from crag_edge.models.manifest import load_manifest
from crag_edge.models.onnx_session import create_session, pad_batch, plain_tokenizer
from crag_edge.models.provision import EMBEDDER_ONNX_INT8
from crag_edge.models.registry import installed_file
from crag_edge.store import connect

PASSAGE_VECTOR = SEGMENT_VECTOR_OUTPUTS[1]
Readings = npt.NDArray[np.float32]


def dequantized(model: onnx.ModelProto) -> onnx.ModelProto:
    """The graph with every DynamicQuantizeLinear → MatMulInteger → Cast → Mul chain replaced
    by an fp32 MatMul over the dequantized weights, (w_q - zero_point) · scale."""
    graph = model.graph
    weights = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    consumer = {name: node for node in graph.node for name in node.input}
    quantizers = [n for n in graph.node if n.op_type == "DynamicQuantizeLinear"]
    quantized_input = {n.output[0]: n.input[0] for n in quantizers}
    scales = {n.output[1] for n in quantizers}
    dropped = {id(n) for n in quantizers}  # node ids: quantizer-made nodes may have no name
    dropped |= {id(n) for n in graph.node if n.op_type == "Mul" and scales & set(n.input)}
    replacement: dict[int, onnx.NodeProto] = {}
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        a, b, _, b_zero = node.input
        scale = weights[b.removesuffix("_quantized") + "_scale"]
        w = (weights[b].astype(np.float32) - weights[b_zero].astype(np.float32)) * scale
        graph.initializer.append(numpy_helper.from_array(w.astype(np.float32), f"{b}_fp32"))
        cast = consumer[node.output[0]]
        rescale = consumer[cast.output[0]]
        dropped |= {id(cast), id(rescale)}
        matmul = helper.make_node("MatMul", [quantized_input[a], f"{b}_fp32"], rescale.output)
        replacement[id(node)] = matmul
    nodes = [replacement.get(id(n), n) for n in graph.node if id(n) not in dropped]
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.checker.check_model(model)
    return model


def batched(session: InferenceSession, encodings: list[Encoding], batch: int) -> Readings:
    """Passage readings in length-sorted batches, each padded to its longest text."""
    order = np.argsort([len(e.ids) for e in encodings], kind="stable")
    out = np.empty((len(encodings), 384), dtype=np.float32)
    for start in range(0, len(order), batch):
        rows = order[start : start + batch]
        feeds = pad_batch([encodings[i] for i in rows])
        feeds["token_type_ids"][:] = feeds["attention_mask"]  # the pair's second text
        out[rows] = session.run([PASSAGE_VECTOR], feeds)[0]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--chunks", type=int, default=256)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    conn = connect(args.db, readonly=True)
    rows = conn.execute("SELECT text FROM chunks ORDER BY id LIMIT ?", (args.chunks,))
    texts = [str(row[0]) for row in rows]
    models = Settings.load().models
    evaluator = next(
        spec.model_id for spec in load_manifest(models.model_dir).by_role("cross-encoder")
    )
    graph = installed_file(models, evaluator, EMBEDDER_ONNX_INT8)
    tokenizer = plain_tokenizer(installed_file(models, evaluator, "tokenizer.json"))
    tokenizer.enable_truncation(MAX_LENGTH)
    encodings = tokenizer.encode_batch(texts)
    int8 = create_session(graph)
    fp32_path = args.db.with_suffix(".evaluator-fp32.onnx")
    onnx.save(dequantized(onnx.load(graph)), fp32_path)
    fp32 = create_session(fp32_path)
    alone = {"int8": batched(int8, encodings, 1), "fp32": batched(fp32, encodings, 1)}
    drift = np.abs(batched(int8, encodings, args.batch) - alone["int8"]).max()
    print(f"int8 in batches of {args.batch}: max |reading - reading alone| = {drift:.2e}")
    for repeat in range(args.repeats):
        started = time.perf_counter()
        batched(int8, encodings, 1)
        one_at_a_time = time.perf_counter() - started
        started = time.perf_counter()
        readings = batched(fp32, encodings, args.batch)
        fp32_batches = time.perf_counter() - started
        print(
            f"repeat {repeat}: int8 one at a time {len(texts) / one_at_a_time:.1f} chunks/s, "
            f"fp32 batches of {args.batch} {len(texts) / fp32_batches:.1f} chunks/s "
            f"(x{one_at_a_time / fp32_batches:.2f}); fp32 batch vs alone max "
            f"{np.abs(readings - alone['fp32']).max():.2e}"
        )


if __name__ == "__main__":
    main()
