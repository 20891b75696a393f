"""`ServerConfig`: everything the HTTP service needs: the corpus, the address, the folders
it may read, and the settings' `server` section (`api_token`, `tokens_file`, `server_*`).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from crag_edge.config import ServerSettings, env_name
from crag_edge.groups import FolderGroups, folder_groups
from crag_edge.store.factory import is_database_url

TOKEN_ENV = env_name("api_token")
TOKENS_FILE_ENV = env_name("tokens_file")
# Off loopback the token is all that stands between the network and the corpus: long enough
# that guessing it online is hopeless (16 random characters), never blank.
MIN_TOKEN_CHARS = 16
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost"})
MAX_JOBS_KEPT = 100  # finished ingest jobs still listed
SHUTDOWN_TIMEOUT_S = 30.0  # longest a stop waits for running jobs and calls


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
    """Where one server listens, what it serves, and its `server` settings, held whole: the
    limits and the auth are validated there once (`config.ServerSettings`), not copied."""

    db: Path | str  # a corpus file, or a PostgreSQL URL (`store.factory`)
    settings: ServerSettings = field(default_factory=ServerSettings.defaults)
    host: str = "127.0.0.1"
    port: int = 8080
    ingest_roots: tuple[Path, ...] = ()  # resolved (`normalise_roots`)
    watch_roots: tuple[Path, ...] = ()  # folders kept in sync by the watcher (`ingest.watch`)
    # the groups of new files, by watch root (resolved); a root without: new files untagged
    watch_groups: FolderGroups = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise ServerConfigError(f"port must be between 0 and 65535, got {self.port}")

    @property
    def api_token(self) -> str | None:
        """The one bearer token, None when unset or blank."""
        token = self.settings.api_token
        return (token.get_secret_value() if token else None) or None

    @property
    def tokens_file(self) -> Path | None:
        """Named, scoped tokens (`server.tokens`)."""
        return self.settings.tokens_file

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
        cls,
        db: Path | str,
        server: ServerSettings,
        *,
        host: str = "127.0.0.1",
        port: int = 8080,
        ingest_roots: Sequence[Path | str] | None = None,
        watch_roots: Sequence[Path | str] = (),
        watch_groups: Sequence[tuple[Path | str, frozenset[str]]] = (),
    ) -> ServerConfig:
        """The service of `db` with these settings; `ingest_roots` (CLI options) replace the
        `server_ingest_roots` setting. Every root is resolved and must be a folder;
        `watch_groups` pairs a watch root with the groups of its new files, and a root given
        twice with different groups is refused."""
        if ingest_roots is None:
            ingest_roots = server.server_ingest_roots or ()
        folders = normalise_roots([folder for folder, _ in watch_groups], "watch root")
        try:
            defaults = folder_groups(zip(folders, [g for _, g in watch_groups], strict=True))
        except ValueError as exc:
            raise ServerConfigError(f"watch root {exc}") from None
        return cls(
            db=db if is_database_url(db) else Path(db),
            settings=server,
            host=host,
            port=port,
            ingest_roots=normalise_roots(ingest_roots),
            watch_roots=normalise_roots(watch_roots, "watch root"),
            watch_groups=defaults,
        )

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
