"""Rich Text Format (.rtf): its text without control words, through `striprtf`."""

from __future__ import annotations

from pathlib import Path

from crag_edge.ingest.formats.builder import DocumentText
from crag_edge.ingest.formats.extras import require
from crag_edge.ingest.loaders import LoadedDocument


def load_rtf(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    striprtf = require("striprtf.striprtf", ".rtf", str(path))
    # RTF is 7-bit text; other characters come as escapes striprtf decodes.
    plain = striprtf.rtf_to_text(raw.decode("latin-1"), errors="replace")
    text = DocumentText(str(path), max_bytes)
    text.blocks(plain.split("\n\n"))
    return text.document(path.stem)
