"""The engine: one corpus, its embedder and settings, and the order of the pipeline's stages.

Today the stages are ingest and retrieval; grading, correction and generation join here,
and only here, as they are built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType

from crag_edge.config import Settings
from crag_edge.ingest import Format, IngestReport, ProgressEvent, ingest
from crag_edge.models.registry import load_embedder
from crag_edge.retrieval import Mode, Retriever
from crag_edge.store import Corpus
from crag_edge.types import Embedder, Hit


class Engine:
    """A corpus opened for ingest and search. Use `Engine.open`; close it (or use `with`)."""

    def __init__(self, corpus: Corpus, embedder: Embedder, settings: Settings) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.settings = settings
        self.retriever = Retriever(
            corpus, embedder, candidates=settings.candidates, rrf_k=settings.rrf_k
        )

    @classmethod
    def open(
        cls,
        db: Path | str,
        settings: Settings | None = None,
        *,
        create: bool = False,
        readonly: bool = False,
        embedder: Embedder | None = None,
    ) -> Engine:
        """Open (or with `create`, create) a corpus and load the embedder it was built with.

        The corpus is opened first, so a wrong path, a foreign or corrupt file fails before
        any model loads; a corpus built by another embedder is refused.
        """
        settings = settings or Settings.load()
        db = Path(db)
        if create and not db.exists():
            embedder = embedder or load_embedder(settings)
            corpus = Corpus.create(db, embedder.model_id, embedder.dim)
        else:
            corpus = Corpus.open(db, readonly=readonly)
            try:
                embedder = embedder or load_embedder(settings)
                corpus.check_embedder(embedder.model_id, embedder.dim)
            except BaseException:
                corpus.close()
                raise
        return cls(corpus, embedder, settings)

    def ingest(
        self,
        inputs: Sequence[Path | str],
        *,
        fmt: Format = "auto",
        prune: bool = False,
        progress: Callable[[ProgressEvent], None] | None = None,
    ) -> IngestReport:
        """Add or update files (incremental by content hash); see `crag_edge.ingest`."""
        return ingest(
            self.corpus,
            self.embedder,
            self.embedder.tokenizer,
            inputs,
            settings=self.settings,
            fmt=fmt,
            prune=prune,
            progress=progress,
        )

    def search(
        self,
        question: str,
        *,
        mode: Mode | None = None,
        top_k: int | None = None,
    ) -> list[Hit]:
        """Retrieve the best chunks for `question`."""
        return self.retriever.search(
            question, top_k=top_k or self.settings.top_k, mode=mode or self.settings.retrieval_mode
        )

    def close(self) -> None:
        self.corpus.close()

    def __enter__(self) -> Engine:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
