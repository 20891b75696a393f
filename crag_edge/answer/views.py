"""Compact views of a `CragResult` for callers outside the process (MCP tools, the chat API).

The full `CragResult.to_dict()` is for audits and debugging; an assistant or a chat front end
needs the verdict, the evidence it may cite (numbered as the answer cites it), and — for a
follow-up — the standalone question that was searched.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from crag_edge.citations import location_fields
from crag_edge.result import ContextItem, CragResult

# What a decision means for whoever writes the answer; shown with every verdict.
MEANINGS = {
    "CORRECT": "the evidence was graded trustworthy: answer from the context and cite it as [n]",
    "AMBIGUOUS": (
        "the evidence is only partly relevant: answer only what the context supports, cite "
        "it as [n], and say what it does not cover"
    ),
    "INCORRECT": (
        "nothing trustworthy was found: do not answer from this; say that the documents do "
        "not cover the question"
    ),
}


def follow_up(result: CragResult) -> dict[str, Any] | None:
    """The follow-up rewrite ({"question", "standalone", "by"}), when the question was one."""
    for correction in result.corrections:
        detail = correction.detail
        if correction.type == "rewrite" and detail.get("for") == "follow-up":
            return {
                "question": detail["question"],
                "standalone": detail["query"],
                "by": detail["by"],
            }
    return None


def verdict(result: CragResult) -> dict[str, Any]:
    """The decision, what it means, why it was reached, and the question as searched."""
    view: dict[str, Any] = {
        "question": result.question,
        "decision": str(result.decision),
        "meaning": MEANINGS[str(result.decision)],
        "reason": result.reason,
        "insufficient_evidence": result.insufficient_evidence,
    }
    rewrite = follow_up(result)
    if rewrite is not None:
        view["follow_up"] = rewrite
    return view


def sources(context: Sequence[ContextItem], *, with_text: bool = False) -> list[dict[str, Any]]:
    """The numbered evidence: where each piece comes from, down to its page or section
    (and, `with_text`, what it says)."""
    return [
        {
            "n": item.n,
            "source": item.source,
            "title": item.title,
            "start": item.start,
            "end": item.end,
            **location_fields(item),
            **({"text": item.text} if with_text else {}),
        }
        for item in context
    ]


def graded_hits(result: CragResult) -> list[dict[str, Any]]:
    """Every hit the loop graded: where it is, its retrieval score, its grade and the tier
    that settled it, and whether it was kept."""
    return [
        {
            "rank": hit.rank,
            "source": hit.chunk.source,
            "title": hit.chunk.title,
            "start": hit.chunk.start,
            "end": hit.chunk.end,
            **location_fields(hit.chunk),
            "text": hit.chunk.text,
            "retrieval_score": round(hit.score, 6),
            "grade": round(grade.score, 4),
            "tier": grade.decided_by,
            "kept": grade.kept,
        }
        for hit, grade in result.hits
    ]


def describe_corrections(result: CragResult) -> str:
    """Corrective actions in words, in order, repeated ones (keep, discard) counted: the
    same line in the TUI's Decision panel and under `query` and `answer`."""
    parts: list[str] = []
    counts: dict[str, int] = {}
    for c in result.corrections:
        detail = c.detail
        if c.type in ("rewrite", "expand") and detail.get("query"):
            parts.append(f"{c.type} → {detail['query']!r}")
        elif c.type == "discard":
            counts["discard"] = counts.get("discard", 0) + len(detail.get("chunk_ids") or [0])
        elif c.type == "keep":
            counts["keep"] = counts.get("keep", 0) + 1
        elif c.type == "fallback":
            used = ", ".join(map(str, detail.get("providers") or [])) or "no provider"
            parts.append(f"fallback ({used}) → {detail.get('results', 0)} results")
        elif c.type == "stop":
            parts.append(f"stopped: {str(detail.get('why', '')).replace('_', ' ')}")
        elif c.type == "refine" and "strips_total" in detail:
            parts.append(f"refine (strips {detail['strips_kept']}/{detail['strips_total']})")
        else:
            parts.append(c.type)
    counted = [f"{name} x{n}" for name, n in counts.items()]
    return ", ".join(counted + parts)
