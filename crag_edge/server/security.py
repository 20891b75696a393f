"""The bearer token of a request, and confinement of server-side paths to the ingest roots."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


def bearer_secret(header: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (scheme in any case), else None. It is
    only ever compared as a hash, in constant time (`server.authenticate`)."""
    scheme, _, given = (header or "").partition(" ")
    given = given.strip()
    return given if scheme.lower() == "bearer" and given else None


class PathRefused(ValueError):
    """A requested path is outside every ingest root (or cannot be checked); `status` for HTTP."""

    def __init__(self, requested: str, reason: str, status: int = 403) -> None:
        super().__init__(f"{requested!r}: {reason}")
        self.requested = requested
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class ConfinedPaths:
    """The files to ingest (resolved, all inside a root) and the folders they came from."""

    files: tuple[Path, ...]
    skipped_hidden: int


def _inside(path: Path, roots: tuple[Path, ...]) -> bool:
    return any(path == root or path.is_relative_to(root) for root in roots)


def _absolute(requested: str, first_root: Path) -> Path:
    """`requested` as an absolute path: `~` and `~user` expanded, a relative path taken
    against `first_root`. The home of a user who does not exist is refused as lying outside
    the roots (which it does), in the same words as any other user's, so the answer does not
    tell which user names exist on the server."""
    path = Path(requested)
    if requested.startswith("~"):
        try:
            path = path.expanduser()
        except RuntimeError:
            raise PathRefused(requested, "outside the allowed ingest roots") from None
    return path if path.is_absolute() else first_root / path


def confine(requested: str, roots: tuple[Path, ...]) -> Path:
    """The real path of `requested` when it lies inside one of `roots` (already resolved).

    Relative paths are taken against the first root. Symlinks are resolved before the check,
    so `..`, absolute paths elsewhere and links pointing out of a root are all refused.
    """
    if not roots:
        raise PathRefused(requested, "ingest by server path is disabled (no ingest roots)")
    if not requested or "\x00" in requested:
        raise PathRefused(requested, "not a valid path", 422)
    candidate = _absolute(requested, roots[0])
    try:
        real = candidate.resolve(strict=True)
    except FileNotFoundError:
        # Do not reveal whether a path outside the roots exists: check the lexical form first.
        lexical = Path(os.path.normpath(candidate))
        if not _inside(lexical, roots):
            raise PathRefused(requested, "outside the allowed ingest roots") from None
        raise PathRefused(requested, "no such file or folder", 404) from None
    except (OSError, RuntimeError):  # symlink loops, permission errors
        raise PathRefused(requested, "cannot be resolved") from None
    if not _inside(real, roots):
        raise PathRefused(requested, "outside the allowed ingest roots")
    return real


def expand_confined(requested: list[str], roots: tuple[Path, ...]) -> ConfinedPaths:
    """Every file named or found (not hidden) under the requested paths, each checked.

    Folders are walked here, without following folder links, and each file is resolved and
    checked, because a link inside an allowed folder may point anywhere; the ingest then
    receives only real paths inside the roots. One escaping entry refuses the whole request.
    """
    files: dict[Path, None] = {}
    hidden = 0
    for raw in requested:
        path = confine(raw, roots)
        if not path.is_dir():
            files[path] = None
            continue
        for folder, dirs, names in os.walk(path):
            hidden += sum(1 for d in dirs if d.startswith(".")) + sum(
                1 for n in names if n.startswith(".")
            )
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for name in sorted(n for n in names if not n.startswith(".")):
                entry = Path(folder, name)
                shown = f"{raw.rstrip('/')}/{entry.relative_to(path)}"
                try:
                    real = entry.resolve(strict=True)
                except (OSError, RuntimeError):
                    raise PathRefused(
                        shown, "cannot be resolved (broken or looping link)"
                    ) from None
                if not _inside(real, roots):
                    raise PathRefused(shown, "links outside the allowed ingest roots")
                files[real] = None
    return ConfinedPaths(tuple(files), hidden)
