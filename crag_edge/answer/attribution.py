"""Which passages an uncited answer was drawn from, so no answer reaches a reader untraceable.

Small models forget the "[n]" markers the answer prompt asks for: Qwen2.5-1.5B answered
`make demo`'s question correctly from three refined strips without a single one. When an
answer that ended on its own cites nothing, the passages its sentences come from are named
after it, in one visible phrase ("(drawn from [2], [3])"), so every interface lists them as
sources and a reader can tell they were matched afterwards, not cited by the model.

A sentence is drawn from the passage that holds the largest share of its content terms
(stemmed, stopwords dropped, as keyword coverage counts them), when that share is at least
`MIN_SHARE`; sentences of fewer than `MIN_TERMS` terms ("Yes.") are not matched. An answer
none of whose sentences is drawn from a passage stays uncited, and the interfaces say so.
"""

from __future__ import annotations

from collections.abc import Sequence

from crag_edge.grading.keywords import tokenize
from crag_edge.result import ContextItem
from crag_edge.sentences import sentence_spans

# Half of a sentence's content terms: a paraphrase of one passage keeps well over half of
# them, a sentence the model added from its own knowledge rarely reaches it.
MIN_SHARE = 0.5
MIN_TERMS = 3


def drawn_from(answer: str, context: Sequence[ContextItem]) -> list[ContextItem]:
    """The context items the answer's sentences were drawn from, in order of first use."""
    if not context:
        return []
    passages = [(item, set(tokenize(item.text))) for item in context]
    found: dict[int, ContextItem] = {}
    for start, end in sentence_spans(answer):
        terms = set(tokenize(answer[start:end]))
        if len(terms) < MIN_TERMS:
            continue
        share, item = max(
            ((len(terms & passage) / len(terms), item) for item, passage in passages),
            key=lambda pair: pair[0],
        )
        if share >= MIN_SHARE:
            found.setdefault(item.n, item)
    return list(found.values())


def drawn_from_note(items: Sequence[ContextItem]) -> str:
    """The phrase appended to an uncited answer; empty when nothing was drawn from."""
    if not items:
        return ""
    return " (drawn from " + ", ".join(f"[{item.n}]" for item in items) + ")"
