"""Old public names that still import after a rename, each with a DeprecationWarning that
names its replacement, so a caller's code keeps working while it moves to the new name."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping


def renamed_names(
    module: str, renamed: Mapping[str, str], namespace: Mapping[str, object]
) -> Callable[[str], object]:
    """A module `__getattr__` that answers each old name in `renamed` with the object now
    called by its new name in `namespace` (the module's globals)."""

    def old_name(name: str) -> object:
        if name not in renamed:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} is renamed {module}.{renamed[name]}",
            DeprecationWarning,
            stacklevel=2,
        )
        return namespace[renamed[name]]

    return old_name
