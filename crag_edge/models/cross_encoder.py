"""Cross-encoder relevance scores from a converted BERT classifier (see `bert_onnx`).

The query and a passage are read together as one pair ([CLS] query [SEP] passage [SEP],
token_type_ids 1 on the passage), which is what makes a cross-encoder more accurate than
comparing separately computed embeddings, and also why every pair costs a forward pass.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from crag_edge.models.onnx_session import (
    check_batching,
    open_graph,
    pad_batch,
    plain_tokenizer,
    relevance,
)
from crag_edge.types import ScoredBatch

OUTPUT_NAME = "logits"
MAX_LENGTH = 256  # query + passage tokens; BERT checkpoints have 512 positions
# [CLS] and two [SEP] take three positions; at least one must remain for the text.
MIN_LENGTH = 4


class OnnxCrossEncoder:
    """The `PairScorer` protocol over an ONNX sequence-classification graph (output `logits`).

    Logits become a probability of relevance in [0, 1]:
    - 1 label (ms-marco cross-encoders, BGE rerankers): sigmoid(logit);
    - 2 labels (not relevant, relevant): softmax(logits)[:, 1], computed as the identical
      sigmoid(logit_1 - logit_0).
    Graphs with more labels are refused: no column of theirs means "relevant".
    """

    def __init__(
        self,
        onnx_path: Path,
        tokenizer_path: Path,
        model_id: str,
        *,
        threads: int = 0,
        max_length: int = MAX_LENGTH,
        batch_size: int = 32,
    ) -> None:
        check_batching(batch_size, "max_length", max_length, MIN_LENGTH)
        self._session, outputs = open_graph(onnx_path, threads)
        shape = outputs.get(OUTPUT_NAME)
        if shape is None or shape[-1] not in (1, 2):
            raise ValueError(
                f"{onnx_path} has no {OUTPUT_NAME!r} output with 1 or 2 labels "
                f"(outputs: {outputs}); is it a sequence-classification graph?"
            )
        self._labels: int = shape[-1]
        self._model_id = model_id
        self._max_length = max_length
        self._batch_size = batch_size
        # The tokenizer.json's own truncation/padding (often a fixed 128) is replaced:
        # longest-first keeps a short query whole and cuts the passage; padding is per batch.
        self._tokenizer = plain_tokenizer(tokenizer_path)
        self._tokenizer.enable_truncation(max_length, strategy="longest_first")

    @property
    def name(self) -> str:
        return self._model_id

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        """One relevance probability per passage, in input order.

        All pairs are tokenized in one call and run in length-sorted batches, so each batch
        pads only to its own longest pair. Pairs over `max_length` tokens are truncated
        (longest side first) and reported in the warnings: their score saw only the start.
        """
        if not passages:
            return ScoredBatch(scores=[])
        encodings = self._tokenizer.encode_batch([(query, p) for p in passages])
        logits = np.empty((len(encodings), self._labels), dtype=np.float32)
        order = np.argsort([len(e.ids) for e in encodings], kind="stable")
        for start in range(0, len(order), self._batch_size):
            rows = order[start : start + self._batch_size]
            feeds = pad_batch([encodings[i] for i in rows])
            logits[rows] = self._session.run([OUTPUT_NAME], feeds)[0]
        warnings = []
        truncated = sum(1 for e in encodings if e.overflowing)
        if truncated:
            warnings.append(
                f"{truncated} of {len(encodings)} query-passage pairs were truncated to "
                f"{self._max_length} tokens; their scores judge only the start of the passage"
            )
        return ScoredBatch(scores=relevance(logits).tolist(), warnings=warnings)
