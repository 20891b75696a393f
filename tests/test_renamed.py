"""A renamed public name still imports, warns once with its replacement, and is the same object."""

from __future__ import annotations

import importlib

import pytest

RENAMED = [
    ("crag_edge.config", "KB_AGENT_ENV_NAMES", "OLDER_ENV_NAMES"),
    ("crag_edge.progress", "Progress", "StageListener"),
    ("crag_edge.ingest", "Progress", "IngestListener"),
    ("crag_edge.ingest.pipeline", "Progress", "IngestListener"),
    ("crag_edge.models.provision", "Progress", "PullProgress"),
]


@pytest.mark.parametrize(("module", "old", "new"), RENAMED)
def test_an_old_name_warns_and_gives_the_new_object(module: str, old: str, new: str) -> None:
    imported = importlib.import_module(module)
    with pytest.warns(DeprecationWarning, match=f"{module}.{old} is renamed {module}.{new}"):
        found = getattr(imported, old)
    assert found is getattr(imported, new)


def test_an_unknown_name_is_still_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'Nothing'"):
        _ = importlib.import_module("crag_edge.config").Nothing
