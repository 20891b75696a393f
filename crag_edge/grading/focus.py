"""What the LLM judge reads of a long passage: its strips that share most of the question's
words, in their order, within a token budget.

The judge is the slowest tier (its time is prompt evaluation) and, on chunk-length passages,
a weaker ranker than on sentences. Reading a chunk's best strips (`sentences.sentence_strips`,
ranked by keyword coverage) within a budget smaller than the chunk ranks as well as reading
the whole chunk, in less time per item: measured in docs/grading.md ("The judge reads a long
passage's best strips").
"""

from __future__ import annotations

from collections.abc import Callable

from crag_edge.grading.keywords import coverage
from crag_edge.sentences import sentence_strips

STRIP_JOINER = " … "


def focused_passage(
    query: str, passage: str, budget_tokens: int, count_tokens: Callable[[str], int]
) -> str:
    """`passage` itself when it fits `budget_tokens`; else its strips best covering the query
    (ties: the earlier first) while they fit, at least one, in the passage's order, joined by
    an ellipsis so the model sees that text was left out."""
    if count_tokens(passage) <= budget_tokens:
        return passage
    strips = [passage[start:end] for start, end in sentence_strips(passage, mid_document=False)]
    if len(strips) < 2:
        return passage
    scores = coverage(query, strips)
    chosen: list[int] = []
    spent = 0
    for i in sorted(range(len(strips)), key=lambda i: (-scores[i], i)):
        cost = count_tokens(strips[i])
        if chosen and spent + cost > budget_tokens:
            continue
        chosen.append(i)
        spent += cost
    return STRIP_JOINER.join(strips[i] for i in sorted(chosen))
