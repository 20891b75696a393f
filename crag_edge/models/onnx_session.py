"""One way to open an ONNX graph for every runtime (embedder, cross-encoder): CPU, bounded."""

from __future__ import annotations

from pathlib import Path

import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidGraph, InvalidProtobuf

PULL_HINT = "run `crag-edge models pull` to fetch and convert it again"


def create_session(path: Path, threads: int = 0) -> ort.InferenceSession:
    """Open `path` on the CPU provider with `threads` intra-op threads (0: onnxruntime's default).

    Inter-op parallelism stays at 1: BERT graphs are a chain, extra pools only add contention.
    Raises FileNotFoundError / ValueError with a fix-it hint instead of onnxruntime's errors.
    """
    if not path.is_file():
        raise FileNotFoundError(f"ONNX model not found: {path}; {PULL_HINT}")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    try:
        return ort.InferenceSession(
            str(path), sess_options=options, providers=["CPUExecutionProvider"]
        )
    except (Fail, InvalidGraph, InvalidProtobuf) as exc:
        raise ValueError(f"ONNX model {path} is corrupt or unreadable: {exc}; {PULL_HINT}") from exc
