"""`crag-edge calibrate`: a label-free Platt refit per corpus, stored in the corpus file and
used by default for it, with the small real LLM writing and judging the questions."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading import Calibrations, Platt, corpus_calibration, fit_platt
from crag_edge.grading.auc import roc_auc
from crag_edge.store import Corpus

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
TIERS = {"CRAG_EDGE_GRADING_TIERS": '["signals", "cross_encoder"]'}
runner = CliRunner()


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:  # type: ignore[type-arg]
    db = tmp_path_factory.mktemp("calibrate") / "sample.db"
    ingest = runner.invoke(app, ["ingest", "--db", str(db), str(SAMPLE)], env=TIERS)
    assert ingest.exit_code == 0, ingest.output
    result = runner.invoke(
        app, ["calibrate", "--db", str(db), "--questions", "3", "--json"], env=TIERS
    )
    assert result.exit_code == 0, result.output
    return db, json.loads(result.stdout)


def test_the_fit_improves_log_loss_and_is_stored(calibrated) -> None:  # type: ignore[no-untyped-def]
    db, report = calibrated
    assert report["questions"] == 3 and report["pairs"] > 3
    assert set(report["tiers"]) == {"signals", "cross_encoder"}
    for row in report["tiers"].values():
        assert row["after"]["log_loss"] <= row["before"]["log_loss"] + 1e-9
    with Corpus.open(db, readonly=True) as corpus:
        entry = corpus_calibration.stored(corpus)
    for tier, row in report["tiers"].items():
        assert 0.0 <= row["auc"] <= 1.0
        assert row["stored"] == (row["auc"] >= corpus_calibration.MIN_TIER_AUC)
        assert (tier in entry) == row["stored"], tier
        if row["stored"]:
            assert entry[tier]["a"] == pytest.approx(row["a"], abs=1e-3)
    if "cross_encoder" in entry:
        assert entry["cross_encoder"]["model"].startswith("crag-edge-evaluator")


def test_a_tier_that_does_not_rank_the_labels_is_not_stored(
    tmp_path: Path,
    embedder,  # type: ignore[no-untyped-def]
) -> None:
    labels = [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    ranking = corpus_calibration.TierFit(Platt(), Platt(), raw=[0.9, 0.8, 0.3, 0.2, 0.1, 0.0])
    shuffled = corpus_calibration.TierFit(Platt(), Platt(), raw=[0.1, 0.9, 0.8, 0.0, 0.5, 0.2])
    for fit in (ranking, shuffled):
        fit.after = fit_platt(fit.raw, labels)
        fit.auc = roc_auc(fit.raw, [int(label) for label in labels])
    assert ranking.separates and not shuffled.separates
    db = tmp_path / "corpus.db"
    with Engine.open(db, Settings.load(), create=True, embedder=embedder) as engine:
        fits = {"signals": ranking, "cross_encoder": shuffled}
        corpus_calibration.store(engine.corpus, fits, engine.grader, "teacher")
        entry = corpus_calibration.stored(engine.corpus)
    assert entry["signals"] == {"a": ranking.after.a, "b": ranking.after.b}
    assert "cross_encoder" not in entry


def test_engines_use_the_corpus_fit_unless_a_setting_is_explicit(calibrated, embedder) -> None:  # type: ignore[no-untyped-def]
    db, report = calibrated
    fitted = report["tiers"]["signals"]
    tiers = {"grading_tiers": ["signals", "cross_encoder"]}
    with Engine.open(db, Settings.load(**tiers), embedder=embedder) as engine:  # type: ignore[arg-type]
        used = engine.grader.calibrations.signals
        assert isinstance(used, Platt)
        assert (used.a, used.b) == pytest.approx((fitted["a"], fitted["b"]), abs=1e-3)
    explicit = Settings.load(calibration_signals=(1.0, 0.0), **tiers)  # type: ignore[arg-type]
    with Engine.open(db, explicit, embedder=embedder) as engine:
        assert engine.grader.calibrations.signals == Platt(1.0, 0.0)


def test_a_new_fit_is_used_at_once_by_an_engine_that_used_an_older_one(  # type: ignore[no-untyped-def]
    calibrated, tmp_path: Path, embedder
) -> None:
    db, _ = calibrated
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    with Corpus.open(copy) as corpus:
        older = {"signals": {"a": 0.25, "b": -3.0}, "fitted_at": 0.0, "teacher": "older"}
        corpus.set_meta({corpus_calibration.META_KEY: json.dumps(older)})
    settings = Settings.load(grading_tiers=["signals", "cross_encoder"])  # type: ignore[arg-type]
    with Engine.open(copy, settings, embedder=embedder) as engine:
        assert engine.grader.calibrations.signals == Platt(0.25, -3.0)
        engine.calibrate(3)
        fresh = corpus_calibration.apply(settings, engine.corpus, engine.grader.versions)
        assert engine.settings == fresh
        assert engine.grader.calibrations == Calibrations.from_settings(fresh.grading)
    assert engine.grader.calibrations.signals != Platt(0.25, -3.0)


def test_reset_forgets_the_fit(calibrated, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    db, _ = calibrated
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    first = runner.invoke(app, ["calibrate", "--db", str(copy), "--reset", "--json"])
    second = runner.invoke(app, ["calibrate", "--db", str(copy), "--reset", "--json"])
    assert json.loads(first.stdout) == {"removed": True}
    assert json.loads(second.stdout) == {"removed": False}


def test_an_empty_corpus_is_one_clear_line(tmp_path: Path, embedder) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path / "empty.db"
    Engine.open(db, Settings.load(), create=True, embedder=embedder).close()
    result = runner.invoke(app, ["calibrate", "--db", str(db)], env=TIERS)
    assert result.exit_code == 1
    assert "holds no chunks" in result.output and "Traceback" not in result.output


def test_soft_labels_fit_like_hard_ones_when_they_are_hard() -> None:
    rng = np.random.default_rng(3)
    raw = rng.normal(size=200)
    hard = (raw + rng.normal(scale=0.5, size=200) > 0).astype(float)
    assert fit_platt(raw, hard) == fit_platt(raw, hard.tolist())
    soft = fit_platt(raw, np.clip(hard * 0.8 + 0.1, 0, 1))
    assert 0 < soft.a < fit_platt(raw, hard).a  # softer targets, flatter curve
