"""The segment scorer's runtime: a passage is read once, at ingest, and every query reuses it.

crag-edge's own evaluator (`bert_onnx.SEGMENT_ARCHITECTURE`) reads each text of a pair alone:
attention stays within the text and positions restart. Its score, Σ_d w_d·u_d·v_d + b over
the two pooled vectors, therefore needs the passage's vector v but never the pair. The
vector is computed once per chunk and stored (`store.PassageVectors`); grading a hit list
then costs one short query encoding and a dot product per hit instead of a forward pass per
pair (measured in docs/grading.md, "Speed").

Each text runs through the graph alone (batch of one): int8 activations are quantized with a
scale computed over the whole batch, so only then does a passage's vector depend on its text
and nothing else, wherever it was computed. An int8 reading inside a padded batch differs
from the same text's reading alone, so int8 batches are out; fp32 readings are
batch-independent but slower in batches than int8 one at a time. One int8 text at a time
stays: independent and fastest (measured in docs/measurements.md, "Ingest speed").

An evaluator may instead take its passage readings from the embedder (its `config.json` names
it under `passage_reader`): only its query tower was trained, against the embedder's frozen
vectors of the passages, so a chunk's reading *is* the vector ingest already stored for
retrieval. Ingest then reads each chunk once instead of twice, and the reading covers the
embedder's whole window instead of the evaluator's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict, Unpack

import numpy as np
import numpy.typing as npt
import onnx
from google.protobuf.message import DecodeError
from onnx import numpy_helper

from crag_edge.models.bert_onnx import INPUT_NAMES, SEGMENT_HEAD, SEGMENT_VECTOR_OUTPUTS
from crag_edge.models.cross_encoder import MAX_LENGTH, MIN_LENGTH, OnnxCrossEncoder
from crag_edge.models.onnx_session import create_session, plain_tokenizer, relevance
from crag_edge.types import Embedder, EncodedPassage, ScoredBatch, Vector

QUERY_TYPE, PASSAGE_TYPE = 0, 1  # token type ids of the pair's first and second text
PASSAGE_READER = "passage_reader"  # config.json key: the embedder that reads the passages


class PassageReaderError(ValueError):
    """The evaluator reads passages with an embedder other than the one configured."""


@dataclass(frozen=True)
class SegmentHead:
    """The weighted cosine's parameters, read from the graph's initializers."""

    weight: npt.NDArray[np.float32]
    bias: float


def segment_head(onnx_path: Path) -> SegmentHead | None:
    """The head of a segment-scorer graph that exposes `SEGMENT_VECTOR_OUTPUTS`; None for any
    other graph (including a missing or unreadable file: the caller's loader says why)."""
    try:
        model = onnx.load(str(onnx_path))
    except (OSError, DecodeError):
        return None
    outputs = {output.name for output in model.graph.output}
    initializers = {i.name: i for i in model.graph.initializer}
    if not set(SEGMENT_VECTOR_OUTPUTS) <= outputs or not set(SEGMENT_HEAD) <= initializers.keys():
        return None
    weight, bias = (numpy_helper.to_array(initializers[name]) for name in SEGMENT_HEAD)
    return SegmentHead(weight.astype(np.float32).reshape(-1), float(bias.reshape(-1)[0]))


class OnnxSegmentScorer:
    """`PassageEncoder` (and so `PairScorer`) over a segment-scorer graph; see the module doc.

    Texts are truncated to `max_length` tokens each ([CLS] text [SEP], BERT's template; the
    passage is the same tokens with token type 1, as in the pair).
    """

    def __init__(
        self,
        onnx_path: Path,
        tokenizer_path: Path,
        model_id: str,
        head: SegmentHead,
        *,
        threads: int = 0,
        max_length: int = MAX_LENGTH,
        passage_reader: Embedder | None = None,
    ) -> None:
        if max_length < MIN_LENGTH:
            raise ValueError(f"need max_length >= {MIN_LENGTH}; got {max_length}")
        self._session = create_session(onnx_path, threads)
        self._model_id = model_id
        self._head = head
        self._max_length = max_length
        self._tokenizer = plain_tokenizer(tokenizer_path)
        self._tokenizer.enable_truncation(max_length)
        self._reader = passage_reader

    @property
    def name(self) -> str:
        return self._model_id

    @property
    def passage_reader(self) -> str | None:
        """The embedder whose vectors are this scorer's passage readings, if any: a corpus
        embedded by it already holds every reading (`readings_of`)."""
        return self._reader.model_id if self._reader is not None else None

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        return self.score_encoded(query, self.encode_passages(passages))

    def encode_passages(self, passages: Sequence[str]) -> list[EncodedPassage]:
        if self._reader is not None:
            return self.readings_of(passages, self._reader.embed(passages))
        encodings = self._tokenizer.encode_batch(list(passages))
        return [
            EncodedPassage(self._vector(e.ids, PASSAGE_TYPE), bool(e.overflowing))
            for e in encodings
        ]

    def readings_of(self, passages: Sequence[str], vectors: Vector) -> list[EncodedPassage]:
        """The readings of `passages` whose embeddings by `passage_reader` are `vectors`
        (as a corpus stores them): no model runs."""
        if self._reader is None:
            raise TypeError(f"{self._model_id} reads passages itself, not with an embedder")
        window = self._reader.max_tokens
        counts = [len(e.ids) for e in self._reader.tokenizer.encode_batch(list(passages))]
        return [
            EncodedPassage(np.asarray(v, dtype=np.float32), count > window)
            for v, count in zip(vectors, counts, strict=True)
        ]

    def score_encoded(self, query: str, passages: Sequence[EncodedPassage]) -> ScoredBatch:
        if not passages:
            return ScoredBatch(scores=[])
        query_vector = self._vector(self._tokenizer.encode(query).ids, QUERY_TYPE)
        matrix = np.stack([p.vector for p in passages]).astype(np.float32, copy=False)
        logits = matrix @ (query_vector * self._head.weight) + self._head.bias
        warnings = []
        truncated = sum(p.truncated for p in passages)
        if truncated:
            warnings.append(
                f"{truncated} of {len(passages)} passages were truncated to "
                f"{self._max_length} tokens; their scores judge only the start of the passage"
            )
        return ScoredBatch(scores=relevance(logits[:, None]).tolist(), warnings=warnings)

    def _vector(self, ids: list[int], token_type: int) -> npt.NDArray[np.float32]:
        """The pooled vector of one text, read as the pair's first or second text."""
        row = np.array([ids], dtype=np.int64)
        feeds = dict(
            zip(INPUT_NAMES, (row, np.ones_like(row), np.full_like(row, token_type)), strict=True)
        )
        output = SEGMENT_VECTOR_OUTPUTS[token_type]
        return np.asarray(self._session.run([output], feeds)[0][0], dtype=np.float32)


class RuntimeOptions(TypedDict, total=False):
    """What both cross-encoder runtimes take beside the files, as `open_cross_encoder`
    hands it on to the one it opens: intra-op `threads` (0: onnxruntime's default) and the
    token limit `max_length` (default `cross_encoder.MAX_LENGTH`)."""

    threads: int
    max_length: int


def open_cross_encoder(
    onnx_path: Path,
    tokenizer_path: Path,
    model_id: str,
    *,
    embedder: Embedder | None = None,
    **runtime: Unpack[RuntimeOptions],
) -> OnnxCrossEncoder | OnnxSegmentScorer:
    """The right runtime for a converted cross-encoder graph: a segment scorer when the graph
    exposes its vectors (passages can then be stored), else the pair-at-a-time runtime.

    A scorer whose config names a `passage_reader` needs that embedder as `embedder`;
    `PassageReaderError` says which one when it is missing or another.
    """
    head = segment_head(onnx_path)
    if head is None:
        return OnnxCrossEncoder(onnx_path, tokenizer_path, model_id, **runtime)
    reader = passage_reader_id(onnx_path.parent)
    if reader is not None and (embedder is None or embedder.model_id != reader):
        found = embedder.model_id if embedder is not None else "none"
        raise PassageReaderError(
            f"evaluator {model_id!r} reads passages with the embedder {reader!r} "
            f"(configured: {found}); set embedder = {reader!r} or choose another cross_encoder"
        )
    return OnnxSegmentScorer(
        onnx_path,
        tokenizer_path,
        model_id,
        head,
        passage_reader=embedder if reader is not None else None,
        **runtime,
    )


def passage_reader_id(folder: Path) -> str | None:
    """The embedder named by the model folder's config.json as its passage reader, if any."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    reader = config.get(PASSAGE_READER) if isinstance(config, dict) else None
    return str(reader) if reader else None
