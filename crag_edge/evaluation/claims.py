"""SciFact claims for answer-level evaluation: `claims.csv` as SciFact distributes it.

Columns `id,claim,evidence_doc_id,evidence_label,evidence_sentences,cited_doc_ids`, one row
per (claim, evidence document). A claim whose row has no evidence document is NOT ENOUGH
INFO; otherwise every evidence row says SUPPORT or CONTRADICT, and a claim's rows agree.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path

from crag_edge.evaluation.beir import EvalDataError
from crag_edge.evaluation.verdict import Verdict

COLUMNS = ("id", "claim", "evidence_doc_id", "evidence_label")
_LABELS: dict[str, Verdict] = {"SUPPORT": "SUPPORTS", "CONTRADICT": "CONTRADICTS"}


@dataclass
class Claim:
    """One claim, its gold verdict and the documents holding its evidence (none for NEI)."""

    claim_id: str
    text: str
    label: Verdict = "NOT ENOUGH INFO"
    evidence: set[str] = field(default_factory=set)


def read_claims(path: Path) -> list[Claim]:
    """The claims in file order, their evidence rows merged; errors name the file and line."""
    claims: dict[str, Claim] = {}
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
            if missing:
                raise EvalDataError(f"{path}: missing column(s) {', '.join(missing)}")
            for row in reader:
                _add_row(claims, row, f"{path}:{reader.line_num}")
    except FileNotFoundError:
        raise EvalDataError(f"file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise EvalDataError(f"{path}: not UTF-8 ({exc})") from None
    if not claims:
        raise EvalDataError(f"{path}: no claims")
    return list(claims.values())


def _add_row(claims: dict[str, Claim], row: dict[str, str], where: str) -> None:
    claim_id, text = (row["id"] or "").strip(), (row["claim"] or "").strip()
    if not claim_id or not text:
        raise EvalDataError(f"{where}: a row needs an id and a claim")
    claim = claims.setdefault(claim_id, Claim(claim_id, text))
    doc_id = (row["evidence_doc_id"] or "").strip()
    label = (row["evidence_label"] or "").strip()
    if not doc_id:
        if label:
            raise EvalDataError(f"{where}: label {label} without an evidence_doc_id")
        return
    if label not in _LABELS:
        raise EvalDataError(f"{where}: evidence_label must be SUPPORT or CONTRADICT, not {label!r}")
    if claim.evidence and claim.label != _LABELS[label]:
        raise EvalDataError(f"{where}: claim {claim_id} is labelled both ways")
    claim.label = _LABELS[label]
    claim.evidence.add(doc_id)
