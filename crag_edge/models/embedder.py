"""Sentence embeddings from a converted BERT graph (see `bert_onnx`) on onnxruntime's CPU."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

from crag_edge.models.onnx_session import check_batching, open_graph, pad_batch, plain_tokenizer
from crag_edge.types import Vector

OUTPUT_NAME = "sentence_embedding"


class OnnxEmbedder:
    """The `Embedder` protocol over an ONNX graph whose output is already pooled and normalised."""

    def __init__(
        self,
        onnx_path: Path,
        tokenizer_path: Path,
        model_id: str,
        threads: int = 0,
        batch_size: int = 4,
        max_tokens: int = 256,
    ) -> None:
        check_batching(batch_size, "max_tokens", max_tokens, 2)
        self._session, outputs = open_graph(onnx_path, threads)
        shape = outputs.get(OUTPUT_NAME)
        if shape is None or not isinstance(shape[-1], int):
            raise ValueError(f"{onnx_path} has no {OUTPUT_NAME!r} output of fixed width")
        self._dim = shape[-1]
        self._model_id = model_id
        self._batch_size = batch_size
        self._max_tokens = max_tokens
        # tokenizer.json files often carry their own truncation/padding (MiniLM's: fixed 128).
        # Both are reset: padding is done per batch below, and chunkers need the raw counts.
        self._tokenizer = plain_tokenizer(tokenizer_path)
        self._truncating = plain_tokenizer(tokenizer_path)
        self._truncating.enable_truncation(max_tokens)

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer without truncation or padding, for counting tokens in chunks."""
        return self._tokenizer

    def embed(self, texts: Sequence[str]) -> Vector:
        """(len(texts), dim) float32 unit vectors, in input order.

        Texts are batched by token length so each batch pads only to its own longest text;
        texts longer than `max_tokens` are truncated.
        """
        result = np.empty((len(texts), self._dim), dtype=np.float32)
        if not texts:
            return result
        encodings = self._truncating.encode_batch(list(texts))
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            feeds = pad_batch([encodings[i] for i in rows])
            result[rows] = self._session.run([OUTPUT_NAME], feeds)[0]
        return result
