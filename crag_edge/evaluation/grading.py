"""Grading quality against human labels: ROC-AUC, accuracy at the thresholds, speed per scorer.

Pairs are grouped by query, and each group is graded as one hit list (so list-level signals
such as coherence mean what they mean at query time). Fast-path rules are switched off: they
approve evidence without judging it, which is not what is measured here.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from crag_edge.config import Settings
from crag_edge.evaluation.pairs import Pair
from crag_edge.grading import Evidence, Grader, fit_platt
from crag_edge.grading.auc import roc_auc
from crag_edge.grading.factory import build_grader
from crag_edge.grading.signals import combine, compute_signals
from crag_edge.models.llm import SharedLlm
from crag_edge.models.registry import load_embedder
from crag_edge.observability import AuditLog
from crag_edge.types import Chunk, Embedder, Hit

MODEL_SCORERS = ("cross_encoder", "llm")
SCORERS = ("cosine", "coverage", "signals", *MODEL_SCORERS)


@dataclass
class _Scores:
    values: list[float] = field(default_factory=list)
    seconds: float = 0.0


def grading_models(settings: Settings) -> tuple[Embedder, Grader]:
    """The embedder and the cascade as the engine builds them from `settings`, minus the
    fast-path rules: those approve evidence without judging it, which is not measured here."""
    grading = settings.replace(fast_path_rules=[]).grading
    models = settings.models
    embedder = load_embedder(models)
    return embedder, build_grader(grading, models, llm=SharedLlm(models), embedder=embedder)


def sample_queries(pairs: Sequence[Pair], limit: int | None, seed: int = 13) -> list[Pair]:
    """All pairs of `limit` randomly chosen queries (seeded), or every pair when no limit."""
    if limit is None:
        return list(pairs)
    queries = list(dict.fromkeys(p.query for p in pairs))
    chosen = set(random.Random(seed).sample(queries, min(limit, len(queries))))
    return [p for p in pairs if p.query in chosen]


def evaluate_grading(
    pairs: Sequence[Pair],
    embedder: Embedder,
    grader: Grader,
    *,
    scorers: Sequence[str] = SCORERS,
    fit_calibration: bool = False,
    on_group: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Score every pair with each scorer alone and with the full cascade."""
    groups: dict[str, list[int]] = {}
    for index, pair in enumerate(pairs):
        groups.setdefault(pair.query, []).append(index)
    measured = _Measurement(pairs, embedder, grader, scorers)
    for query, members in groups.items():
        measured.add_group(query, members)
        if on_group:
            on_group()
    return measured.report(len(groups), fit_calibration)


class _Measurement:
    """One pass over the query groups: each scorer's scores (in group order) and time, the
    cascade's scores (in pair order), and how many items reached each tier."""

    def __init__(
        self, pairs: Sequence[Pair], embedder: Embedder, grader: Grader, scorers: Sequence[str]
    ) -> None:
        self.pairs = pairs
        self.embedder = embedder
        self.grader = grader
        self.scorers = scorers
        self.tokens = [
            len(e.ids) for e in embedder.tokenizer.encode_batch([p.passage for p in pairs])
        ]
        self.results: dict[str, _Scores] = {name: _Scores() for name in scorers}
        self.cosine = _Scores()
        self.cascade = _Scores(values=[0.0] * len(pairs))
        self.reached: dict[str, int] = {}
        self.order: list[int] = []
        self.tiers = grader.tier_status()

    def add_group(self, query: str, members: list[int]) -> None:
        self.order.extend(members)
        passages = [self.pairs[i].passage for i in members]
        started = time.perf_counter()
        vectors = self.embedder.embed([query, *passages])
        sims = (vectors[1:] @ vectors[0]).astype(np.float64)
        embed_seconds = time.perf_counter() - started
        self.cosine.seconds += embed_seconds
        self.cosine.values.extend(sims.tolist())
        self._signals(query, passages, sims, members)
        self._models(query, passages)
        self._cascade(query, members, sims, embed_seconds)

    def _signals(
        self, query: str, passages: list[str], sims: npt.NDArray[np.float64], members: list[int]
    ) -> None:
        started = time.perf_counter()
        signals = compute_signals(
            query,
            passages,
            sims,
            [self.tokens[i] for i in members],
            [f"pair:{i}" for i in members],
            self.grader.settings.min_chunk_tokens,
        )
        raw_signals = combine(signals, self.grader.weights)
        seconds = time.perf_counter() - started
        if "coverage" in self.results:
            self.results["coverage"].values.extend(signals["coverage"].tolist())
            self.results["coverage"].seconds += seconds
        if "signals" in self.results:
            self.results["signals"].values.extend(raw_signals.tolist())
            self.results["signals"].seconds += seconds

    def _models(self, query: str, passages: list[str]) -> None:
        grader = self.grader
        for name in MODEL_SCORERS:
            scorer = grader.cross_encoder if name == "cross_encoder" else grader.llm_judge
            if name in self.results and scorer is not None:
                started = time.perf_counter()
                self.results[name].values.extend(scorer.score(query, passages).scores)
                self.results[name].seconds += time.perf_counter() - started

    def _cascade(
        self, query: str, members: list[int], sims: npt.NDArray[np.float64], embed_seconds: float
    ) -> None:
        """The whole cascade on the group as one hit list; its time includes the embedding."""
        started = time.perf_counter()
        tokens = [self.tokens[i] for i in members]
        hits = [
            _as_hit(self.pairs[i], i, rank, sims[rank], self.tokens[i])
            for rank, i in enumerate(members)
        ]
        evidence = Evidence(hits, sims, np.array(tokens, dtype=np.int64))
        grading = self.grader.grade(query, evidence, AuditLog())
        self.cascade.seconds += time.perf_counter() - started + embed_seconds
        for item, i in zip(grading.items, members, strict=True):
            self.cascade.values[i] = item.score
        for tier, count in grading.tier_items.items():
            self.reached[tier] = self.reached.get(tier, 0) + count

    def report(self, queries: int, fit_calibration: bool) -> dict[str, Any]:
        pairs, settings = self.pairs, self.grader.settings
        labels = [p.label for p in pairs]
        report: dict[str, Any] = {
            "pairs": len(pairs),
            "positives": sum(labels),
            "queries": queries,
            "thresholds": {
                "discard_below": settings.discard_below,
                "correct": settings.correct_threshold,
            },
            "tiers": self.tiers,
            "scorers": self._scorer_summaries(fit_calibration),
        }
        cascade = self.cascade
        all_queries = [p.query for p in pairs]
        report["cascade"] = _summary(cascade.values, labels, all_queries, cascade.seconds, settings)
        report["cascade"]["tier_share"] = {
            t: round(n / len(pairs), 4) for t, n in self.reached.items()
        }
        return report

    def _scorer_summaries(self, fit_calibration: bool) -> dict[str, Any]:
        """Each scorer alone, its scores calibrated as the cascade would; with
        `fit_calibration`, the Platt fit of its raw scores to these labels."""
        settings = self.grader.settings
        labels = [self.pairs[i].label for i in self.order]
        queries = [self.pairs[i].query for i in self.order]
        calibrations = self.grader.calibrations
        calibrated = {
            "signals": calibrations.signals,
            "cross_encoder": calibrations.cross_encoder,
            "llm": calibrations.llm,
        }
        everything = {
            "cosine": self.cosine,
            **{k: v for k, v in self.results.items() if k != "cosine"},
        }
        summaries: dict[str, Any] = {}
        for name, scores in everything.items():
            if name not in self.scorers or not scores.values:
                continue
            values = scores.values
            shown = [float(v) for v in calibrated[name](values)] if name in calibrated else values
            summaries[name] = _summary(shown, labels, queries, scores.seconds, settings)
            if fit_calibration and name in calibrated:
                platt = fit_platt(values, labels)
                summaries[name]["fitted_calibration"] = {"a": platt.a, "b": platt.b}
        return summaries


def _as_hit(pair: Pair, index: int, rank: int, similarity: float, tokens: int) -> Hit:
    chunk = Chunk(
        index, index, 0, pair.passage, 0, len(pair.passage), f"pair:{index}", token_count=tokens
    )
    return Hit(
        chunk=chunk, rank=rank + 1, score=0.0, dense_score=float(similarity), dense_rank=rank + 1
    )


def _summary(
    scores: list[float], labels: list[int], queries: list[str], seconds: float, settings: Any
) -> dict[str, Any]:
    def accuracy(threshold: float) -> float:
        hits = sum(int(s >= threshold) == y for s, y in zip(scores, labels, strict=True))
        return round(hits / len(labels), 4)

    return {
        "roc_auc": round(roc_auc(scores, labels), 4),
        "answerable_auc": _answerable_auc(scores, labels, queries),
        "accuracy_at_discard_below": accuracy(settings.discard_below),
        "accuracy_at_correct": accuracy(settings.correct_threshold),
        "items_per_s": round(len(scores) / seconds, 1) if seconds > 0 else None,
    }


def _answerable_auc(scores: list[float], labels: list[int], queries: list[str]) -> float | None:
    """Answerless-question detection: each query's best score against whether any of its
    passages is relevant (None when every query is answerable, or none is)."""
    best: dict[str, float] = {}
    answerable: dict[str, int] = {}
    for score, label, query in zip(scores, labels, queries, strict=True):
        best[query] = max(best.get(query, float("-inf")), score)
        answerable[query] = max(answerable.get(query, 0), label)
    if len(set(answerable.values())) < 2:
        return None
    return round(roc_auc(list(best.values()), [answerable[q] for q in best]), 4)
