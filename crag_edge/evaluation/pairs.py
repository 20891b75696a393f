"""Labelled (query, passage, label) pairs: the JSON Lines format `eval grading` reads, and
converters from the public datasets in `../shared/data` (WikiQA, Climate-FEVER, SciFact)."""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from crag_edge.evaluation.beir import EvalDataError
from crag_edge.types import Hit

SOURCES = ("wikiqa", "climate-fever", "scifact")


@dataclass(frozen=True)
class Pair:
    """A human judgement: is `passage` relevant evidence for `query` (1) or not (0)?"""

    query: str
    passage: str
    label: int


def read_pairs(path: Path) -> list[Pair]:
    """Lines of {"query": ..., "passage": ..., "label": 0|1}; errors name the line."""
    try:
        lines = path.read_text(encoding="utf-8-sig").splitlines()
    except FileNotFoundError:
        raise EvalDataError(f"file not found: {path}") from None
    pairs = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            label = int(record["label"])
            if label not in (0, 1):
                raise ValueError(f"label must be 0 or 1, got {label}")
            pairs.append(Pair(str(record["query"]), str(record["passage"]), label))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise EvalDataError(
                f'{path}:{number}: expected {{"query", "passage", "label": 0|1}}: {exc}'
            ) from None
    if not pairs:
        raise EvalDataError(f"{path}: no pairs")
    return pairs


def write_pairs(pairs: list[Pair], path: Path) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for p in pairs:
            record = {"query": p.query, "passage": p.passage, "label": p.label}
            handle.write(json.dumps(record, ensure_ascii=False) + "\n")


def pairs_from(source: str, path: Path) -> list[Pair]:
    """Convert a dataset file (or, for SciFact, its folder) into pairs."""
    readers = {"wikiqa": _wikiqa, "climate-fever": _climate_fever, "scifact": _scifact}
    if source not in readers:
        raise EvalDataError(f"unknown pair source {source!r}; use one of {', '.join(SOURCES)}")
    if not path.exists():
        raise EvalDataError(f"not found: {path}")
    try:
        return list(readers[source](path))
    except (KeyError, ValueError) as exc:  # a missing column or key, a line that is not JSON
        raise EvalDataError(f"{path}: not a {source} file as expected ({exc!r})") from None


def pairs_from_retrieval(
    search: Callable[[str], list[Hit]],
    queries: dict[str, str],
    qrels: dict[str, dict[str, int]],
) -> list[Pair]:
    """Every retrieved chunk of every judged query, labelled by the qrels of its document:
    the very distribution the grader sees at query time (hard negatives included), which is
    what a calibration should be fitted on."""
    from crag_edge.evaluation.retrieval import document_key

    pairs = []
    for qid, text in queries.items():
        if qid not in qrels:
            continue
        for hit in search(text):
            relevant = qrels[qid].get(document_key(hit.chunk.source), 0) > 0
            pairs.append(Pair(text, hit.chunk.text, int(relevant)))
    return pairs


def _wikiqa(path: Path) -> Iterator[Pair]:
    """WikiQA tsv: every (question, candidate sentence) with its 0/1 label."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle, delimiter="\t", quoting=csv.QUOTE_NONE):
            yield Pair(row["Question"], row["Sentence"], int(row["Label"]))


def _climate_fever(path: Path) -> Iterator[Pair]:
    """Climate-FEVER: a sentence that SUPPORTS or REFUTES the claim is relevant evidence;
    NOT_ENOUGH_INFO is not."""
    with path.open(encoding="utf-8-sig") as handle:
        for line in handle:
            if not line.strip():
                continue
            claim = json.loads(line)
            for evidence in claim["evidences"]:
                label = int(evidence["evidence_label"] in ("SUPPORTS", "REFUTES"))
                yield Pair(claim["claim"], evidence["evidence"], label)


def _scifact(folder: Path) -> Iterator[Pair]:
    """SciFact claims vs the abstracts they cite: relevant when the abstract holds evidence
    for the claim (cited-with-evidence vs cited-without)."""
    corpus: dict[str, str] = {}
    with (folder / "corpus.jsonl").open(encoding="utf-8-sig") as handle:
        for line in handle:
            doc = json.loads(line)
            corpus[str(doc["_id"])] = f"{doc.get('title', '')}\n{doc['text']}".strip()
    claims: dict[str, tuple[str, set[str], list[str]]] = {}
    with (folder / "claims_train.csv").open(encoding="utf-8-sig", newline="") as handle:
        for row in csv.DictReader(handle):
            text, evidence, cited = claims.setdefault(row["id"], (row["claim"], set(), []))
            if row["evidence_doc_id"]:
                evidence.add(row["evidence_doc_id"])
            # numpy-style lists: "[123]" or "[ 5152028 11705328]"
            for doc_id in row["cited_doc_ids"].strip("[]").replace(",", " ").split():
                if doc_id not in cited:
                    cited.append(doc_id)
    for text, evidence, cited in claims.values():
        for doc_id in cited:
            if doc_id in corpus:
                yield Pair(text, corpus[doc_id], int(doc_id in evidence))
