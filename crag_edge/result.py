"""`CragResult`: everything one pass of the CRAG loop decided and why, JSON-serialisable.

Shape (stable; `to_dict` is what `query --json`, the HTTP service and checks read):
- `decision` / `action` / `score`: the final CORRECT | AMBIGUOUS | INCORRECT, what followed, and
  the aggregate score that decided it; `reason` in words.
- `insufficient_evidence`: true when nothing trustworthy was found (the context is empty).
- `context`: the final evidence, numbered for citations, with document offsets, `pages`
  (first, last) and `section` (heading path) where the document has them, and `locator`.
- `hits`: every graded hit of every round, with its grade per tier and signal.
- `corrections`: typed actions (keep, discard, refine, cap — relevant evidence left out of the
  answer's context by `context_budget_tokens` —, expand, rewrite, fallback, the `stop`
  that ended the loop, with why, and `reread` when an answer was written again from the
  search's top hits read whole, whose passages then follow the first ones in `context`).
- `rounds`: one entry per iteration: the query used, its decision and score.
- `fallback`: providers used, why, and their failures.
- `stop_reason`: why the loop ended: `correct`, `max_iterations`, `no_untried_query`,
  `no_new_evidence` (those answer from what is kept) or `insufficient_evidence`.
- `iterations`, `max_iterations_reached`, `timings_ms` per stage, `tiers`,
  `cache_hits` (model scores per tier served by the evaluation cache), `audit`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from crag_edge.citations import location_fields
from crag_edge.grading import ItemGrade
from crag_edge.types import Action, Decision, Hit, Span

CorrectionType = Literal[
    "keep", "discard", "refine", "cap", "expand", "rewrite", "fallback", "stop", "reread"
]


@dataclass(frozen=True)
class Correction:
    """One corrective action the loop took, with its details."""

    type: CorrectionType
    detail: dict[str, Any] = field(default_factory=dict)


# A numbered piece of final evidence: the span refinement cut (or a whole chunk), numbered,
# scored and located for citation; one type from strip to citation (`types.Span`).
ContextItem = Span


@dataclass(frozen=True)
class Round:
    """One iteration of the loop."""

    iteration: int
    query: str
    strategy: str
    decision: Decision
    score: float
    hits: int
    kept: int


@dataclass
class CragResult:
    question: str
    decision: Decision
    action: Action
    score: float
    reason: str
    context: list[ContextItem]
    hits: list[tuple[Hit, ItemGrade]]
    reread: list[ContextItem] = field(default_factory=list)
    corrections: list[Correction] = field(default_factory=list)
    rounds: list[Round] = field(default_factory=list)
    fallback: dict[str, Any] = field(default_factory=dict)
    iterations: int = 1
    max_iterations_reached: bool = False
    insufficient_evidence: bool = False
    stop_reason: str = "correct"
    rule: str | None = None
    tiers: dict[str, str] = field(default_factory=dict)
    timings_ms: dict[str, float] = field(default_factory=dict)
    cache_hits: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    audit: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = {k: v for k, v in asdict(self).items() if k not in ("hits", "reread")}
        data["decision"], data["action"] = str(self.decision), str(self.action)
        data["context"] = [asdict(item) | location_fields(item) for item in self.context]
        data["rounds"] = [asdict(r) | {"decision": str(r.decision)} for r in self.rounds]
        data["hits"] = [hit_to_dict(hit, grade) for hit, grade in self.hits]
        return data

    def read_again(self) -> CragResult:
        """The result an answer is written from again (`reread`: evidence read whole when
        nothing of the answer from `context` was stated). This result's context gains those
        passages, so the sources a reader is shown hold every passage the answer may cite, and
        a `reread` correction says so."""
        again = self.reread
        self.context.extend(again)
        self.corrections.append(Correction("reread", {"passages": [item.n for item in again]}))
        self.reread = []
        return replace(self, context=list(again))


def hit_to_dict(hit: Hit, grade: ItemGrade | None) -> dict[str, Any]:
    c = hit.chunk
    return {
        "rank": hit.rank,
        "score": hit.score,
        "dense_score": hit.dense_score,
        "dense_rank": hit.dense_rank,
        "bm25_score": hit.bm25_score,
        "bm25_rank": hit.bm25_rank,
        "origin": hit.origin,
        "chunk_id": c.chunk_id,
        "doc_id": c.doc_id,
        "source": c.source,
        "title": c.title,
        "start": c.start,
        "end": c.end,
        "text": c.text,
        **location_fields(c),
        "grade": None if grade is None else asdict(grade),
    }
