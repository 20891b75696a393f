"""From a presented secret to the principal it belongs to: CRAG_EDGE_API_TOKEN or a named
token of the token file."""

from __future__ import annotations

import hmac
from pathlib import Path

from crag_edge.server.scopes import Principal
from crag_edge.server.tokens import ENV_TOKEN_NAME, TokenFile, digest


class Authenticator:
    """The service's tokens: the one of CRAG_EDGE_API_TOKEN (admin, named `env`), kept so a
    single-token setup keeps working, and the named tokens of `tokens_file`, read afresh at
    every lookup so that adding or revoking one needs no restart."""

    def __init__(self, env_token: str | None, tokens_file: Path | None) -> None:
        # Without surrounding blanks: no header can carry them (HTTP strips them), and a token
        # read from a file or an env file often ends with a newline.
        self._env_digest = digest(env_token.strip()) if env_token else None
        self.tokens = TokenFile(tokens_file) if tokens_file is not None else None

    @property
    def required(self) -> bool:
        """Any token configured, even a token file whose tokens are all revoked: revoking the
        last token must lock the service, not open it."""
        return self._env_digest is not None or self.tokens is not None

    def identify(self, secret: str) -> Principal | None:
        """The principal of `secret`, or None; may raise TokenError if the file went bad.
        Both sources are always checked, so the time taken does not say which one matched."""
        env = self._env_digest is not None and hmac.compare_digest(digest(secret), self._env_digest)
        named = self.tokens.lookup(secret) if self.tokens is not None else None
        return Principal(ENV_TOKEN_NAME, "admin") if env else named
