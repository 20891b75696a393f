"""Optional libraries a format needs, imported when a file of it is read, with the one line
that says how to install them when they are missing."""

from __future__ import annotations

import importlib
from types import ModuleType

from crag_edge.ingest.loaders import LoadError

# The extra (`pip install 'crag-edge[office]'`) that installs each optional library.
EXTRA_OF = {"striprtf": "office", "pdfplumber": "office"}


class MissingExtra(LoadError):
    """A format's library is not installed."""


def require(module: str, what: str, source: str) -> ModuleType:
    """`module` imported, or a `MissingExtra` saying which extra reads `what`."""
    try:
        return importlib.import_module(module)
    except ImportError:
        extra = EXTRA_OF[module.split(".")[0]]
        raise MissingExtra(
            source, f"reading {what} needs {module}: pip install 'crag-edge[{extra}]'"
        ) from None
