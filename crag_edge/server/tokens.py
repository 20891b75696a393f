"""Named API tokens, kept in a file of their own: the `tokens_file` setting
(CRAG_EDGE_TOKENS_FILE).

A separate file, not a table of the corpus, because tokens belong to the service and not to
the documents: a corpus file is copied, backed up, handed to colleagues and opened read-only,
and a service's credentials should travel with none of those; one token file also serves every
corpus a site runs, and the corpus schema stays free of them. SQLite rather than a text file,
so that `tokens add` and `tokens revoke` are atomic while a running service reads the file,
and two adds of one name cannot both succeed. It is plain SQLite (apsw, no extension): none of
the corpus's machinery is needed.

Only the SHA-256 of each secret is stored, never the secret. A password needs a slow, salted
hash because it has little entropy; these secrets are 256 random bits from `secrets`, so a
single fast hash is already beyond brute force, and being fast it can be checked on every
request. The service reads the file at every request, without a cache, so a revoked token is
refused from its next request on, with no restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from collections.abc import Iterable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import apsw

from crag_edge.groups import NAME_RULE, checked_groups, is_valid_name
from crag_edge.server.scopes import SCOPES, Principal, Scope
from crag_edge.text_boundary import printable_path

# "CRGT": tells a token file from a corpus ("CRAG") or any other SQLite database.
APPLICATION_ID = 0x43524754
SCHEMA_VERSION = 1
SECRET_BYTES = 32  # secrets.token_urlsafe(32): 43 characters, 256 random bits
BUSY_TIMEOUT_MS = 5000
# The name CRAG_EDGE_API_TOKEN goes by in logs and job ownership; no file token may take it.
ENV_TOKEN_NAME = "env"

_SCHEMA = f"""
CREATE TABLE tokens (
    name       TEXT PRIMARY KEY COLLATE NOCASE,
    scope      TEXT NOT NULL CHECK (scope IN ({", ".join(repr(s) for s in SCOPES)})),
    groups     TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(groups)),
    sha256     BLOB NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    revoked_at REAL
);
PRAGMA application_id = {APPLICATION_ID};
PRAGMA user_version = {SCHEMA_VERSION};
"""


class TokenError(Exception):
    """An expected failure of the token file (missing, foreign, unknown name): exit 1."""

    exit_code = 1


class TokenUsageError(TokenError):
    """A name or group the command line must not accept (invalid, taken, reserved): exit 2."""

    exit_code = 2


@dataclass(frozen=True)
class TokenInfo:
    """What `tokens list` shows of a token: never its secret, nor the secret's hash."""

    name: str
    scope: Scope
    groups: tuple[str, ...]
    created_at: float
    revoked_at: float | None


def checked_name(name: str) -> str:
    """`name` when it follows the rule of group names (`groups.NAME_PATTERN`): safe in a log
    line, a URL and a shell."""
    if not is_valid_name(name):
        raise TokenUsageError(f"invalid token name {name!r}: {NAME_RULE}")
    return name


def digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


class TokenFile:
    """The token file at `path`: add, list and revoke tokens, and look a secret up."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def add(self, name: str, scope: Scope, groups: Iterable[str] = ()) -> str:
        """Store a new token (its hash) and return its secret: the only time it exists."""
        checked_name(name)
        if name.lower() == ENV_TOKEN_NAME:
            raise TokenUsageError(
                f"the token name {ENV_TOKEN_NAME!r} is reserved for CRAG_EDGE_API_TOKEN"
            )
        try:
            readable = sorted(checked_groups(groups))
        except ValueError as exc:
            raise TokenUsageError(str(exc)) from None
        secret = secrets.token_urlsafe(SECRET_BYTES)
        row = (name, scope, json.dumps(readable), digest(secret), time.time())
        with self._connection(write=True) as conn:
            try:
                conn.execute(
                    "INSERT INTO tokens (name, scope, groups, sha256, created_at) "
                    "VALUES (?, ?, ?, ?, ?)",
                    row,
                )
            except apsw.ConstraintError:
                raise TokenUsageError(
                    f"a token named {name!r} already exists (revoked names stay taken, so "
                    "that logs keep naming one token); choose another name"
                ) from None
        return secret

    def list(self) -> list[TokenInfo]:
        """Every token, revoked ones included, oldest first."""
        with self._connection(write=False) as conn:
            rows = conn.execute(
                "SELECT name, scope, groups, created_at, revoked_at FROM tokens "
                "ORDER BY created_at, name"
            ).fetchall()
        return [
            TokenInfo(
                str(name),
                cast(Scope, scope),
                tuple(json.loads(str(groups))),
                float(cast(float, created)),
                None if revoked is None else float(cast(float, revoked)),
            )
            for name, scope, groups, created, revoked in rows
        ]

    def revoke(self, name: str) -> bool:
        """Refuse the token from now on; False when it was already revoked."""
        with self._connection(write=True) as conn:
            found = conn.execute("SELECT revoked_at FROM tokens WHERE name = ?", (name,)).fetchall()
            if not found:
                raise TokenError(f"no token named {name!r} in {printable_path(self.path)}")
            if found[0][0] is not None:
                return False
            conn.execute("UPDATE tokens SET revoked_at = ? WHERE name = ?", (time.time(), name))
        return True

    def lookup(self, secret: str) -> Principal | None:
        """The principal of a live token whose secret this is, else None.

        Every live token's hash is compared, in constant time and without stopping at a match,
        so the time taken says nothing about which token, or how much of one, was guessed."""
        given = digest(secret)
        with self._connection(write=False) as conn:
            rows = conn.execute(
                "SELECT name, scope, groups, sha256 FROM tokens WHERE revoked_at IS NULL"
            ).fetchall()
        found: Principal | None = None
        for name, scope, groups, stored in rows:
            if hmac.compare_digest(given, cast(bytes, stored)):
                found = Principal(str(name), cast(Scope, scope), frozenset(json.loads(str(groups))))
        return found

    def check(self) -> None:
        """Fail now (TokenError) unless the file exists and is a token file."""
        with self._connection(write=False):
            pass

    @contextmanager
    def _connection(self, *, write: bool) -> Iterator[apsw.Connection]:
        """A connection for one command or lookup; any failure of the file as a database is a
        TokenError saying what is wrong with it (the service answers 503 auth_unavailable)."""
        try:
            with closing(self._open(write=write)) as conn:
                yield conn
        except apsw.Error as exc:
            raise TokenError(_failure(printable_path(self.path), exc)) from None

    def _open(self, *, write: bool) -> apsw.Connection:
        """A connection to the file (created, private to its owner, by the first `add`)."""
        shown = printable_path(self.path)
        if write:
            _create_private(self.path)
        elif not self.path.is_file():
            raise TokenError(f"no token file at {shown}: create it with `crag-edge tokens add`")
        flags = apsw.SQLITE_OPEN_READWRITE if write else apsw.SQLITE_OPEN_READONLY
        try:
            conn = apsw.Connection(str(self.path), flags=flags)
        except apsw.Error as exc:
            raise TokenError(f"cannot open the token file {shown}: {exc}") from None
        try:
            conn.set_busy_timeout(BUSY_TIMEOUT_MS)
            _ensure_schema(conn, shown, write=write)
        except apsw.NotADBError:
            conn.close()
            raise TokenError(f"{shown} is not a crag-edge token file") from None
        except BaseException:
            conn.close()
            raise
        return conn


def _failure(shown: str, exc: apsw.Error) -> str:
    """What went wrong with the token file, in one line."""
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return f"the token file {shown} stayed locked by another process past {BUSY_TIMEOUT_MS} ms"
    if isinstance(exc, apsw.CorruptError | apsw.NotADBError):
        return f"the token file {shown} is damaged: {exc}"
    if isinstance(exc, apsw.SQLError):
        return f"the token file {shown} lacks its tokens table: {exc}"
    return f"cannot read the token file {shown}: {type(exc).__name__}: {exc}"


def _create_private(path: Path) -> None:
    """An empty file readable by its owner only (SQLite gives its journal the same mode)."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    except FileExistsError:
        pass
    except OSError as exc:
        shown = printable_path(path)
        raise TokenError(f"cannot create the token file {shown}: {exc.strerror}") from None


def _ensure_schema(conn: apsw.Connection, shown: str, *, write: bool) -> None:
    """Create the table in a new, empty file; refuse any other database."""
    if write:
        conn.execute("BEGIN IMMEDIATE")  # two first adds at once: one creates, one waits
    try:
        app_id, version = _header(conn)
        empty = not conn.execute("SELECT 1 FROM sqlite_schema LIMIT 1").fetchall()
        if write and empty and app_id == 0:
            conn.execute(_SCHEMA)
            app_id, version = APPLICATION_ID, SCHEMA_VERSION
    except BaseException:
        if write and not conn.getautocommit():
            conn.execute("ROLLBACK")
        raise
    if write:
        conn.execute("COMMIT")
    if app_id != APPLICATION_ID:
        raise TokenError(f"{shown} is not a crag-edge token file")
    if version > SCHEMA_VERSION:
        raise TokenError(f"{shown} was written by a newer crag-edge; upgrade to use it")


def _header(conn: apsw.Connection) -> tuple[int, int]:
    app_id = conn.execute("PRAGMA application_id").fetchall()[0][0]
    version = conn.execute("PRAGMA user_version").fetchall()[0][0]
    return cast(int, app_id), cast(int, version)
