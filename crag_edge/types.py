"""Plain dataclasses shared by every layer: no behaviour, no I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum
from types import TracebackType
from typing import Any, Protocol, Self, runtime_checkable

import numpy as np
import numpy.typing as npt
from tokenizers import Tokenizer

Vector = npt.NDArray[np.float32]
# The metadata key that marks a document, and each of its chunks, as navigation (a page of
# links: a table of contents, an index): findable, but ranked after every passage of content.
NAVIGATION = "navigation"


@dataclass(frozen=True)
class Place:
    """Where a document's text stands from `offset` on: its 1-based PDF `page` and its
    heading path (`section`, headings joined by `citations.SECTION_SEPARATOR`); None
    where the format has none."""

    offset: int
    page: int | None = None
    section: str | None = None


@dataclass(frozen=True)
class Chunk:
    """A stored chunk of one document's extracted text; `start`/`end` are character offsets
    into it. Not a `Span`: a chunk is the store's unit of search, with its `ordinal`, metadata
    and token count, and the `places` that locate any span cut from it.

    `pages` (first, last) and `section` locate the whole chunk for citations; `places` are
    the document's places from the one in effect at `start` up to `end`, so a strip cut
    from the chunk can be located exactly (`citations.locate`). All empty for text that
    has no pages or headings, and for chunks a schema version 3 corpus file holds."""

    chunk_id: int
    doc_id: int
    ordinal: int
    text: str
    start: int
    end: int
    source: str
    title: str = ""
    metadata: dict[str, Any] = field(default_factory=dict)
    token_count: int = 0
    pages: tuple[int, int] | None = None
    section: str | None = None
    places: tuple[Place, ...] = ()


@dataclass(frozen=True)
class Span:
    """A piece of one document's text, the one record from refinement's strip to the
    evidence a result cites, so no field is copied between look-alikes: a strip of a chunk,
    neighbouring strips joined, or a numbered piece of final evidence (`result.ContextItem`).
    `start`/`end` index the document's text.

    `n` numbers it for citation, `origin` names where its chunk was found (search, expand, a
    fallback provider), `pages` and `section` locate it for a reader (None where the document
    has no pages or headings). A strip has none of these yet (0, "", None): it is numbered
    and located once it is evidence, after it may have been joined to its neighbours."""

    n: int
    chunk_id: int
    doc_id: int
    source: str
    title: str
    start: int
    end: int
    text: str
    origin: str
    score: float
    pages: tuple[int, int] | None = None
    section: str | None = None

    @classmethod
    def from_chunk(cls, chunk: Chunk, *, n: int = 0, origin: str = "", score: float = 0.0) -> Span:
        """The whole of `chunk`, located as the chunk is."""
        whole = replace(cls.strip_of(chunk, 0, chunk.text), end=chunk.end)
        return whole.located(
            n=n, origin=origin, score=score, pages=chunk.pages, section=chunk.section
        )

    @classmethod
    def strip_of(cls, chunk: Chunk, begin: int, text: str) -> Span:
        """The strip `text` standing at offset `begin` of `chunk`'s text, not yet evidence."""
        start = chunk.start + begin
        return cls(
            n=0,
            chunk_id=chunk.chunk_id,
            doc_id=chunk.doc_id,
            source=chunk.source,
            title=chunk.title,
            start=start,
            end=start + len(text),
            text=text,
            origin="",
            score=0.0,
        )

    def located(
        self,
        *,
        n: int,
        origin: str,
        score: float,
        pages: tuple[int, int] | None,
        section: str | None,
    ) -> Span:
        """This span as the `n`th piece of evidence, found by `origin`, scored and located."""
        return replace(self, n=n, origin=origin, score=score, pages=pages, section=section)


@dataclass(frozen=True)
class Hit:
    """One retrieved chunk with every retriever's score and rank (None: that retriever missed it).

    `dense_score` is cosine similarity in [-1, 1]; `bm25_score` is FTS5's bm25 negated so that
    higher is better; `score` is the fused (RRF) score that `rank` orders by.
    """

    chunk: Chunk
    rank: int
    score: float
    dense_score: float | None = None
    dense_rank: int | None = None
    bm25_score: float | None = None
    bm25_rank: int | None = None
    origin: str = "search"


class Embedder(Protocol):
    """What ingest and retrieval need from an embedding model."""

    @property
    def model_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    @property
    def tokenizer(self) -> Tokenizer:
        """The model's tokenizer without truncation or padding: chunk sizes are counted in it."""
        ...

    @property
    def max_tokens(self) -> int:
        """Texts are truncated to this many tokens before they are embedded."""
        ...

    def embed(self, texts: Sequence[str]) -> Vector:
        """Return an (n, dim) float32 array of L2-normalised embeddings."""
        ...


@dataclass(frozen=True)
class ScoredBatch:
    """Relevance scores in [0, 1], one per passage, and any warnings raised while scoring.

    `failed` lists the passages whose score is a stand-in (0.5 after a timeout or garbage
    output), not the model's judgement: those are never cached.
    """

    scores: list[float]
    warnings: list[str] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


class PairScorer(Protocol):
    """A model that judges (query, passage) relevance for a whole batch in one call."""

    @property
    def name(self) -> str: ...

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch: ...


@dataclass(frozen=True)
class EncodedPassage:
    """A passage as a `PassageEncoder` reads it, whatever the query; `truncated`: only its
    start was read."""

    vector: Vector
    truncated: bool = False


@runtime_checkable
class PassageEncoder(PairScorer, Protocol):
    """A pair scorer that reads the passage without the query: its reading of a chunk can be
    computed once (at ingest) and stored, and a query then costs almost nothing per passage.
    `score(q, ps)` must equal `score_encoded(q, encode_passages(ps))`."""

    def encode_passages(self, passages: Sequence[str]) -> list[EncodedPassage]: ...

    def score_encoded(self, query: str, passages: Sequence[EncodedPassage]) -> ScoredBatch: ...


@runtime_checkable
class EmbeddingReader(PassageEncoder, Protocol):
    """A passage encoder whose reading of a passage is an embedder's vector of it: a corpus
    embedded by that embedder already holds every reading."""

    @property
    def passage_reader(self) -> str | None:
        """The embedder's model id, or None when this encoder reads passages itself."""
        ...

    def readings_of(self, passages: Sequence[str], vectors: Vector) -> list[EncodedPassage]: ...


def embedding_text(title: str, chunk_text: str) -> str:
    """What the embedder sees for a chunk: its document title gives otherwise bare passages
    their context (as in BEIR's title + text convention)."""
    return f"{title}\n{chunk_text}" if title else chunk_text


def reading_text(encoder: PassageEncoder, chunk: Chunk) -> str:
    """What a passage encoder reads of a chunk: one whose readings are the embedder's reads it
    as retrieval embedded it (title first), so a fresh reading equals a stored one."""
    if isinstance(encoder, EmbeddingReader) and encoder.passage_reader is not None:
        return embedding_text(chunk.title, chunk.text)
    return chunk.text


@dataclass(frozen=True)
class PassageIndex:
    """The evaluator whose passage readings a corpus stores, and the version key they are
    stored under (the same key its cached scores use)."""

    scorer_key: str
    encoder: PassageEncoder


class Decision(StrEnum):
    """The CRAG retrieval-evaluator outcome."""

    CORRECT = "CORRECT"
    AMBIGUOUS = "AMBIGUOUS"
    INCORRECT = "INCORRECT"


class Action(StrEnum):
    """What the pipeline does next, as the grader decides it."""

    GENERATE = "GENERATE"
    REFINE = "REFINE"
    RE_RETRIEVE = "RE_RETRIEVE"


class Closing:
    """`with` for anything that has a `close()`: the block's end closes it, however it ends."""

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
