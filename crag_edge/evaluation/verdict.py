"""Claim verification by the local LLM: one verdict per claim, constrained by a grammar.

The reply is a JSON object whose first field is the verdict (`SUPPORTS`, `CONTRADICTS` or
`NOT ENOUGH INFO`) and whose second is one short sentence citing passages as [n]. The
grammar makes the verdict always one of the three labels, and putting it first means a reply
cut short by the token limit still carries it. With passages, a SUPPORTS or CONTRADICTS
answer must open with the numbers of the passages it rests on ("[2] ..."), and only numbers
that were shown: the model picks its evidence before it writes. The same template serves
every system that shows passages, so only the evidence differs between them; the
closed-book prompt is the same task without passages.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, cast

from crag_edge.models.chat_model import ChatModel, Message
from crag_edge.result import ContextItem

Verdict = Literal["SUPPORTS", "CONTRADICTS", "NOT ENOUGH INFO"]
VERDICTS: tuple[Verdict, ...] = ("SUPPORTS", "CONTRADICTS", "NOT ENOUGH INFO")

CLOSED_BOOK_GRAMMAR = r"""root ::= "{\"verdict\": \"" verdict "\", \"answer\": \"" free "\"}"
verdict ::= "SUPPORTS" | "CONTRADICTS" | "NOT ENOUGH INFO"
free ::= [^"\\\n]*
"""
_EVIDENCE_GRAMMAR = r"""root ::= "{\"verdict\": \"" (definite | unknown) "\"}"
definite ::= ("SUPPORTS" | "CONTRADICTS") "\", \"answer\": \"" cite+ " " rest
unknown ::= "NOT ENOUGH INFO\", \"answer\": \"" rest
rest ::= ([^"\\\n\[\]] | cite)*
cite ::= "[" ({numbers}) "]"
"""
EVIDENCE_SYSTEM = (
    "You check scientific claims against numbered passages from research abstracts. "
    "Give the verdict SUPPORTS if the passages report evidence that the claim is true, "
    "CONTRADICTS if they report evidence that the claim is false, and NOT ENOUGH INFO if "
    "they do not test the claim. Judge from the passages only. Then write one short sentence "
    "that gives the reason and cites the passages it comes from, like [1]."
)
CLOSED_BOOK_SYSTEM = (
    "You check scientific claims from what you know. Give the verdict SUPPORTS if the "
    "claim is true, CONTRADICTS if it is false, and NOT ENOUGH INFO if you do not know. "
    "Then write one short sentence that gives the reason."
)
REPLY_FORMAT = (
    'Reply with a JSON object: {"verdict": "SUPPORTS" or "CONTRADICTS" or '
    '"NOT ENOUGH INFO", "answer": "<one short sentence>"}.'
)
_VERDICT_FIELD = re.compile(r'^\s*\{\s*"verdict"\s*:\s*"(SUPPORTS|CONTRADICTS|NOT ENOUGH INFO)"')
_ANSWER_FIELD = re.compile(r'"answer"\s*:\s*"([^"]*)')


@dataclass(frozen=True)
class VerdictReply:
    """The model's verdict (None when the reply holds none, e.g. it timed out before it),
    its one-sentence answer, and why generation ended (`stop`, `length`, `timeout`)."""

    verdict: Verdict | None
    answer: str
    finish_reason: str


def verdict_messages(claim: str, passages: Sequence[ContextItem] | None) -> list[Message]:
    """The chat prompt: with passages the evidence template (numbered by their `n`, which
    their citations resolve to), without (None) the closed-book one."""
    if passages is None:
        user = f"Claim: {claim}\n\n{REPLY_FORMAT}"
        return [
            {"role": "system", "content": CLOSED_BOOK_SYSTEM},
            {"role": "user", "content": user},
        ]
    numbered = "\n\n".join(
        f"[{item.n}] ({item.title or item.source}) {' '.join(item.text.split())}"
        for item in passages
    )
    user = f"Passages:\n\n{numbered}\n\nClaim: {claim}\n\n{REPLY_FORMAT}"
    return [{"role": "system", "content": EVIDENCE_SYSTEM}, {"role": "user", "content": user}]


def fit_passages(
    llm: ChatModel, claim: str, passages: Sequence[ContextItem], max_tokens: int
) -> list[ContextItem]:
    """The passages, each cut to an equal share of the context window left after the
    template, the claim and the reply: a long context is shortened, never refused."""
    if not passages:
        return []
    empty = [dataclasses.replace(item, text="") for item in passages]
    overhead = llm.count_chat_tokens(verdict_messages(claim, empty))
    share = (llm.n_ctx - 1 - max_tokens - overhead) // len(passages)
    if share < 1:
        raise ValueError(
            f"{len(passages)} passages leave no room in the {llm.n_ctx}-token context of "
            f"{llm.model_id}; raise CRAG_EDGE_LLM_CONTEXT or lower CRAG_EDGE_TOP_K"
        )
    return [dataclasses.replace(item, text=llm.truncate(item.text, share)) for item in passages]


def verdict_grammar(numbers: Sequence[int]) -> str:
    """GBNF for a reply about passages numbered `numbers` (none: the closed-book grammar).

    A SUPPORTS or CONTRADICTS answer opens with citations of shown passages: a verdict
    that cites nothing cannot be traced to its evidence (metrics count only citations of
    shown passages, `generation.cited`).
    Citations come first because a model left to add them at the end may never do so
    (Qwen2.5-1.5B, plain RAG on SciFact claims: neither of two such answers cited).
    """
    if not numbers:
        return CLOSED_BOOK_GRAMMAR
    alternatives = " | ".join(f'"{n}"' for n in sorted(set(numbers), reverse=True))
    return _EVIDENCE_GRAMMAR.replace("{numbers}", alternatives)


def ask_verdict(
    llm: ChatModel,
    claim: str,
    passages: Sequence[ContextItem] | None,
    *,
    max_tokens: int,
    timeout_s: float | None = None,
) -> VerdictReply:
    """One constrained call: the verdict on `claim` from `passages` (None: closed book)."""
    shown = None if passages is None else fit_passages(llm, claim, passages, max_tokens)
    completion = llm.chat(
        verdict_messages(claim, shown),
        max_tokens=max_tokens,
        grammar=verdict_grammar([item.n for item in shown or []]),
        timeout_s=timeout_s,
    )
    verdict, answer = parse_verdict(completion.text)
    return VerdictReply(verdict, answer, completion.finish_reason)


def parse_verdict(text: str) -> tuple[Verdict | None, str]:
    """The verdict and answer of a reply to `verdict_grammar`, also when it was cut short
    (the answer is then what was written of it; the grammar allows no quote inside it)."""
    verdict_match = _VERDICT_FIELD.match(text)
    answer_match = _ANSWER_FIELD.search(text)
    verdict = cast(Verdict, verdict_match.group(1)) if verdict_match else None
    return verdict, answer_match.group(1) if answer_match else ""
