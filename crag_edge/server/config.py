"""`ServerConfig`: everything the HTTP service needs, from the settings' `server` section
(`api_token`, `tokens_file`, `server_*`) plus CLI options.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from crag_edge.config import ServerSettings, env_name
from crag_edge.store.factory import is_database_url

TOKEN_ENV = env_name("api_token")
TOKENS_FILE_ENV = env_name("tokens_file")
# Off loopback the token is all that stands between the network and the corpus: long enough
# that guessing it online is hopeless (16 random characters), never blank.
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})


class ServerConfigError(ValueError):
    """The server must not start with this configuration; the message says why."""


def is_loopback(host: str) -> bool:
    """True only for addresses that never leave this machine (127.0.0.0/8, ::1, localhost)."""
    name = host.strip().strip("[]").lower()
    if name in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # any other host name may resolve to a public interface


@dataclass(frozen=True)
class ServerConfig:
    """Limits, auth and paths of one server. Defaults suit a 2-core box with one shared LLM."""

    db: Path | str  # a corpus file, or a PostgreSQL URL (`store.factory`)
    host: str = "127.0.0.1"
    port: int = 8080
    api_token: str | None = field(default=None, repr=False)
    tokens_file: Path | None = None  # named, scoped tokens (`server.tokens`)
    ingest_roots: tuple[Path, ...] = ()
    watch_roots: tuple[Path, ...] = ()  # folders kept in sync by the watcher (`ingest.watch`)
    watch_groups: frozenset[str] | None = None  # the groups of new files in the watch roots
    max_body_bytes: int = 64 * 1024
    max_question_chars: int = 2000
    max_ingest_paths: int = 100
    workers: int = 1  # query/answer calls running at once (the models are shared)
    max_waiting: int = 8  # calls allowed to wait for a worker; beyond: 503 + Retry-After
    queue_timeout_s: float = 30.0  # longest wait for a worker before 503
    read_timeout_s: float = 30.0  # longest a request's head, then its body, may take to arrive
    retry_after_s: int = 2
    max_jobs_kept: int = 100
    job_stale_after_s: float = 60.0  # a job not updated this long: its replica died
    shutdown_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.workers < 1 or self.max_waiting < 0:
            raise ServerConfigError("workers must be >= 1 and max_waiting >= 0")
        if self.max_body_bytes < 1024 or self.max_question_chars < 1:
            raise ServerConfigError("max_body_bytes must be >= 1024, max_question_chars >= 1")
        if not 0 <= self.port <= 65535:
            raise ServerConfigError(f"port must be between 0 and 65535, got {self.port}")

    @property
    def auth_required(self) -> bool:
        """A token file counts even when every token in it is revoked: revoking the last
        token locks the service rather than opening it."""
        return bool(self.api_token) or self.tokens_file is not None

    def validate_bind(self) -> None:
        """Refuse to listen beyond loopback without a strong token: anyone on the network
        could ask, or guess a short one."""
        if is_loopback(self.host):
            return
        if not self.auth_required:
            raise ServerConfigError(
                f"refusing to listen on {self.host!r} without an API token: binding beyond "
                f"loopback (127.0.0.1, ::1, localhost) requires bearer-token auth; set "
                f"{TOKEN_ENV} or {TOKENS_FILE_ENV} (or the api_token or tokens_file "
                f"setting), or bind to 127.0.0.1"
            )
        if self.api_token is not None and len(self.api_token.strip()) < MIN_TOKEN_CHARS:
            raise ServerConfigError(
                f"refusing to listen on {self.host!r} with a weak API token: {TOKEN_ENV} must "
                f"hold at least {MIN_TOKEN_CHARS} characters besides blanks (e.g. the output "
                f"of `openssl rand -hex 16`)"
            )

    @classmethod
    def from_settings(
        cls, db: Path | str, server: ServerSettings, **overrides: Any
    ) -> ServerConfig:
        """The settings' `server` section, each `server_<name>` setting as `<name>`; explicit
        keyword overrides (CLI options) win, `None` overrides are ignored."""
        values: dict[str, Any] = {
            name.removeprefix("server_"): value
            for name, value in server
            if name.startswith("server_")
        }
        token = server.api_token.get_secret_value() if server.api_token else None
        values["api_token"] = token or None
        values["tokens_file"] = server.tokens_file
        values.update({k: v for k, v in overrides.items() if v is not None})
        values["ingest_roots"] = normalise_roots(values["ingest_roots"] or ())
        if "watch_roots" in values:
            values["watch_roots"] = normalise_roots(values["watch_roots"], "watch root")
        return cls(db=db if is_database_url(db) else Path(db), **values)

    @property
    def corpus_name(self) -> str:
        """The corpus file's name without suffix, or the database's name."""
        if isinstance(self.db, Path):
            return self.db.stem
        return urlsplit(self.db).path.rsplit("/", 1)[-1] or "postgres"


def normalise_roots(roots: Sequence[Path | str], kind: str = "ingest root") -> tuple[Path, ...]:
    """Each root, resolved (symlinks followed once, here); every one must be a folder."""
    resolved = []
    for root in roots:
        try:
            path = Path(root).expanduser().resolve()
        except (RuntimeError, OSError) as exc:  # `~name` of no user, a symlink loop
            raise ServerConfigError(f"{kind} {str(root)!r} cannot be resolved: {exc}") from None
        if not path.is_dir():
            raise ServerConfigError(f"{kind} {str(root)!r} is not an existing folder")
        resolved.append(path)
    return tuple(resolved)
