"""Search results for a person: each hit as a ranked passage with its place in its document
and a snippet around the words of the question, those words marked.

A search without the model shows where to read, so a passage carries its `locator` (file and
page or section, `citations.locator`) and the part of its text that holds the most of the
question's words. A word is marked where the lexical index would match it (the same Porter
stems as FTS5, `store.fts_terms`: "dances" marks "dance"), so the marks show why a passage was
found by its words; a passage found by meaning alone has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from crag_edge.citations import location_fields
from crag_edge.retrieval.lexical import query_terms
from crag_edge.store.fts_terms import term_spans, terms
from crag_edge.types import Hit

SNIPPET_CHARS = 240  # about three terminal lines: enough to judge a passage by
ELLIPSIS = "\u2026"


@dataclass(frozen=True)
class Snippet:
    """Part of a passage's text on one line, `marks` the (start, end) character spans of the
    question's words in it."""

    text: str
    marks: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class Passage:
    """One ranked search hit, with its snippet."""

    hit: Hit
    snippet: Snippet

    def to_dict(self) -> dict[str, Any]:
        """The passage as every structured face gives it (CLI --json, HTTP, MCP)."""
        hit, chunk = self.hit, self.hit.chunk
        return {
            "rank": hit.rank,
            "source": chunk.source,
            "title": chunk.title,
            "start": chunk.start,
            "end": chunk.end,
            **location_fields(chunk),
            "snippet": self.snippet.text,
            "marks": [list(mark) for mark in self.snippet.marks],
            "text": chunk.text,
            "score": round(hit.score, 6),
            "dense_score": None if hit.dense_score is None else round(hit.dense_score, 6),
            "bm25_score": None if hit.bm25_score is None else round(hit.bm25_score, 6),
        }


def passages(question: str, hits: list[Hit]) -> list[Passage]:
    """`hits` in their order, each with a snippet marking the words of `question`."""
    wanted = set(terms(" ".join(query_terms(question))))
    return [Passage(hit, snippet(hit.chunk.text, wanted)) for hit in hits]


def snippet(text: str, wanted: set[str], width: int = SNIPPET_CHARS) -> Snippet:
    """The `width` characters of `text` (whitespace made single spaces) holding the most
    distinct `wanted` terms, cut at words, with those terms marked; the start of the text
    when it holds none."""
    flat = " ".join(text.split())
    found = [(start, end, term) for start, end, term in term_spans(flat) if term in wanted]
    start = _best_window(found, width)
    start = _word_start(flat, start)
    end = _word_end(flat, start, start + width)
    marks = tuple((s - start, e - start) for s, e, _ in found if s >= start and e <= end)
    head = ELLIPSIS if start > 0 else ""
    tail = ELLIPSIS if end < len(flat) else ""
    shift = len(head)
    return Snippet(head + flat[start:end] + tail, tuple((s + shift, e + shift) for s, e in marks))


def _best_window(found: list[tuple[int, int, str]], width: int) -> int:
    """Where a window of `width` characters starting a little before one of the `found` terms
    covers the most distinct terms (the first such one); 0 when nothing was found."""
    best, best_count = 0, 0
    lead = width // 6  # a few words before the first mark, so it is read in its sentence
    for first, (start, _, _) in enumerate(found):
        covered = {term for s, e, term in found[first:] if e <= start - lead + width}
        if len(covered) > best_count:
            best, best_count = max(start - lead, 0), len(covered)
    return best


def _word_start(text: str, at: int) -> int:
    """`at`, moved forward past a word it cuts (kept where no space follows)."""
    if at <= 0 or text[at - 1] == " ":
        return max(at, 0)
    space = text.find(" ", at)
    return at if space < 0 else space + 1


def _word_end(text: str, start: int, at: int) -> int:
    """`at`, moved back before a word it cuts (kept where no space is after `start`)."""
    if at >= len(text) or text[at] == " ":
        return min(at, len(text))
    space = text.rfind(" ", start, at)
    return at if space <= start else space
