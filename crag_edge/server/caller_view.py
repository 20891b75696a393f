"""What a caller with groups is shown of a result: nothing that counts or reveals what it may
not see.

- `cache_hits` says a model score was served from the evaluation cache, that is, that someone
  asked the same question over the same evidence before: dropped.
- `doc_id` and `chunk_id` are numbered over the whole corpus, so the gaps between the ones a
  caller sees count the documents it may not: each is replaced by an opaque id, a keyed hash
  (HMAC-SHA-256, a key drawn per service process) that stays the same for one document or
  chunk while the service runs, so two hits of one document still look alike.

An admin (groups None) gets the result unchanged.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import Any

from crag_edge.groups import Groups

OPAQUE_KEYS = {"doc_id": "d", "chunk_id": "c"}
HIDDEN_KEYS = frozenset({"cache_hits"})


class CallerView:
    """Rewrites result JSON for one service process's callers (`shown`)."""

    def __init__(self, key: bytes | None = None) -> None:
        self._key = key or secrets.token_bytes(32)

    def shown(self, data: Any, groups: Groups) -> Any:
        """`data` (JSON-like) as a caller with `groups` may see it."""
        if groups is None:
            return data
        return self._rewrite(data)

    def opaque(self, prefix: str, value: int) -> str:
        digest = hmac.new(self._key, f"{prefix}:{value}".encode(), hashlib.sha256)
        return prefix + digest.hexdigest()[:20]

    def _rewrite(self, data: Any) -> Any:
        if isinstance(data, list):
            return [self._rewrite(item) for item in data]
        if not isinstance(data, dict):
            return data
        shown: dict[str, Any] = {}
        for key, value in data.items():
            if key in HIDDEN_KEYS:
                continue
            prefix = OPAQUE_KEYS.get(key)
            if prefix is not None and isinstance(value, int) and not isinstance(value, bool):
                shown[key] = self.opaque(prefix, value)
            else:
                shown[key] = self._rewrite(value)
        return shown
