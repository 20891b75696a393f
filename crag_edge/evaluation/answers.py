"""Answer-level evaluation: claim verification end to end, the way the CRAG paper measures
itself (its PubHealth table), on SciFact claims.

Three systems answer every claim with the same LLM and the same verdict prompt
(`evaluation.verdict`): `closed_book` (the claim alone), `plain` (the top-k hits of a plain
search, whole chunks, ungraded) and `crag` (the corrective loop's final context; when the
loop finds no trustworthy evidence the verdict is NOT ENOUGH INFO without a model call,
which is what CRAG does at answer time).

Per system: accuracy and macro-F1 over the three labels, how often NOT ENOUGH INFO claims
are refused, the precision of the citations (cited passages from a gold evidence document)
and wall time per claim. Every answer is a `Record`; with a records file they are appended
as they are made, so a long run can be read while it goes and resumed after a stop.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from crag_edge.answer.generation import cited
from crag_edge.evaluation.claims import Claim
from crag_edge.evaluation.records import RecordLog, run_logged
from crag_edge.evaluation.retrieval import document_key
from crag_edge.evaluation.verdict import VERDICTS, Verdict, VerdictReply, ask_verdict
from crag_edge.models.chat_model import ChatModel
from crag_edge.result import ContextItem, CragResult
from crag_edge.types import Hit

SYSTEMS = ("closed_book", "plain", "crag")
ANSWER_TOKENS = 60
"""Enough for the verdict and one short sentence; the default LLM writes ~13 tokens/s here."""
NO_EVIDENCE = "No trustworthy evidence was found; the model was not asked."
NEI: Verdict = "NOT ENOUGH INFO"
NO_MODEL_CALL = "no_evidence"
"""The finish reason of a CRAG answer given without a model call."""


@dataclass(frozen=True)
class Answer:
    """What one system made of one claim: the reply, the passages it was shown, and the
    loop's decision (CRAG only)."""

    reply: VerdictReply
    passages: Sequence[ContextItem]
    decision: str | None = None


System = Callable[[Claim], Answer]


@dataclass(frozen=True)
class Record:
    """One claim answered by one system: the line a records file holds."""

    claim_id: str
    claim: str
    system: str
    model: str
    gold: str
    verdict: str | None
    answer: str
    passages: list[str]  # document id of each passage shown, in order
    cited: list[str]  # document id of each passage the answer cites
    evidence: list[str]  # the gold evidence documents
    seconds: float
    finish_reason: str
    decision: str | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.claim_id, self.system)

    @property
    def asked(self) -> str:
        return self.claim


def answer_systems(
    llm: ChatModel,
    search: Callable[[str], Sequence[Hit]],
    query: Callable[[str], CragResult],
    *,
    timeout_s: float | None = None,
) -> dict[str, System]:
    """The three systems over one LLM: the same call, different evidence."""

    def verdict(claim: Claim, passages: Sequence[ContextItem] | None) -> VerdictReply:
        return ask_verdict(llm, claim.text, passages, max_tokens=ANSWER_TOKENS, timeout_s=timeout_s)

    def closed_book(claim: Claim) -> Answer:
        return Answer(verdict(claim, None), [])

    def plain(claim: Claim) -> Answer:
        passages = context_of_hits(search(claim.text))
        return Answer(verdict(claim, passages), passages)

    def crag(claim: Claim) -> Answer:
        result = query(claim.text)
        decision = str(result.decision)
        if result.insufficient_evidence or not result.context:
            return Answer(VerdictReply(NEI, NO_EVIDENCE, NO_MODEL_CALL), [], decision)
        return Answer(verdict(claim, result.context), result.context, decision)

    return {"closed_book": closed_book, "plain": plain, "crag": crag}


def context_of_hits(hits: Sequence[Hit]) -> list[ContextItem]:
    """Plain RAG's context: every hit's whole chunk, numbered by rank."""
    return [
        ContextItem.from_chunk(hit.chunk, n=n, origin=hit.origin, score=hit.score)
        for n, hit in enumerate(hits, start=1)
    ]


def run_answers(
    claims: Sequence[Claim],
    systems: dict[str, System],
    log: RecordLog[Record],
    *,
    on_claim: Callable[[], None] | None = None,
) -> list[Record]:
    """Every claim through every system (`records.run_logged`): answers already in `log`
    are reused."""
    return run_logged(
        claims,
        list(systems),
        log,
        lambda claim: (claim.claim_id, claim.text),
        lambda claim, name: _answer(claim, name, systems[name], log.model),
        on_claim,
    )


def _answer(claim: Claim, name: str, system: System, model: str) -> Record:
    started = time.perf_counter()
    answer = system(claim)
    seconds = time.perf_counter() - started
    return Record(
        claim_id=claim.claim_id,
        claim=claim.text,
        system=name,
        model=model,
        gold=claim.label,
        verdict=answer.reply.verdict,
        answer=answer.reply.answer,
        passages=[document_key(item.source) for item in answer.passages],
        cited=[document_key(item.source) for item in cited(answer.reply.answer, answer.passages)],
        evidence=sorted(claim.evidence),
        seconds=round(seconds, 3),
        finish_reason=answer.reply.finish_reason,
        decision=answer.decision,
    )


# -- metrics ---------------------------------------------------------------------------------


def accuracy(records: Sequence[Record]) -> float | None:
    """Share of claims given their gold verdict (a reply without a verdict is wrong)."""
    if not records:
        return None
    return sum(r.verdict == r.gold for r in records) / len(records)


def macro_f1(records: Sequence[Record]) -> float | None:
    """Mean F1 over the labels that occur as gold or as a verdict (scikit-learn's macro
    average): a label absent from both, as in a small sample, neither helps nor hurts."""
    labels = [v for v in VERDICTS if any(v in (r.gold, r.verdict) for r in records)]
    if not labels:
        return None
    scores = []
    for label in labels:
        true_positive = sum(r.gold == label and r.verdict == label for r in records)
        predicted = sum(r.verdict == label for r in records)
        gold = sum(r.gold == label for r in records)
        scores.append(2 * true_positive / (predicted + gold))  # F1 = 2TP / (2TP + FP + FN)
    return sum(scores) / len(scores)


def nei_refused(records: Sequence[Record]) -> float | None:
    """Share of NOT ENOUGH INFO claims answered NOT ENOUGH INFO (None without such claims)."""
    unanswerable = [r for r in records if r.gold == NEI]
    if not unanswerable:
        return None
    return sum(r.verdict == NEI for r in unanswerable) / len(unanswerable)


def citation_precision(records: Sequence[Record]) -> float | None:
    """Share of cited passages, over claims with evidence, that come from a gold evidence
    document of their claim (None when nothing was cited: closed book cites nothing)."""
    citations = [(doc, r.evidence) for r in records if r.gold != NEI for doc in r.cited]
    if not citations:
        return None
    return sum(doc in evidence for doc, evidence in citations) / len(citations)


def summarise(records: Sequence[Record], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One entry per system: the metrics above, the counts behind them and seconds per claim;
    `timeouts` counts model calls cut off by llm_timeout_s (their verdict may be missing)."""
    report: dict[str, dict[str, Any]] = {}
    for name in systems:
        mine = [r for r in records if r.system == name]
        report[name] = {
            "questions": len(mine),
            "accuracy": _rounded(accuracy(mine)),
            "macro_f1": _rounded(macro_f1(mine)),
            "nei_refused": _rounded(nei_refused(mine)),
            "citation_precision": _rounded(citation_precision(mine)),
            "seconds_per_question": _rounded(
                sum(r.seconds for r in mine) / len(mine) if mine else None, 2
            ),
            "gold": _counts(r.gold for r in mine),
            "predicted": _counts(r.verdict or "none" for r in mine),
            "citations": sum(len(r.cited) for r in mine if r.gold != NEI),
            "answered_without_model": sum(r.finish_reason == NO_MODEL_CALL for r in mine),
            "timeouts": sum(r.finish_reason == "timeout" for r in mine),
        }
    return report


def _counts(labels: Iterable[str]) -> dict[str, int]:
    counts = Counter(labels)
    return {label: counts[label] for label in (*VERDICTS, "none") if counts[label]}


def _rounded(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)
