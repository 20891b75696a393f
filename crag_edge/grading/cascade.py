"""The grading cascade: rules → signals → cross-encoder → LLM judge, cheapest first.

The cross-encoder scores only the items the signals left uncertain (an item leaves as soon as
its calibrated score is `confidence_margin` past the CORRECT or INCORRECT threshold), plus
the `escalate_top` best even when the signals reject them. The LLM judge has a budget per
list, `judge_share` of its items (rounded down): it sees the best ones not already
confidently CORRECT, rejected or not, because their verdicts decide what is kept and
aggregated (a top-10 list is never rejected by the cheap tiers alone); and, beside that
share, the items holding a table row the query names, which the cheaper tiers misread. An
item's score is the mean of the tiers that scored it, the signals included (`tier_fusion`:
or of the model tiers only, or the last one's). The decision
then drops items below `discard_below`, aggregates the rest and applies the
thresholds. Everything that shaped the outcome lands in the `Grading` and the audit log.

Model scores of this corpus's chunks are cached per query (`store.ScoreCache`); an evaluator
that reads passages without the query (`types.PassageEncoder`) reuses each chunk's stored
reading (`store.PassageVectors`, written at ingest), so it costs one query encoding per list.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from crag_edge.config import TIERS, GradingSettings
from crag_edge.grading.calibration import Calibration, Identity, calibration
from crag_edge.grading.injection import set_aside_phrase
from crag_edge.grading.result import SET_ASIDE, Grading, ItemGrade
from crag_edge.grading.rows import names_a_row, names_a_row_by_identifier
from crag_edge.grading.rules import first_matching_rule
from crag_edge.grading.signals import SignalWeights, combine, compute_signals
from crag_edge.kernels import Aggregation, aggregate, score_variance
from crag_edge.observability import AuditLog, Metrics
from crag_edge.store.backend import PassageVectorsBackend, ScoreCacheBackend
from crag_edge.types import (
    Action,
    Decision,
    EncodedPassage,
    Hit,
    PairScorer,
    PassageEncoder,
    PassageIndex,
    ScoredBatch,
    reading_text,
)

FloatArray = npt.NDArray[np.float64]
RANK_WEIGHTED_VARIANCE_LIMIT = 0.1  # above it, the ambiguous band stays ambiguous
TierProgress = Callable[[str, int, float | None], None]
MODEL_TIERS = tuple(tier for tier in TIERS if tier != "signals")
# The judge finds an item relevant when its calibrated score says more likely than not.
JUDGE_POSITIVE = 0.5


@dataclass(frozen=True)
class Calibrations:
    """Raw score → probability of relevance, per tier (fitted by `crag-edge eval grading`)."""

    signals: Calibration = field(default_factory=Identity)
    cross_encoder: Calibration = field(default_factory=Identity)
    llm: Calibration = field(default_factory=Identity)

    @classmethod
    def from_settings(cls, settings: GradingSettings) -> Calibrations:
        return cls(
            signals=calibration(settings.calibration_signals),
            cross_encoder=calibration(settings.calibration_cross_encoder),
            llm=calibration(settings.calibration_llm),
        )


@dataclass(frozen=True)
class Evidence:
    """What the cascade needs to know about each hit, beyond its text."""

    hits: Sequence[Hit]
    similarities: FloatArray  # query-passage cosine, NaN where unknown
    token_counts: npt.NDArray[np.int64]


class Grader:
    """Grades hit lists. Holds the (optional) model tiers; safe to share between threads."""

    def __init__(
        self,
        settings: GradingSettings,
        *,
        cross_encoder: PairScorer | None = None,
        llm_judge: PairScorer | None = None,
        calibrations: Calibrations | None = None,
        weights: SignalWeights | None = None,
        metrics: Metrics | None = None,
        versions: dict[str, str] | None = None,
    ) -> None:
        self.settings = settings
        self.cross_encoder = cross_encoder
        self.llm_judge = llm_judge
        # The evaluation cache keys model scores by these (model file hash and scoring
        # setup); a tier without a version is never cached.
        self.versions = versions or {}
        self.calibrations = calibrations or Calibrations.from_settings(settings)
        self.weights = weights or SignalWeights()
        self.metrics = metrics or Metrics()

    def tier_status(self) -> dict[str, str]:
        """Which model tiers will run: `ok`, `disabled` (settings) or `unavailable` (no model)."""
        models = {"signals": True, "cross_encoder": self.cross_encoder, "llm": self.llm_judge}
        return {
            tier: (
                "disabled"
                if tier not in self.settings.grading_tiers
                else "ok"
                if model
                else "unavailable"
            )
            for tier, model in models.items()
        }

    def passage_index(self) -> PassageIndex | None:
        """What an ingest should store for this grader's evaluator: its passage readings, under
        the key `grade` looks them up by; None when the evaluator cannot use them."""
        scorer = self.cross_encoder
        ready = self.tier_status()["cross_encoder"] == "ok" and "cross_encoder" in self.versions
        if not ready or not isinstance(scorer, PassageEncoder):
            return None
        return PassageIndex(self._scorer_key("cross_encoder"), scorer)

    def _scorer_key(self, tier: str) -> str:
        """What stored scores and passage readings of a tier are keyed by: its model version."""
        return f"{tier}:{self.versions.get(tier)}"

    def grade(
        self,
        query: str,
        evidence: Evidence,
        audit: AuditLog,
        *,
        use_rules: bool = True,
        cache: ScoreCacheBackend | None = None,
        passages: PassageVectorsBackend | None = None,
        on_tier: TierProgress | None = None,
        carried: Sequence[ItemGrade] = (),
    ) -> Grading:
        """Score every hit and decide CORRECT / AMBIGUOUS / INCORRECT.

        `carried` are items kept in earlier rounds of the same question: they join the
        decision with the grades they earned and are not scored again (a later, shorter list
        has no judge share for them, and its signals would rank them against other hits).
        `use_rules=False` skips the fast path: the loop's later rounds must be judged.
        `cache` holds earlier model scores of this corpus's chunks for this query, `passages`
        the evaluator's stored readings of its chunks (missing ones are stored as computed).
        `on_tier(tier, items, ms)` hears each tier start (ms None) and end. A passage that
        addresses the model (`grading.injection`) is set aside before any tier reads it:
        never kept, with a warning that says so.
        """
        started = time.perf_counter()
        evidence, aside = _set_aside(evidence, audit)
        run = _GradingRun(
            query,
            evidence,
            [ItemGrade(chunk_id=h.chunk.chunk_id, rank=h.rank) for h in evidence.hits],
            on_tier or _silent,
            cache,
            passages,
        )
        status = self.tier_status()
        rule = first_matching_rule(evidence.hits, self.settings) if use_rules else None
        run.timings["rules"] = _ms(started)
        if rule is not None:
            grading = self._fast_path(rule, run.items, audit)
        else:
            self._run_tiers(run, status, audit)
            decision_started = time.perf_counter()
            grading = self._decide([*carried, *run.items], audit)
            run.timings["decide"] = _ms(decision_started)
            grading.tier_items, grading.warnings = run.tier_items, run.warnings
            grading.cache_hits = run.cache_hits
        grading.thresholds, grading.tiers = self._thresholds(), status
        grading.timings_ms = run.timings
        grading.items += [grade for grade, _ in aside]
        grading.warnings = [*grading.warnings, *(warning for _, warning in aside)]
        return self._finish(grading, audit)

    def _thresholds(self) -> dict[str, float]:
        s = self.settings
        return {
            "correct": s.correct_threshold,
            "incorrect": s.incorrect_threshold,
            "discard_below": s.discard_below,
            "margin": s.confidence_margin,
        }

    def _fast_path(self, rule: str, items: list[ItemGrade], audit: AuditLog) -> Grading:
        """A fast-path rule matched: every item is trusted without a model call."""
        for item in items:
            item.score, item.decided_by, item.reason = 1.0, "rules", f"fast path: {rule}"
            item.tiers["rules"] = 1.0
        audit.emit("fast_path_hit", rule_name=rule, items=len(items))
        self.metrics.fast_path.labels(rule=rule).inc()
        return Grading(
            Decision.CORRECT,
            Action.GENERATE,
            1.0,
            items,
            reason=f"fast-path rule {rule!r} matched",
            rule=rule,
            decided_by="rules",
            aggregation=self.settings.aggregation,
            tier_items={"rules": len(items)},
        )

    def _run_tiers(self, run: _GradingRun, status: dict[str, str], audit: AuditLog) -> None:
        """Signals, then each model tier on the items the cheaper tiers left pending."""
        pending = list(range(len(run.items)))
        if status["signals"] == "ok" and pending:
            pending = self._signals_step(run, pending)
        for tier, scorer, calibrate in (
            ("cross_encoder", self.cross_encoder, self.calibrations.cross_encoder),
            ("llm", self.llm_judge, self.calibrations.llm),
        ):
            if tier == "llm":
                shared = self._judge_budget(run.items)
                pending = sorted({*shared, *self._named_rows(run, set(shared))})
            if status[tier] != "ok" or not pending or scorer is None:
                continue
            pending = self._model_step(run, tier, scorer, calibrate, pending, audit)
        self._keep_rows_named_by_identifier(run)
        for tier, count in run.tier_items.items():
            self.metrics.tier_items.labels(tier=tier).inc(count)

    def _keep_rows_named_by_identifier(self, run: _GradingRun) -> None:
        """Keep, at the cut, an item holding a table row the query names whole by an
        identifier (`rows.identifier`: "How deep is the water at berth B7?" of `Berth: B7;
        Length: 18 m; Depth: 4.4 m`). The query names that very row, yet every tier can
        miss it: the signals and the evaluator read a run of cells as noise, and the judge
        does not tie "deep" to "Depth" (raw 0.46). Kept, it is evidence the answer is
        written from and checked against; it is not raised above the cut, so it makes no
        answer CORRECT alone."""
        cut = self.settings.discard_below
        for item, hit in zip(run.items, run.evidence.hits, strict=True):
            if item.score < cut and names_a_row_by_identifier(run.query, hit.chunk.text):
                item.score, item.decided_by = cut, "row"

    def _signals_step(self, run: _GradingRun, pending: list[int]) -> list[int]:
        """Score every item with the signals; what stays pending for the models."""
        started = time.perf_counter()
        run.report("signals", len(pending), None)
        self._signals_tier(run.query, run.evidence, run.items)
        run.tier_items["signals"] = len(pending)
        pending = self._escalated(run.items, self._unsettled(run.items, pending))
        run.timings["signals"] = _ms(started)
        run.report("signals", run.tier_items["signals"], run.timings["signals"])
        return pending

    def _model_step(
        self,
        run: _GradingRun,
        tier: str,
        scorer: PairScorer,
        calibrate: Calibration,
        pending: list[int],
        audit: AuditLog,
    ) -> list[int]:
        """Score the pending items with one model tier; those still unsettled after it."""
        started = time.perf_counter()
        run.report(tier, len(pending), None)
        hits, items = run.evidence.hits, run.items
        batch, hits_from_cache = self._score(
            tier, scorer, run.query, hits, pending, run.cache, run.passages
        )
        if hits_from_cache:
            run.cache_hits[tier] = hits_from_cache
            self.metrics.cache_hits.labels(tier=tier).inc(hits_from_cache)
        probabilities = calibrate(batch.scores)
        for i, raw, p in zip(pending, batch.scores, probabilities, strict=True):
            items[i].tiers[tier] = float(p)
            items[i].tiers[f"{tier}_raw"] = float(raw)
            items[i].score, items[i].decided_by = self._fused(items[i], float(p)), tier
        for warning in batch.warnings:
            run.warnings.append(f"{tier}: {warning}")
            audit.emit("grading_warning", tier=tier, warning=warning)
            self.metrics.warnings.labels(kind=tier).inc()
        run.tier_items[tier] = len(pending)
        unsettled = self._unsettled(items, pending)
        run.timings[tier] = _ms(started)
        run.report(tier, run.tier_items[tier], run.timings[tier])
        return unsettled

    def _score(
        self,
        tier: str,
        scorer: PairScorer,
        query: str,
        hits: Sequence[Hit],
        pending: list[int],
        cache: ScoreCacheBackend | None,
        passages: PassageVectorsBackend | None,
    ) -> tuple[ScoredBatch, int]:
        """The tier's raw scores for the pending items, in order, and how many came from the
        cache. Only this corpus's chunks (origin `search`) are cached: fallback results
        have no stable id here."""
        version = self.versions.get(tier)
        cacheable = {i for i in pending if hits[i].origin == "search"}
        scorer_key = self._scorer_key(tier)
        cached = (
            cache.get(scorer_key, query, [hits[i].chunk.chunk_id for i in sorted(cacheable)])
            if cache is not None and version and cacheable
            else {}
        )
        missing = [i for i in pending if hits[i].chunk.chunk_id not in cached or i not in cacheable]
        if not missing:
            batch = ScoredBatch([])
        elif isinstance(scorer, PassageEncoder):
            stored = passages if version else None
            readings = _readings(scorer, scorer_key, hits, missing, cacheable, stored)
            batch = scorer.score_encoded(query, readings)
        else:
            batch = scorer.score(query, [hits[i].chunk.text for i in missing])
        fresh = dict(zip(missing, batch.scores, strict=True))
        if cache is not None and version:
            failed = {missing[j] for j in batch.failed}
            cache.put(
                scorer_key,
                query,
                {
                    hits[i].chunk.chunk_id: score
                    for i, score in fresh.items()
                    if i in cacheable and i not in failed
                },
            )
        scores = [fresh[i] if i in fresh else cached[hits[i].chunk.chunk_id] for i in pending]
        return ScoredBatch(scores, batch.warnings), len(pending) - len(missing)

    def _fused(self, item: ItemGrade, latest: float) -> float:
        """`mean_with_signals` (the default): the mean probability of every tier that scored
        the item, so the signals temper an evaluator whose scale does not fit the corpus (it
        was trained on biomedical sentences and ranks manual pages like cosine) and the
        evaluator tempers the judge; `mean`: the model tiers only (the signals count until a
        model has seen the item); `last`: the latest tier's. docs/grading.md has the numbers.
        With `judge_floor`, the most accurate tier has the last word on keeping: an item the
        judge finds relevant (its calibrated score at least `JUDGE_POSITIVE`: more likely
        relevant than not) is not pushed under the cut by the cheaper tiers. It is kept at
        the cut, not raised to the judge's score: the judge's yes-bias, lent to every item it
        read, made weak evidence look CORRECT (docs/answer-quality.md, "The judge's score as
        a floor")."""
        fusion = self.settings.tier_fusion
        if fusion == "last":
            return latest
        tiers = TIERS if fusion == "mean_with_signals" else MODEL_TIERS
        fused = float(np.mean([item.tiers[t] for t in tiers if t in item.tiers]))
        judged = item.tiers.get("llm")
        cut = self.settings.discard_below
        if judged is not None and self.settings.judge_floor and judged >= JUDGE_POSITIVE:
            return max(fused, cut)
        return fused

    def _signals_tier(self, query: str, evidence: Evidence, items: list[ItemGrade]) -> None:
        hits = evidence.hits
        signals = compute_signals(
            query,
            [h.chunk.text for h in hits],
            evidence.similarities,
            evidence.token_counts,
            [h.chunk.source for h in hits],
            self.settings.min_chunk_tokens,
        )
        raw = combine(signals, self.weights)
        probabilities = self.calibrations.signals(raw)
        for i, item in enumerate(items):
            item.signals = {name: _finite(values[i]) for name, values in signals.items()}
            item.tiers["signals"] = float(probabilities[i])
            item.tiers["signals_raw"] = float(raw[i])
            item.score, item.decided_by = float(probabilities[i]), "signals"

    def _escalated(self, items: list[ItemGrade], pending: list[int]) -> list[int]:
        """The pending items plus the `escalate_top` best-scored items not confidently
        CORRECT: the cheap tier may not drop the best evidence a query has unchecked."""
        return sorted(set(pending) | set(self._best_unsettled(items, self.settings.escalate_top)))

    def _judge_budget(self, items: list[ItemGrade]) -> list[int]:
        """The judge's share of the list, rounded down, spent on the best items not
        confidently CORRECT. A per-list budget ranks WikiQA pairs better than routing by
        margins for the same LLM calls, and it bounds the slowest tier's latency per query. A
        list too short for a share goes unjudged: spending one call anyway on lists heading
        for rejection sent most of SciFact's cited abstracts to the judge and ranked them
        worse (measured in docs/grading.md)."""
        budget = int(self.settings.judge_share * len(items) + 1e-9)
        return sorted(self._best_unsettled(items, budget))

    def _named_rows(self, run: _GradingRun, shared: set[int]) -> list[int]:
        """Beside the judge's share, the items holding a table row the query names by its
        subject ("How many bytes does the macaddr8 type use?" of `Name: macaddr8; Storage
        Size: 8 bytes`), best-ranked first, as many as the `shared` items again, unless confidently
        CORRECT already. The signals and the evaluator read a run of cells as noise (the
        macaddr8 row: 0.23 and 0.19, under the cut, while the judge finds it relevant),
        so the share, spent on the items they rank best, passes such a row by; with
        `judge_floor`, the judge's verdict then keeps it (docs/answer-quality.md)."""
        items, hits = run.items, run.evidence.hits
        high = self.settings.correct_threshold + self.settings.confidence_margin
        named = [
            i
            for i in sorted(range(len(items)), key=lambda i: items[i].rank)
            if i not in shared
            and items[i].score < high
            and names_a_row(run.query, hits[i].chunk.text)
        ]
        return named[: len(shared)]

    def _best_unsettled(self, items: list[ItemGrade], count: int) -> list[int]:
        """Indices of the `count` best-scored items so far that are not confidently CORRECT."""
        high = self.settings.correct_threshold + self.settings.confidence_margin
        ranked = sorted(range(len(items)), key=lambda i: -items[i].score)
        return [i for i in ranked if items[i].score < high][:count]

    def _unsettled(self, items: list[ItemGrade], pending: list[int]) -> list[int]:
        """Items whose score is not yet confidently past either threshold."""
        s = self.settings
        high, low = (
            s.correct_threshold + s.confidence_margin,
            s.incorrect_threshold - s.confidence_margin,
        )
        return [i for i in pending if low <= items[i].score < high]

    def _decide(self, items: list[ItemGrade], audit: AuditLog) -> Grading:
        """Drop items below `discard_below`, aggregate the rest and apply the thresholds."""
        s = self.settings
        self._discard(items, audit)
        kept = [item for item in items if item.kept]
        decided_by = max((i.decided_by for i in items), key=_tier_order, default="")
        if not kept:
            reason = "no evidence" if not items else "every item scored below discard_below"
            return Grading(
                Decision.INCORRECT,
                Action.RE_RETRIEVE,
                0.0,
                items,
                reason=reason,
                decided_by=decided_by,
                aggregation=s.aggregation,
            )
        scores = np.array([item.score for item in kept], dtype=np.float64)
        score = float(aggregate(scores, int(Aggregation.parse(s.aggregation))))
        decision, reason = self._verdict(score, scores)
        return Grading(
            decision,
            _ACTIONS[decision],
            score,
            items,
            reason=reason,
            decided_by=decided_by,
            aggregation=s.aggregation,
        )

    def _discard(self, items: list[ItemGrade], audit: AuditLog) -> None:
        """Mark each item kept or not, with the reason; audit and count the discarded."""
        threshold = self.settings.discard_below
        for item in items:
            item.kept = item.score >= threshold
            item.reason = (
                f"{item.decided_by} score {item.score:.2f} "
                f"{'>=' if item.kept else '<'} discard_below {threshold}"
            )
            if not item.kept:
                audit.emit(
                    "item_discarded",
                    chunk_id=item.chunk_id,
                    rank=item.rank,
                    score=round(item.score, 4),
                    tier=item.decided_by,
                )
                self.metrics.discarded.inc()

    def _verdict(self, score: float, scores: FloatArray) -> tuple[Decision, str]:
        """The decision the kept items' aggregate `score` reaches, and why. In the ambiguous
        band a rank-weighted mean above 0.5 with a low variance counts as CORRECT."""
        s = self.settings
        label = f"{s.aggregation} score {score:.2f}"
        if score >= s.correct_threshold:
            return Decision.CORRECT, f"{label} >= {s.correct_threshold}"
        if score < s.incorrect_threshold:
            return Decision.INCORRECT, f"{label} < {s.incorrect_threshold}"
        reason = f"{label} between thresholds"
        variance = float(score_variance(scores))
        if (
            Aggregation.parse(s.aggregation) == Aggregation.RANK_WEIGHTED
            and score > 0.5
            and variance <= RANK_WEIGHTED_VARIANCE_LIMIT
        ):
            return (
                Decision.CORRECT,
                f"{reason}, but consistent (variance {variance:.3f} <= 0.1) and > 0.5",
            )
        return Decision.AMBIGUOUS, reason

    def _finish(self, grading: Grading, audit: AuditLog) -> Grading:
        audit.emit(
            "decision",
            decision=str(grading.decision),
            action=str(grading.action),
            score=round(grading.score, 4),
            reason=grading.reason,
            rule=grading.rule,
            decided_by=grading.decided_by,
        )
        self.metrics.decisions.labels(decision=str(grading.decision)).inc()
        return grading


def _set_aside(evidence: Evidence, audit: AuditLog) -> tuple[Evidence, list[tuple[ItemGrade, str]]]:
    """The evidence without the passages that address the model, and for each of those its
    grade (not kept, `SET_ASIDE`) and the warning that tells the reader."""
    phrases = [set_aside_phrase(h.chunk.text, h.chunk.metadata) for h in evidence.hits]
    keep = [i for i, phrase in enumerate(phrases) if phrase is None]
    aside = []
    for hit, phrase in zip(evidence.hits, phrases, strict=True):
        if phrase is None:
            continue
        why = f"addresses the model ({phrase!r}): set aside"
        grade = ItemGrade(
            hit.chunk.chunk_id, hit.rank, decided_by=SET_ASIDE, kept=False, reason=why
        )
        aside.append(
            (grade, f"a passage of {hit.chunk.source} {why}, neither evidence nor context")
        )
        audit.emit("passage_set_aside", chunk_id=hit.chunk.chunk_id, phrase=phrase)
    if not aside:
        return evidence, []
    kept = Evidence(
        [evidence.hits[i] for i in keep], evidence.similarities[keep], evidence.token_counts[keep]
    )
    return kept, aside


def _readings(
    encoder: PassageEncoder,
    scorer_key: str,
    hits: Sequence[Hit],
    indices: list[int],
    storable: set[int],
    stored: PassageVectorsBackend | None,
) -> list[EncodedPassage]:
    """The encoder's readings of these hits: stored ones reused, the others computed and, for
    this corpus's chunks, stored for the next query."""
    ids = {i: hits[i].chunk.chunk_id for i in indices if i in storable}
    known = stored.get(scorer_key, list(ids.values())) if stored is not None and ids else {}
    new = [i for i in indices if i not in ids or ids[i] not in known]
    texts = [reading_text(encoder, hits[i].chunk) for i in new]
    fresh = dict(zip(new, encoder.encode_passages(texts), strict=True))
    if stored is not None:
        stored.put(scorer_key, {ids[i]: fresh[i] for i in new if i in ids})
    return [fresh[i] if i in fresh else known[ids[i]] for i in indices]


_TIERS = ("", "rules", *TIERS)
_ACTIONS = {
    Decision.CORRECT: Action.GENERATE,
    Decision.AMBIGUOUS: Action.REFINE,
    Decision.INCORRECT: Action.RE_RETRIEVE,
}


@dataclass
class _GradingRun:
    """One call of `Grader.grade`: the items being scored and what each tier reported."""

    query: str
    evidence: Evidence
    items: list[ItemGrade]
    report: TierProgress
    cache: ScoreCacheBackend | None
    passages: PassageVectorsBackend | None
    timings: dict[str, float] = field(default_factory=dict)
    tier_items: dict[str, int] = field(default_factory=dict)
    cache_hits: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _silent(tier: str, items: int, ms: float | None) -> None:
    """The default `on_tier`: nobody is listening."""


def _tier_order(tier: str) -> int:
    return _TIERS.index(tier) if tier in _TIERS else 0


def _finite(value: float) -> float | None:
    """JSON has no NaN: an unavailable signal is None."""
    return float(value) if np.isfinite(value) else None


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)
