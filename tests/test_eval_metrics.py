"""Ranking metrics against hand-computed values, and the BEIR/TREC file readers."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from crag_edge.evaluation import (
    EvalDataError,
    ndcg_at,
    percentile,
    read_qrels,
    read_queries,
    recall_at,
)
from crag_edge.evaluation.retrieval import document_key
from crag_edge.grading.auc import roc_auc


def test_ndcg_hand_computed() -> None:
    assert ndcg_at(["a", "b"], {"a": 1}, 10) == 1.0
    assert ndcg_at(["b", "a"], {"a": 1}, 10) == pytest.approx(1 / math.log2(3))
    assert ndcg_at(["a", "x"], {"a": 1, "b": 1}, 10) == pytest.approx(1 / (1 + 1 / math.log2(3)))
    assert ndcg_at(["x"] * 10 + ["a"], {"a": 1}, 10) == 0.0
    assert ndcg_at(["a"], {}, 10) == 0.0
    assert ndcg_at(["b", "a"], {"a": 2, "b": 1}, 10) == pytest.approx(
        (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    )


def test_recall_and_percentile() -> None:
    assert recall_at(["a", "b", "c"], {"a": 1, "c": 1, "d": 1}, 2) == pytest.approx(1 / 3)
    assert recall_at(["a"], {"a": 0}, 10) == 0.0
    assert percentile([5.0, 1.0, 3.0, 2.0, 4.0], 50) == 3.0
    assert percentile([1.0, 2.0], 95) == 2.0 and percentile([], 50) == 0.0


def test_readers(tmp_path: Path) -> None:
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"_id": "1", "text": "why?"}\n\n{"_id": 2, "text": "how"}\n')
    assert read_queries(queries) == {"1": "why?", "2": "how"}
    beir = tmp_path / "qrels.tsv"
    beir.write_text("query-id\tcorpus-id\tscore\n1\td1\t1\n1\td2\t2\n")
    assert read_qrels(beir) == {"1": {"d1": 1, "d2": 2}}
    trec = tmp_path / "qrels.trec"
    trec.write_text("1 0 d1 1\n2 0 d9 0\n")
    assert read_qrels(trec) == {"1": {"d1": 1}, "2": {"d9": 0}}


@pytest.mark.parametrize(
    ("name", "body", "complaint"),
    [
        ("q.jsonl", '{"_id": "1"}\n', r"q.jsonl:1"),
        ("q.jsonl", "not json\n", r"q.jsonl:1"),
        ("r.tsv", "1 d1\n", r"r.tsv:1: expected 3"),
        ("r.tsv", "1 d1 high\n", "not an integer"),
    ],
)
def test_reader_errors_name_file_and_line(
    tmp_path: Path, name: str, body: str, complaint: str
) -> None:
    path = tmp_path / name
    path.write_text(body)
    reader = read_queries if name.endswith("jsonl") else read_qrels
    with pytest.raises(EvalDataError, match=complaint):
        reader(path)
    with pytest.raises(EvalDataError, match="not found"):
        reader(tmp_path / "absent")


def test_document_key() -> None:
    assert document_key("beir:4983") == "4983"
    assert document_key("/data/docs/report.pdf") == "report.pdf"


def test_roc_auc_hand_computed() -> None:
    assert roc_auc([0.9, 0.8, 0.1], [1, 1, 0]) == 1.0
    assert roc_auc([0.1, 0.2, 0.9], [1, 1, 0]) == 0.0
    assert roc_auc([0.5, 0.5], [1, 0]) == 0.5
    assert roc_auc([0.9, 0.3, 0.5, 0.1], [1, 1, 0, 0]) == 0.75
    assert math.isnan(roc_auc([0.1, 0.2], [1, 1]))
