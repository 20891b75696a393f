"""crag-edge: Corrective RAG that runs fully offline."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("crag-edge")
except PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
