"""bm25's corpus statistics for one caller's view, shared by both backends.

bm25 weighs each query term by its rarity among the documents searched and each hit by its
length against the mean. Over the whole corpus, those statistics would let a caller with
groups measure documents it may not see: a word's score (and even the order of two visible
hits) would move with how many hidden chunks hold it. So a caller with groups is scored by
the statistics of its view alone: the chunks it may see, their mean length, and each term's
frequency among them, exactly the scores a corpus holding only its view would give
(`scripts/measure_view_bm25.py` measures what this costs the ranking: docs/service.md).

The size and mean length of a view take a scan of its chunks, so they are kept per view for
`TOTALS_TTL_S` seconds (bm25 barely moves with a few more chunks); term frequencies are read
for every query.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from crag_edge.groups import CorpusView, checked_view

TOTALS_TTL_S = 30.0
MAX_VIEWS = 256  # views whose totals are kept; beyond, the cache starts over
K1, B = 1.2, 0.75  # FTS5's bm25 parameters


@dataclass(frozen=True)
class Totals:
    """What bm25 needs of the chunks searched, and when it was read (monotonic seconds)."""

    chunks: float
    mean_length: float
    read_at: float

    def fresh(self) -> bool:
        return time.monotonic() - self.read_at < TOTALS_TTL_S


class TotalsCache:
    """The totals of each view (`CorpusView`), read again once stale."""

    def __init__(self) -> None:
        self._kept: dict[CorpusView, Totals] = {}

    def get(self, view: CorpusView, read: Callable[[], Totals]) -> Totals:
        totals = self._kept.get(checked_view(view))
        if totals is None or not totals.fresh():
            if len(self._kept) >= MAX_VIEWS:
                self._kept.clear()
            totals = self._kept[view] = read()
        return totals


def idf(chunks: float, holding: float) -> float:
    """FTS5's inverse document frequency, floored just above 0 as FTS5 does."""
    value = math.log((chunks - holding + 0.5) / (holding + 0.5))
    return value if value > 0 else 1e-6


def term_score(rarity: float, tf: float, length: float, mean_length: float) -> float:
    """One term's bm25 contribution to a chunk of `length` holding it `tf` times."""
    return rarity * tf * (K1 + 1) / (tf + K1 * (1 - B + B * length / mean_length))
