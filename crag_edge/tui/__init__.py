"""The Textual terminal UI: `crag-edge tui --db PATH` (needs the `tui` extra: textual).

`CragApp` is imported lazily, so `crag_edge.tui.cli` loads without textual installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from crag_edge.tui.app import CragApp

__all__ = ["CragApp"]


def __getattr__(name: str) -> Any:
    if name == "CragApp":
        from crag_edge.tui.app import CragApp

        return CragApp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
