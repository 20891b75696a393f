"""Calibration for the user's own corpus, without labels (`crag-edge calibrate`).

The shipped Platt scalers were fitted on SciFact; on another corpus the cheap tiers' raw
scores sit elsewhere (longer chunks, another vocabulary), so a fixed threshold keeps too
much or too little. No labels are needed to refit them: the local LLM writes a question
for sampled chunks (as `evaluator train` does), the chunk it was written from is relevant
(label 1), and the LLM judge's calibrated probability labels every other retrieved hit
(a soft label). The signals' and the evaluator's (a, b) are fitted to those labels and
stored in the corpus file (`meta` key `calibration`) with the evaluator version they fit;
`Engine` uses them for that corpus unless a calibration setting is given explicitly. The
judge is the teacher here, so its own calibration is not refitted.

A tier that does not rank the judge's labels (ROC-AUC below `MIN_TIER_AUC`) is not stored
and keeps the settings' calibration: Platt's fit to labels a tier cannot separate is nearly
flat, every score lands near the share of relevant pairs, and the decision thresholds stop
meaning anything (on a documentation corpus such a fit made the loop answer questions it
had refused).
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from crag_edge.config import GradingSettings, Settings
from crag_edge.grading import Grader, Platt, fit_platt
from crag_edge.grading.auc import roc_auc
from crag_edge.grading.calibration import Calibration, calibration
from crag_edge.grading.labeller import LlmLabeller
from crag_edge.grading.llm_judge import LlmJudge
from crag_edge.grading.signals import combine, compute_signals
from crag_edge.models.chat_model import ChatModel
from crag_edge.store import CorpusBackend
from crag_edge.types import Chunk, Embedder

META_KEY = "calibration"
FITTED_TIERS = ("signals", "cross_encoder")
MIN_TIER_AUC = 0.65


class CalibrationError(RuntimeError):
    """Calibration could not run (no LLM, an empty corpus, no usable question)."""


@dataclass
class PseudoQuery:
    """A question the LLM wrote for one chunk, its retrieved chunks and their soft labels."""

    question: str
    chunks: list[Chunk]
    similarities: list[float]
    labels: list[float]


@dataclass
class TierFit:
    """One tier's raw scores on the pseudo-labelled pairs, before and after the refit."""

    before: Calibration
    after: Platt
    raw: list[float] = field(default_factory=list)
    auc: float = float("nan")

    @property
    def separates(self) -> bool:
        """Whether the tier ranks the labels well enough for its refit to be used."""
        return self.auc >= MIN_TIER_AUC


def pseudo_queries(
    corpus: CorpusBackend,
    embedder: Embedder,
    search: Callable[[str], list[Chunk]],
    llm: ChatModel,
    settings: GradingSettings,
    *,
    questions: int,
    seed: int = 7,
    on_question: Callable[[int], None] | None = None,
) -> list[PseudoQuery]:
    """Up to `questions` pseudo-queries over chunks drawn at random (seeded)."""
    ids = corpus.chunk_ids()
    if not ids:
        raise CalibrationError(f"{corpus.path} holds no chunks: ingest documents first")
    random.Random(seed).shuffle(ids)
    # The grader's judge, reading what it reads, is the teacher.
    judge = LlmJudge(llm, focus_tokens=settings.judge_focus_tokens)
    labeller = LlmLabeller(llm, judge, calibration(settings.calibration_llm))
    made: list[PseudoQuery] = []
    for chunk_id in ids[: questions * 3]:  # some chunks offer no question; don't loop forever
        if len(made) == questions:
            break
        source = corpus.get_chunks([chunk_id])[chunk_id]
        question = labeller.question(source.text)
        if question is None:
            continue
        others = [c for c in search(question) if c.chunk_id != chunk_id]
        chunks = [source, *others]
        vector = embedder.embed([question])[0].astype(np.float64)
        sims = corpus.get_vectors([c.chunk_id for c in chunks]).astype(np.float64) @ vector
        judged = labeller.judge(question, [c.text for c in others]) if others else []
        made.append(PseudoQuery(question, chunks, sims.tolist(), [1.0, *judged]))
        if on_question:
            on_question(len(made))
    if not made:
        raise CalibrationError(f"{llm.model_id} wrote no usable question for this corpus's chunks")
    return made


def fit_tiers(queries: list[PseudoQuery], grader: Grader) -> dict[str, TierFit]:
    """Raw scores of the signals and the evaluator (when installed) and their Platt refit."""
    settings = grader.settings
    fits = {"signals": TierFit(grader.calibrations.signals, Platt())}
    if grader.cross_encoder is not None:
        fits["cross_encoder"] = TierFit(grader.calibrations.cross_encoder, Platt())
    for query in queries:
        texts = [c.text for c in query.chunks]
        signals = compute_signals(
            query.question,
            texts,
            query.similarities,
            [c.token_count for c in query.chunks],
            [c.source for c in query.chunks],
            settings.min_chunk_tokens,
        )
        fits["signals"].raw.extend(combine(signals, grader.weights).tolist())
        if grader.cross_encoder is not None:
            fits["cross_encoder"].raw.extend(
                grader.cross_encoder.score(query.question, texts).scores
            )
    labels = [label for query in queries for label in query.labels]
    relevant = _relevant(labels).astype(int).tolist()
    for fit in fits.values():
        fit.after = fit_platt(fit.raw, labels)
        fit.auc = roc_auc(fit.raw, relevant)
    return fits


def report(queries: list[PseudoQuery], fits: dict[str, TierFit]) -> dict[str, Any]:
    """Before/after numbers per tier: log-loss against the soft labels, and the mean
    probability of the pairs the labels call relevant and not relevant."""
    labels = np.array([label for query in queries for label in query.labels])
    relevant = _relevant(labels)
    tiers: dict[str, Any] = {}
    for tier, fit in fits.items():
        row: dict[str, Any] = {
            "a": round(fit.after.a, 4),
            "b": round(fit.after.b, 4),
            "auc": None if np.isnan(fit.auc) else round(fit.auc, 4),
            "stored": fit.separates,
        }
        for when, scaler in (("before", fit.before), ("after", fit.after)):
            p = np.clip(scaler(fit.raw), 1e-6, 1 - 1e-6)
            row[when] = {
                "log_loss": round(
                    float(-np.mean(labels * np.log(p) + (1 - labels) * np.log(1 - p))), 4
                ),
                "mean_relevant": round(float(p[relevant].mean()), 4) if relevant.any() else None,
                "mean_other": round(float(p[~relevant].mean()), 4) if (~relevant).any() else None,
            }
        tiers[tier] = row
    return {
        "questions": len(queries),
        "pairs": int(labels.size),
        "relevant_share": round(float(relevant.mean()), 4),
        "tiers": tiers,
    }


def _relevant(labels: Sequence[float] | np.ndarray) -> np.ndarray:
    """The pairs the soft labels call relevant (more likely than not), for AUC and means."""
    return np.asarray(labels) >= 0.5


def store(corpus: CorpusBackend, fits: dict[str, TierFit], grader: Grader, teacher: str) -> None:
    """Keep the fit of each tier that separates the labels in the corpus file, with the
    evaluator version it belongs to; the others keep the settings' calibration."""
    entry: dict[str, Any] = {"fitted_at": time.time(), "teacher": teacher}
    for tier, fit in fits.items():
        if fit.separates:
            entry[tier] = {"a": fit.after.a, "b": fit.after.b}
    if "cross_encoder" in entry:
        entry["cross_encoder"]["model"] = grader.versions.get("cross_encoder")
    corpus.set_meta({META_KEY: json.dumps(entry)})


def clear(corpus: CorpusBackend) -> bool:
    """Forget the corpus's fit (back to the settings' calibration); False if it had none."""
    return corpus.delete_meta(META_KEY)


def stored(corpus: CorpusBackend) -> dict[str, Any]:
    """The corpus's fit as stored, or {} (unreadable entries count as none)."""
    try:
        entry = json.loads(corpus.meta().get(META_KEY, "{}"))
    except ValueError:
        return {}
    return entry if isinstance(entry, dict) else {}


def apply(settings: Settings, corpus: CorpusBackend, versions: dict[str, str]) -> Settings:
    """`settings` with the corpus's fitted calibration (a validated copy), except where a
    calibration setting was given explicitly, and the evaluator's only while it is the model
    it was fitted for. The copy marks the fitted values as set: apply it to the settings as
    given, not to an earlier result, or a newer fit would read as an explicit setting."""
    entry = stored(corpus)
    update: dict[str, tuple[float, float]] = {}
    for tier in FITTED_TIERS:
        fit = entry.get(tier)
        name = f"calibration_{tier}"
        if not isinstance(fit, dict) or name in settings.grading.model_fields_set:
            continue
        if tier == "cross_encoder" and fit.get("model") != versions.get("cross_encoder"):
            continue
        update[name] = (float(fit["a"]), float(fit["b"]))
    return settings.replace(**update) if update else settings
