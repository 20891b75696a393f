"""Readers for BEIR-format evaluation files: queries.jsonl and qrels .tsv (TREC too)."""

from __future__ import annotations

import json
from pathlib import Path


class EvalDataError(ValueError):
    """An evaluation file is missing or malformed; the message names the file and line."""


def judged_queries(queries: Path, qrels: Path) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """The queries that have judgements, in file order, and the judgements; none in common is
    an error (an evaluation over no query would report 0.0 as if measured)."""
    judgements = read_qrels(qrels)
    judged = {qid: text for qid, text in read_queries(queries).items() if qid in judgements}
    if not judged:
        raise EvalDataError(f"no query of {queries} has a judgement in {qrels}")
    return judged, judgements


def read_queries(path: Path) -> dict[str, str]:
    """Query id → text, from lines of {"_id": ..., "text": ...}."""
    queries: dict[str, str] = {}
    for number, line in data_lines(path):
        try:
            record = json.loads(line)
            queries[str(record["_id"])] = str(record["text"])
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise EvalDataError(f'{path}:{number}: expected {{"_id", "text"}}: {exc}') from None
    return queries


def read_qrels(path: Path) -> dict[str, dict[str, int]]:
    """Query id → {doc id: relevance}; accepts BEIR tsv (with header) and TREC 4-column qrels."""
    qrels: dict[str, dict[str, int]] = {}
    for number, line in data_lines(path):
        fields = line.split()
        if number == 1 and fields[:2] == ["query-id", "corpus-id"]:
            continue
        if len(fields) == 3:
            query_id, doc_id, grade = fields
        elif len(fields) == 4:
            query_id, _, doc_id, grade = fields
        else:
            raise EvalDataError(f"{path}:{number}: expected 3 (BEIR) or 4 (TREC) columns")
        try:
            relevance = int(grade)
        except ValueError:
            raise EvalDataError(f"{path}:{number}: relevance {grade!r} is not an integer") from None
        qrels.setdefault(query_id, {})[doc_id] = relevance
    return qrels


def data_lines(path: Path) -> list[tuple[int, str]]:
    """The non-blank lines of a UTF-8 evaluation file with their line numbers; a missing or
    undecodable file is an `EvalDataError` naming it."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise EvalDataError(f"file not found: {path}") from None
    except UnicodeDecodeError as exc:
        raise EvalDataError(f"{path}: not UTF-8 ({exc})") from None
    return [(n, ln) for n, ln in enumerate(text.splitlines(), start=1) if ln.strip()]
