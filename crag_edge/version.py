"""The installed version, in a module of its own so that the core can stamp cached scores with
it without importing the package root (which re-exports the whole public API)."""

from importlib import metadata

try:
    __version__ = metadata.version("crag-edge")
except metadata.PackageNotFoundError:  # a source tree that was never installed
    __version__ = "0+unknown"
