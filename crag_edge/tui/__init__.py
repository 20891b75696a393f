"""The Textual terminal UI: `crag-edge tui --db PATH` (needs the `tui` extra: textual)."""

from __future__ import annotations

from crag_edge.tui.app import CragApp

__all__ = ["CragApp"]
