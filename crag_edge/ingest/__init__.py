"""Ingest: load files into text, chunk it by embedder tokens, embed, store incrementally."""

from crag_edge.ingest.chunker import Chunker, TextSpan
from crag_edge.ingest.formats import is_supported, load_file
from crag_edge.ingest.formats.html import load_html
from crag_edge.ingest.loaders import (
    LoadedDocument,
    LoadError,
    iter_beir,
    load_markdown,
    load_pdf,
    load_text,
)
from crag_edge.ingest.pipeline import (
    EMBED_GROUP,
    Format,
    IngestListener,
    IngestReport,
    ProgressEvent,
    embedding_text,
    ingest,
)
from crag_edge.renamed import renamed_names

__all__ = [
    "EMBED_GROUP",
    "Chunker",
    "Format",
    "IngestListener",
    "IngestReport",
    "LoadError",
    "LoadedDocument",
    "ProgressEvent",
    "TextSpan",
    "embedding_text",
    "ingest",
    "is_supported",
    "iter_beir",
    "load_file",
    "load_html",
    "load_markdown",
    "load_pdf",
    "load_text",
]

__getattr__ = renamed_names(__name__, {"Progress": "IngestListener"}, globals())
