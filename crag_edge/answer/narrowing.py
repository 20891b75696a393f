"""The row, slide or page of a cited passage that states one sentence of an answer.

A small sheet or deck is one chunk, so the passage an answer cites spans its rows or slides
(`suppliers.xlsx rows 1-5 § suppliers`), while a sentence of the answer is mostly stated by
one of them. The support check tells which passage states a sentence; this tells where in
it, so the sentence is cited as a reader checks it (`suppliers.xlsx row 3 § suppliers`).

The place is chosen by the sentence's own words, numbers and names first: the one place
holding every number and name of the sentence that the passage holds wins; several such
places, or a sentence without any, are told apart by the most of its terms, by a clear
margin. Otherwise the passage's range stands: a sentence that sums up several rows, or whose
facts are spread over them, is cited by them all.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace

from crag_edge.answer.support import claim_text, facts, held_words
from crag_edge.citations import document_places, locate, locator, places_within
from crag_edge.grading.keywords import tokenize
from crag_edge.result import ContextItem
from crag_edge.types import Chunk, Place

# Terms a place must hold beyond every other's to win on terms alone: one shared word ("the
# lead time") is chance, two are the row's own.
MARGIN = 2


def passage_places(
    context: Sequence[ContextItem], chunks: Iterable[Chunk]
) -> dict[int, tuple[Place, ...]]:
    """Each passage's places (by its number), from the chunks of its document it was cut
    from, as the passage itself was located."""
    chunks = list(chunks)
    found = {}
    for item in context:
        same = (c for c in chunks if (c.doc_id, c.source) == (item.doc_id, item.source))
        found[item.n] = places_within(document_places(same), item.start, item.end)
    return found


def sentence_locator(sentence: str, item: ContextItem, places: Sequence[Place]) -> str:
    """The citation of `item` for `sentence`: narrowed to the one place of it that states the
    sentence, else the passage's own (`citations.locator`)."""
    spans = _place_spans(item, places)
    if len(spans) < 2 or len(item.text) != item.end - item.start:  # one place; joined strips
        return locator(item)
    texts = [item.text[start - item.start : end - item.start] for start, end in spans]
    chosen = _winner(claim_text(sentence), texts)
    if chosen is None:
        return locator(item)
    where = locate(places, *spans[chosen])
    return locator(replace(item, pages=where.pages, section=where.section))


def _place_spans(item: ContextItem, places: Sequence[Place]) -> list[tuple[int, int]]:
    """The passage's offsets cut where its page (row, slide) changes; none for a passage
    of no pages."""
    inside = [p for p in places_within(places, item.start, item.end) if p.page is not None]
    starts = [max(p.offset, item.start) for i, p in enumerate(inside)
              if i == 0 or p.page != inside[i - 1].page]  # fmt: skip
    if not starts:
        return []
    return list(zip(starts, [*starts[1:], item.end], strict=True))


def _winner(claim: str, texts: Sequence[str]) -> int | None:
    """The index of the text that clearly states `claim` (module docstring); None if none."""
    facts = [_facts(claim, text) for text in texts]
    every = frozenset().union(*facts)
    holders = [i for i, held in enumerate(facts) if held == every]
    if every and len(holders) == 1:
        return holders[0]
    terms = set(tokenize(claim))
    shared = sorted(((len(terms & set(tokenize(texts[i]))), i) for i in holders), reverse=True)
    if len(shared) < 2 or shared[0][0] < shared[1][0] + MARGIN:
        return None
    return shared[0][1]


def _facts(claim: str, text: str) -> frozenset[str]:
    """The facts of `claim` that `text` holds, as the support check locates a sentence."""
    return frozenset(facts(claim) & held_words(text))
