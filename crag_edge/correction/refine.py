"""Knowledge refinement (CRAG's decompose → filter → recompose).

Kept evidence is split into strips (`sentences.sentence_strips`: whole sentences that stand
alone, a short list item or definition-list entry whole, or fixed windows of words as in the
CRAG paper's `fixed_num` mode), strips that
overlapping chunks share are scored once, each strip is scored against the question, strips
below the threshold are dropped, and the rest are recomposed in document order within a token
budget, neighbouring strips of one document joined into one context piece.
Offsets stay absolute (into the document's text), so citations point into the original
documents.

The default scorer is the cheapest one that separates strips: keyword coverage, each of the
question's words weighted by how few of the strips hold it (`keywords.rarity_coverage`). On
SciFact's rationale sentences it separates them about as well as embedding cosine blended with
coverage, at a small fraction of its cost, and on reference manuals it keeps the sentence
that answers where the page's own name fills every strip: measured in docs/correction.md.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from crag_edge.grading.keywords import coverage, rarity_coverage
from crag_edge.sentences import sentence_strips, whole_definitions
from crag_edge.types import Chunk, Embedder, PairScorer, Span

StripMode = Literal["sentences", "fixed_num", "selection"]
StripScorer = Literal["coverage", "embedding", "cross_encoder"]
_WORD = re.compile(r"\S+")


def decompose(chunk: Chunk, mode: StripMode, words_per_strip: int = 50) -> list[Span]:
    """Split a chunk into strips with absolute offsets; whitespace-only pieces are skipped."""
    spans: list[tuple[int, int]]
    if mode == "selection":
        spans = [(0, len(chunk.text))]
    elif mode == "sentences":
        spans = whole_definitions(
            chunk.text, sentence_strips(chunk.text, mid_document=chunk.ordinal > 0)
        )
    else:
        words = [(m.start(), m.end()) for m in _WORD.finditer(chunk.text)]
        spans = [
            (words[i][0], words[min(i + words_per_strip, len(words)) - 1][1])
            for i in range(0, len(words), words_per_strip)
        ]
    strips = []
    for begin, end in spans:
        piece = chunk.text[begin:end]
        stripped = piece.strip()
        if not stripped:
            continue
        begin += len(piece) - len(piece.lstrip())
        strips.append(Span.strip_of(chunk, begin, stripped))
    return strips


def score_strips(
    question: str,
    strips: Sequence[Span],
    scorer: StripScorer,
    embedder: Embedder,
    cross_encoder: PairScorer | None = None,
) -> list[float]:
    """Relevance of each strip: keyword coverage weighted by rarity among `strips`
    (`coverage`), plain coverage's mean with embedding cosine clipped at 0 (`embedding`), or
    the cross-encoder's probability (`cross_encoder`; the first when none is installed)."""
    if not strips:
        return []
    texts = [s.text for s in strips]
    if scorer == "cross_encoder" and cross_encoder is not None:
        return [float(x) for x in cross_encoder.score(question, texts).scores]
    if scorer != "embedding":
        return [float(x) for x in rarity_coverage(question, texts)]
    covered = coverage(question, texts)
    vectors = embedder.embed([question, *texts])
    cosine = np.clip(vectors[1:] @ vectors[0], 0.0, 1.0).astype(np.float64)
    return [float(x) for x in (cosine + covered) / 2.0]


def distinct_strips(strips: Sequence[Span]) -> list[Span]:
    """`strips` in document order (source, then offset) without those another strip of the
    same document already holds: overlapping chunks share sentences, which would otherwise be
    scored, kept and read twice. A chunk cut inside a sentence yields a fragment that the
    neighbour's whole sentence holds."""
    by_document: dict[tuple[str, int], list[Span]] = {}
    distinct = []
    for strip in sorted(strips, key=lambda s: (s.source, s.doc_id, s.start, -s.end)):
        same_document = by_document.setdefault((strip.source, strip.doc_id), [])
        if not any(_holds(kept, strip) for kept in same_document):
            same_document.append(strip)
            distinct.append(strip)
    return distinct


def recompose(
    strips: Sequence[Span],
    threshold: float,
    budget_tokens: int,
    count_tokens: Callable[[str], int],
    first: Span | None = None,
) -> list[Span]:
    """Strips at or above `threshold`, best first until the budget is spent, then put back in
    document order (source, then offset) so the context reads as the documents do. `first`,
    when given, goes in before any other whatever its score.

    A strip from a document not yet chosen also pays for the document's title, which the
    answer prompt names once per document (`generation.passages_text`): the model reads
    every one of those tokens before its first word."""
    budget = ContextBudget(count_tokens)
    chosen: list[Span] = []
    if first is not None:
        chosen.append(first)
        budget.spend(first)
    for strip in sorted(strips, key=lambda s: -s.score):
        if strip.score < threshold:
            break
        if strip == first or budget.spent + budget.cost(strip) > budget_tokens:
            continue
        chosen.append(strip)
        budget.spend(strip)
    return distinct_strips(chosen)


def embedder_tokens(embedder: Embedder) -> Callable[[str], int]:
    """A text's length in the embedder's tokens: the unit of `context_budget_tokens`."""

    def count(text: str) -> int:
        return len(embedder.tokenizer.encode(text, add_special_tokens=False).ids)

    return count


class ContextBudget:
    """Tokens the answer's context spends: each passage's text, and its document's title the
    first time the document appears (the answer prompt names it once per document)."""

    def __init__(self, count_tokens: Callable[[str], int]) -> None:
        self.count_tokens = count_tokens
        self.spent = 0
        self.documents: set[tuple[str, int]] = set()

    def cost(self, passage: Span | Chunk) -> int:
        named = (passage.source, passage.doc_id) in self.documents
        title = 0 if named else self.count_tokens(passage.title or passage.source)
        return self.count_tokens(passage.text) + title

    def spend(self, passage: Span | Chunk) -> None:
        self.spent += self.cost(passage)
        self.documents.add((passage.source, passage.doc_id))


def best_strip_of(chunk: Chunk, strips: Sequence[Span]) -> Span | None:
    """The best-scored strip lying inside `chunk` (a sentence it shares with an overlapping
    neighbour may carry the neighbour's id), or None."""
    inside = [
        s
        for s in strips
        if _same_document(chunk, s) and chunk.start <= s.start <= s.end <= chunk.end
    ]
    return max(inside, key=lambda s: s.score, default=None)


def join_neighbours(strips: Sequence[Span], chunks: Sequence[Chunk]) -> list[Span]:
    """Strips in document order as context pieces: strips of one document that overlap, or
    that only whitespace of one of `chunks` separates, become one piece whose text is the
    document's text over their range (so its offsets still cite it exactly) and whose score
    is their best. The model then reads passages instead of a list of sentences, and each
    citation number covers one passage."""
    pieces: list[Span] = []
    for strip in strips:
        joined = _join(pieces[-1], strip, chunks) if pieces else None
        if joined is None:
            pieces.append(strip)
        else:
            pieces[-1] = joined
    return pieces


def _same_document(a: Span | Chunk, b: Span) -> bool:
    return a.doc_id == b.doc_id and a.source == b.source


def _holds(outer: Span, inner: Span) -> bool:
    """Whether `outer` contains `inner`'s range of the same document, with the same text
    (fallback results of one URL share a document id but not a text)."""
    if not _same_document(outer, inner) or not outer.start <= inner.start <= inner.end <= outer.end:
        return False
    return outer.text[inner.start - outer.start : inner.end - outer.start] == inner.text


def _join(a: Span, b: Span, chunks: Sequence[Chunk]) -> Span | None:
    """`a` and `b` (b not before a) as one strip, or None when they are not neighbours."""
    if not _same_document(a, b):
        return None
    if b.start <= a.end:  # overlapping: the texts must agree on the shared part
        shared = b.text[: a.end - b.start]
        if a.text[b.start - a.start : b.start - a.start + len(shared)] != shared:
            return None
        text = a.text + b.text[len(shared) :]
    else:
        gap = _gap_text(a, b, chunks)
        if gap is None or gap.strip():
            return None
        text = a.text + gap + b.text
    end = a.start + len(text)
    return replace(a, end=end, text=text, score=max(a.score, b.score))


def _gap_text(a: Span, b: Span, chunks: Sequence[Chunk]) -> str | None:
    """The document's text between `a` and `b`, read from a chunk that spans it."""
    for chunk in chunks:
        if _same_document(chunk, b) and chunk.start <= a.end and b.start <= chunk.end:
            return chunk.text[a.end - chunk.start : b.start - chunk.start]
    return None


@dataclass(frozen=True)
class Refinement:
    """The context pieces in document order (one kept strip, or neighbouring kept strips
    joined), the strips kept, every distinct strip scored, and how many strips passed the
    threshold but were left out because the token budget was spent."""

    pieces: list[Span]
    kept: list[Span]
    scored: list[Span]
    over_budget: int = 0


def refine(
    question: str,
    chunks: Sequence[Chunk],
    embedder: Embedder,
    *,
    mode: StripMode = "sentences",
    scorer: StripScorer = "coverage",
    threshold: float = 0.05,
    budget_tokens: int = 4096,
    cross_encoder: PairScorer | None = None,
    anchor: Chunk | None = None,
) -> Refinement:
    """Decompose the kept evidence chunks, score the strips, recompose what passes.

    `anchor` is the chunk grading trusted most: when no kept strip comes from its document,
    its best strip is kept whatever the strip scorer says. Keyword coverage ranks strips
    worse than the cascade ranks chunks, and on the SciFact split it refined the best-graded
    gold chunk away where the claim and the abstract name things differently; forcing the
    strip in when its document is already there only displaced better strips
    (docs/correction.md)."""
    strips = distinct_strips([strip for chunk in chunks for strip in decompose(chunk, mode)])
    scores = score_strips(question, strips, scorer, embedder, cross_encoder)
    scored = [replace(s, score=score) for s, score in zip(strips, scores, strict=True)]

    count = embedder_tokens(embedder)
    kept = recompose(scored, threshold, budget_tokens, count)
    if anchor is not None and not any(_same_document(anchor, strip) for strip in kept):
        kept = recompose(scored, threshold, budget_tokens, count, best_strip_of(anchor, scored))
    left_out = sum(1 for strip in scored if strip.score >= threshold and strip not in kept)
    return Refinement(join_neighbours(kept, chunks), kept, scored, left_out)
