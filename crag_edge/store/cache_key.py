"""The key a query's model scores are cached under, written once for both backends'
evaluation caches (`store.sqlite.score_cache`, `store.postgres.caches`)."""

from __future__ import annotations

import hashlib


def query_key(query: str) -> bytes:
    """Queries are matched exactly after trimming; hashed so the table stays small."""
    return hashlib.sha256(query.strip().encode("utf-8")).digest()
