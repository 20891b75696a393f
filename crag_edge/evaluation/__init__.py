"""Measure quality on labelled data: retrieval today; grading and the CRAG loop build on it."""

from crag_edge.evaluation.beir import EvalDataError, judged_queries, read_qrels, read_queries
from crag_edge.evaluation.metrics import ndcg_at, percentile, recall_at
from crag_edge.evaluation.retrieval import evaluate_retrieval

__all__ = [
    "EvalDataError",
    "evaluate_retrieval",
    "judged_queries",
    "ndcg_at",
    "percentile",
    "read_qrels",
    "read_queries",
    "recall_at",
]
