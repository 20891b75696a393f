"""Renames and moves: the groups of a document follow it to its new path.

A rename or a move reaches ingest as a file it has not seen and a stored document whose file
is gone (in one folder sync, or in an ingest of the place it was moved to). The access groups
belong to the document, not to its path, so a new document whose text is that of a tagged
document whose file is gone takes that document's groups: a finance file renamed inside a
watched folder stays finance's instead of coming back untagged, visible to everyone.

Matched by the text alone: a plain-text document's title is its file name, so the content
hash (which covers the title) changes with a rename. A file is gone when its path holds no
regular file any more (a link, a pipe or a folder in its place is not the file that was
indexed); an e-mail attachment's file is the mail file it came in. The gone tagged
documents are found once per run, at its first new document, by a stat of each stored path:
no file is read.

A file moved out of a watched folder is pruned at that folder's sync, before anything sees it
arrive elsewhere; so a pruned tagged document leaves its text's hash and groups behind, in
the corpus's `meta` (`departed_groups`, the newest `KEEP_DEPARTED`), and the text ingested
again later, anywhere, gets them back. Two replicas pruning at the same moment may each keep
only their own; the document is then as after a plain delete.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat

from crag_edge.attached import file_of
from crag_edge.store import CorpusBackend, StoredDocument

META_DEPARTED = "departed_groups"
KEEP_DEPARTED = 1000


def text_key(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def holds_a_file(path: str) -> bool:
    """Whether `path` is a regular file itself (never following a link)."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False


class Departed:
    """The tagged documents of `corpus` whose files are gone, by the hash of their text."""

    def __init__(self, corpus: CorpusBackend) -> None:
        self._corpus = corpus
        self._by_text: dict[str, list[frozenset[str]]] | None = None
        self._pruned: dict[str, list[str]] = {}

    def groups_of(self, text: str) -> list[frozenset[str]]:
        """The groups of each gone tagged document whose text is `text` (none: a new text)."""
        if self._by_text is None:
            self._by_text = self._find()
        return self._by_text.get(text_key(text), [])

    def remember(self, stored: StoredDocument) -> None:
        """Keep a pruned document's groups for its text (nothing for an untagged one)."""
        if stored.groups:
            key = text_key(self._corpus.document_text(stored.id))
            self._pruned[key] = sorted(stored.groups)

    def save(self) -> None:
        """Store what `remember` kept with the earlier ones, the newest `KEEP_DEPARTED`."""
        if not self._pruned:
            return
        kept = _pruned_before(self._corpus)
        for key in self._pruned:
            kept.pop(key, None)
        newest = list((kept | self._pruned).items())[-KEEP_DEPARTED:]
        self._corpus.set_meta({META_DEPARTED: json.dumps(dict(newest))})
        self._pruned = {}

    def _find(self) -> dict[str, list[frozenset[str]]]:
        found: dict[str, list[frozenset[str]]] = {
            key: [frozenset(groups)] for key, groups in _pruned_before(self._corpus).items()
        }
        for source in self._corpus.list_sources():
            if not os.path.isabs(source) or holds_a_file(file_of(source)):
                continue
            stored = self._corpus.document(source)
            if stored is not None and stored.groups:
                key = text_key(self._corpus.document_text(stored.id))
                found.setdefault(key, []).append(stored.groups)
        return found


def _pruned_before(corpus: CorpusBackend) -> dict[str, list[str]]:
    """The groups earlier runs kept of pruned documents, by text hash, oldest first."""
    try:
        kept = json.loads(corpus.meta().get(META_DEPARTED, "{}"))
    except ValueError:
        return {}
    return kept if isinstance(kept, dict) else {}
