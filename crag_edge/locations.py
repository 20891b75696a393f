"""Where a corpus lives, as text: a `postgresql://` (or `postgres://`) URL names a PostgreSQL
database, anything else a SQLite file. Kept free of any database driver so the settings, the
CLI and the TUI can tell the two apart, and name a database without its password, before
anything is opened (`store.factory` opens them).
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

# Schemes libpq accepts for a connection URL.
DATABASE_SCHEMES = ("postgresql://", "postgres://")
_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")


def is_database_url(location: Path | str) -> bool:
    """Whether `location` names a PostgreSQL database rather than a corpus file."""
    return isinstance(location, str) and location.startswith(DATABASE_SCHEMES)


_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")


def parse_location(value: str | Path) -> Path | str:
    """A corpus location as typed: a database URL stays text (as a `Path`,
    `postgresql://host/db` would lose a slash), anything else is a file path. Empty text (the
    working directory) and a URL of another scheme (`http://`, which as a path would name a
    folder `http:`) are a `ValueError`; so are a NUL, which no file name holds, and SQLite's
    `:memory:`, which would keep nothing (as a file name it would make a file so named).
    Anything but text or a path is a `TypeError`."""
    if not isinstance(value, str | Path):
        raise TypeError(f"a corpus location is a str or Path, not {value!r}")
    if is_database_url(value):
        return value
    text = str(value)
    if not text.strip() or _SCHEME.match(text) or "\0" in text or text == ":memory:":
        raise ValueError(f"not a corpus file or a postgresql:// URL: {value!r}")
    return Path(value)


def redacted(url: str) -> str:
    """`url` with its password (if any) replaced by `***`: what messages and stats show."""
    return _PASSWORD.sub(r"\1***@", url)


def shown_location(location: Path | str) -> str:
    """How a screen or message names a corpus: its file, or its URL without the password."""
    return redacted(str(location)) if is_database_url(location) else str(location)


def same_location(a: Path | str, b: Path | str) -> bool:
    """Whether two locations name one corpus: URLs as written, files by their resolved path."""
    if is_database_url(a) or is_database_url(b):
        return str(a) == str(b)
    return Path(a).resolve() == Path(b).resolve()


def absolute_location(location: Path | str) -> Path | str:
    """`location` independent of the working directory: a URL as written, a file resolved."""
    return location if is_database_url(location) else Path(location).expanduser().resolve()


def corpus_name(location: Path | str) -> str:
    """A corpus's short name for model cards and default ids: the file's name, or the URL's
    database name (never its host, user or password)."""
    if is_database_url(location):
        return urlsplit(str(location)).path.strip("/") or "postgres"
    return Path(location).name
