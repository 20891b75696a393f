"""What every BERT runtime (embedder, cross-encoder) shares: the session, tokenizer, padding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import onnxruntime as ort
from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidGraph, InvalidProtobuf
from tokenizers import Encoding, Tokenizer

from crag_edge.models.errors import ModelFileError

PULL_HINT = "run `crag-edge models pull` to fetch and convert it again"


def create_session(path: Path, threads: int = 0) -> ort.InferenceSession:
    """Open `path` on the CPU provider with `threads` intra-op threads (0: onnxruntime's default).

    Inter-op parallelism stays at 1: BERT graphs are a chain, extra pools only add contention.
    Raises FileNotFoundError / ModelFileError with a fix-it hint instead of onnxruntime's errors.
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
        raise ModelFileError(
            f"ONNX model {path} is corrupt or unreadable: {exc}; {PULL_HINT}"
        ) from exc


def check_batching(batch_size: int, limit_name: str, limit: int, least: int) -> None:
    """Refuse a batch size or token limit no runtime can work with, before any file opens:
    `limit_name` is the runtime's own name for its token limit, so the message matches its
    keyword argument."""
    if batch_size < 1 or limit < least:
        raise ValueError(
            f"need batch_size >= 1, {limit_name} >= {least}; got {batch_size}, {limit}"
        )


def open_graph(path: Path, threads: int) -> tuple[ort.InferenceSession, dict[str, Any]]:
    """The session (`create_session`) and the shape of each of its outputs by name: each
    runtime checks that the output it reads is there and has the width it expects."""
    session = create_session(path, threads)
    return session, {o.name: o.shape for o in session.get_outputs()}


def plain_tokenizer(path: Path) -> Tokenizer:
    """`path` with its own truncation and padding removed: each runtime sets what it needs."""
    if not path.is_file():
        raise FileNotFoundError(f"tokenizer not found: {path}; run `crag-edge models pull`")
    tokenizer = Tokenizer.from_file(str(path))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return tokenizer


def pad_batch(encodings: list[Encoding]) -> dict[str, np.ndarray]:
    """Right-pad one batch to its longest member; padded positions get attention_mask 0."""
    width = max(len(e.ids) for e in encodings)
    feeds = {
        name: np.zeros((len(encodings), width), dtype=np.int64)
        for name in ("input_ids", "attention_mask", "token_type_ids")
    }
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        feeds["input_ids"][row, :n] = encoding.ids
        feeds["attention_mask"][row, :n] = 1
        feeds["token_type_ids"][row, :n] = encoding.type_ids
    return feeds


def relevance(logits: npt.NDArray[np.floating[Any]]) -> npt.NDArray[np.float64]:
    """[n, 1] or [n, 2] logits → P(relevant) per row: sigmoid(logit), or for two labels (not
    relevant, relevant) softmax(logits)[:, 1], computed as the identical sigmoid(l1 - l0)."""
    x = logits[:, 0] if logits.shape[1] == 1 else logits[:, 1] - logits[:, 0]
    # sigmoid(x) = exp(-log(1 + exp(-x))): no overflow warning for large |x|.
    return np.exp(-np.logaddexp(0.0, -x.astype(np.float64)))
