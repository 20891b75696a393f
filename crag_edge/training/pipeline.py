"""`crag-edge evaluator train`, end to end: label → fine-tune → export → check → register.

Every stage is resumable or cheap to redo: labelled units are appended to `labels.jsonl`,
the training state to `train_state.pt` (both in the output folder); rerunning the same
command continues where an interrupted or out-of-budget run stopped. Labelling may use at
most `LABEL_SHARE` of the budget, so training always gets its part.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.evaluation.pairs import Pair, read_pairs
from crag_edge.locations import absolute_location, corpus_name, shown_location
from crag_edge.models.cross_encoder import MAX_LENGTH, MIN_LENGTH
from crag_edge.models.llm import LlmUnavailableError
from crag_edge.models.manifest import load_manifest
from crag_edge.models.onnx_session import plain_tokenizer
from crag_edge.models.provision import EMBEDDER_ONNX_INT8, model_path, pull_model
from crag_edge.models.registry import ModelNotInstalledError
from crag_edge.training import TrainingInputError, require_torch
from crag_edge.training.data import (
    LABELS_FILE,
    Labeller,
    LabelOptions,
    LabelStore,
    PairBuilder,
    TrainPair,
    is_validation,
    label_corpus,
)
from crag_edge.training.vocab import prune_tokenizer, segment_pair_template

if TYPE_CHECKING:  # these need torch, which the `train` extra installs
    from tokenizers import Tokenizer

    from crag_edge.training.model import Evaluator
    from crag_edge.training.trainer import TrainReport

LABEL_SHARE = 0.5
CHECKPOINT_DIR = "checkpoint"
REPORT_FILE = "report.json"
MAX_CHECK_PAIRS = 64
HEAD_FIT_PAIRS = 2000  # pairs the segment scorer's starting calibration is fitted on
DEFAULT_LICENSE = "base weights Apache-2.0 (all-MiniLM-L6-v2); training data: the user's corpus"


@dataclass(frozen=True)
class TrainOptions:
    """Everything `evaluator train` takes; the defaults are the shipped evaluator's. `db` is
    a corpus file or a `postgresql://` URL."""

    db: Path | str
    out: Path
    labels: Path | None = None
    budget_minutes: float = 30.0
    max_pairs: int = 6000
    layers: int = 4
    architecture: str = "segment"
    vocab_size: int | None = None
    negatives: int = 3
    llm_labels: bool = True
    epochs: float = 2.0
    batch_size: int = 16
    learning_rate: float = 6e-5
    max_length: int = 256
    seed: int = 13
    threads: int = 2
    model_id: str = ""
    register: bool = True
    data_license: str = DEFAULT_LICENSE
    command: str = ""


class Events(Protocol):
    """Progress for the CLI: one stage at a time, each with its own counter."""

    def stage(self, name: str, total: int | None) -> None: ...

    def update(self, completed: int, total: int | None = None) -> None: ...

    def note(self, message: str) -> None: ...


class NoEvents:
    """The API default: progress is not shown."""

    def stage(self, name: str, total: int | None) -> None:
        """Nothing to show."""

    def update(self, completed: int, total: int | None = None) -> None:
        """Nothing to show."""

    def note(self, message: str) -> None:
        """Nothing to show."""


def default_model_id(db: Path | str) -> str:
    return f"evaluator-{Path(corpus_name(db)).stem}"


def _llm_labeller(settings: Settings, events: Events) -> Labeller | None:
    from crag_edge.grading.labeller import LlmLabeller

    try:
        return LlmLabeller.from_settings(settings)
    except (LlmUnavailableError, ModelNotInstalledError, FileNotFoundError, ValueError) as exc:
        events.note(f"LLM labels off: {exc}; using heuristic pseudo-queries and hard labels")
        return None


def _file_digest(path: Path | None) -> str | None:
    return None if path is None else hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class BaseModel:
    """The embedder the evaluator starts from, and the tokenizer document it will ship with."""

    dir: Path
    tokenizer_doc: dict[str, Any]
    vocab_rows: list[int] | None


@dataclass(frozen=True)
class LabelledPairs:
    """The labelled pairs, split by unit into training and validation."""

    pairs: list[TrainPair]
    train: list[TrainPair]
    validation: list[TrainPair]
    chunks: int
    complete: bool
    llm: str | None


def train_evaluator(
    settings: Settings, options: TrainOptions, events: Events | None = None
) -> dict[str, Any]:
    """Run every stage; returns the report also written to `<out>/report.json`."""
    require_torch()
    events = events or NoEvents()
    started = time.monotonic()
    deadline = started + options.budget_minutes * 60
    options.out.mkdir(parents=True, exist_ok=True)
    human: Sequence[Pair] = read_pairs(options.labels) if options.labels else []
    base = base_model(settings, options)
    labels = _label(settings, options, events, human, started)
    report = fit_and_release(settings, options, base, labels, events, deadline)
    if options.register:
        events.stage("register", None)
        folder = Path(report["release_dir"])
        report["registered"] = _register(settings, options, report["model_id"], folder)
    report["seconds_total"] = round(time.monotonic() - started, 1)
    (options.out / REPORT_FILE).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return report


def fit_and_release(
    settings: Settings,
    options: TrainOptions,
    base: BaseModel,
    labels: LabelledPairs,
    events: Events,
    deadline: float,
) -> dict[str, Any]:
    """Fine-tune on `labels.train`, export ONNX + int8, check the graphs against torch on
    `labels.validation` and write the release folder; the report says how it went. Any
    labelled pairs will do (the support model's come from its own recipe script)."""
    checkpoint = options.out / CHECKPOINT_DIR
    model, tokenizer = _start_model(options, base, labels.train, checkpoint)
    trained = _train(model, tokenizer, labels.train, options, events, deadline)
    fp32, int8 = _export(model, base, checkpoint, options.out, events)
    checks = _check_export(model, tokenizer, labels, fp32, int8, checkpoint, options.threads)
    report = _report(settings, options, labels, model, trained, (fp32, int8), checks)
    _release(report, int8, checkpoint, options.out)
    return report


def base_model(settings: Settings, options: TrainOptions) -> BaseModel:
    """The base embedder's folder and tokenizer; option errors surface here, not after the
    slow labelling."""
    from crag_edge.training.model import ARCHITECTURES

    base_spec = load_manifest(settings.models.model_dir).get(settings.models.embedder)
    base_dir = model_path(settings.models.model_dir, base_spec)
    base_config = json.loads((base_dir / "config.json").read_text(encoding="utf-8"))
    if not 1 <= options.layers <= base_config["num_hidden_layers"]:
        raise TrainingInputError(f"--layers must be 1-{base_config['num_hidden_layers']}")
    if options.architecture not in ARCHITECTURES:
        raise TrainingInputError(f"--architecture must be one of {', '.join(ARCHITECTURES)}")
    if not MIN_LENGTH <= options.max_length <= base_config["max_position_embeddings"]:
        raise TrainingInputError(
            f"--max-length must be {MIN_LENGTH}-{base_config['max_position_embeddings']}"
        )
    tokenizer_doc: dict[str, Any] = json.loads(
        (base_dir / "tokenizer.json").read_text(encoding="utf-8")
    )
    vocab_rows = None
    if options.vocab_size is not None:
        tokenizer_doc, vocab_rows = prune_tokenizer(tokenizer_doc, options.vocab_size)
    if options.architecture == "segment":
        tokenizer_doc = segment_pair_template(tokenizer_doc)
    return BaseModel(base_dir, tokenizer_doc, vocab_rows)


def _label(
    settings: Settings,
    options: TrainOptions,
    events: Events,
    human: Sequence[Pair],
    started: float,
) -> LabelledPairs:
    """Label pairs from the corpus (and `human`'s), appended to the labels file as they come;
    at most `LABEL_SHARE` of the budget."""
    with Engine.open(options.db, settings, readonly=True) as engine:
        labeller = _llm_labeller(settings, events) if options.llm_labels else None
        llm = labeller.name if labeller else None
        label_options = LabelOptions(options.max_pairs, options.negatives, seed=options.seed)
        identity = {
            "db": shown_location(absolute_location(options.db)),
            "labels_sha256": _file_digest(options.labels),
            "llm": llm,
            "negatives": label_options.negatives,
            "pool": label_options.pool,
            "seed": label_options.seed,
        }
        store = LabelStore(options.out / LABELS_FILE, identity)
        builder = PairBuilder(engine.corpus, engine.retriever, label_options, labeller)
        chunks = builder.chunk_count
        events.stage("label pairs", options.max_pairs)
        events.update(len(store.pairs))
        complete = label_corpus(
            builder,
            human,
            store,
            deadline=started + LABEL_SHARE * options.budget_minutes * 60,
            on_unit=events.update,
        )
    if not complete:
        events.note(
            f"labelling stopped at the budget with {len(store.pairs)} pairs; "
            "rerun the same command to label more (finished units are kept)"
        )
    pairs = store.pairs
    train = [p for p in pairs if not is_validation(p.unit)]
    if not train:
        raise ValueError(f"no training pairs could be made from {shown_location(options.db)}")
    validation = [p for p in pairs if is_validation(p.unit)]
    return LabelledPairs(pairs, train, validation, chunks, complete, llm)


def _start_model(
    options: TrainOptions, base: BaseModel, train: Sequence[TrainPair], checkpoint: Path
) -> tuple[Evaluator, Tokenizer]:
    """The untrained evaluator and its tokenizer, saved to `checkpoint`."""
    from crag_edge.grading import fit_platt
    from crag_edge.training.model import (
        SegmentScorer,
        from_pretrained,
        save_checkpoint,
        start_head_at,
    )
    from crag_edge.training.trainer import encode, predict_logits

    checkpoint.mkdir(parents=True, exist_ok=True)
    model = from_pretrained(
        base.dir,
        layers=options.layers,
        vocab_rows=base.vocab_rows,
        max_positions=max(options.max_length, MAX_LENGTH),  # what inference may read
        seed=options.seed,
        architecture=options.architecture,
    )
    save_checkpoint(model, base.tokenizer_doc, checkpoint)  # the tokenizer the runtime will load
    tokenizer = plain_tokenizer(checkpoint / "tokenizer.json")
    tokenizer.enable_truncation(options.max_length, strategy="longest_first")
    if isinstance(model, SegmentScorer):
        # Untrained, it computes the embedder's cosine: start from that cosine's calibration.
        sample = train[:HEAD_FIT_PAIRS]
        cosine = predict_logits(model, encode(tokenizer, sample))
        fitted = fit_platt(cosine, [float(p.label >= 0.5) for p in sample])
        start_head_at(model, fitted.a, fitted.b)
    return model, tokenizer


def _train(
    model: Evaluator,
    tokenizer: Tokenizer,
    train: Sequence[TrainPair],
    options: TrainOptions,
    events: Events,
    deadline: float,
) -> TrainReport:
    """Fine-tune until done or `deadline`, resuming from the training state in `out`."""
    import torch

    from crag_edge.training.trainer import TrainConfig, Trainer, encode, fingerprint

    torch.set_num_threads(options.threads)
    config = TrainConfig(
        batch_size=options.batch_size,
        learning_rate=options.learning_rate,
        epochs=options.epochs,
        max_length=options.max_length,
        seed=options.seed,
    )
    trainer = Trainer(
        model,
        encode(tokenizer, train),
        [p.label for p in train],
        config,
        options.out,
        fingerprint(config, model, train),
    )
    events.stage("train", trainer.planned_steps)
    result = trainer.train(deadline, on_step=lambda step, total, _loss: events.update(step, total))
    if not result.complete:
        events.note(
            f"training stopped at step {result.steps_done} of {result.total_steps} (budget); "
            "rerun the same command to continue from the checkpoint"
        )
    return result


def _export(
    model: Evaluator, base: BaseModel, checkpoint: Path, out: Path, events: Events
) -> tuple[Path, Path]:
    """The trained model saved to `checkpoint`, then as fp32 and int8 ONNX graphs."""
    from crag_edge.training import export
    from crag_edge.training.model import save_checkpoint

    events.stage("export ONNX + int8", None)
    save_checkpoint(model, base.tokenizer_doc, checkpoint)
    return export.export_onnx(checkpoint, out)


def _check_export(
    model: Evaluator,
    tokenizer: Tokenizer,
    labels: LabelledPairs,
    fp32: Path,
    int8: Path,
    checkpoint: Path,
    threads: int,
) -> dict[str, Any]:
    """How closely the graphs agree with the trained model (an fp32 graph that disagrees is
    refused), the validation AUCs, and the int8 graph's latency."""
    from crag_edge.training import export
    from crag_edge.training.trainer import encode, predict_logits

    checked = (labels.validation or labels.train)[:MAX_CHECK_PAIRS]
    check_encodings = encode(tokenizer, checked)
    reference = predict_logits(model, check_encodings)
    checks: dict[str, Any] = {
        "pairs_checked": len(checked),
        "onnx_fp32_max_abs_diff": export.agreement(
            reference, export.onnx_logits(fp32, check_encodings, threads)
        ),
        "onnx_int8_max_abs_diff": export.agreement(
            reference, export.onnx_logits(int8, check_encodings, threads)
        ),
    }
    if checks["onnx_fp32_max_abs_diff"] > export.MAX_FP32_DIFF:
        raise export.ExportError(
            f"the ONNX graph disagrees with the trained model by "
            f"{checks['onnx_fp32_max_abs_diff']:.3g} (limit {export.MAX_FP32_DIFF:g})"
        )
    if labels.validation:
        val_encodings = encode(tokenizer, labels.validation)
        val_labels = [p.label for p in labels.validation]
        checks["validation_auc_torch"] = export.auc(
            predict_logits(model, val_encodings), val_labels
        )
        checks["validation_auc_int8"] = export.auc(
            export.onnx_logits(int8, val_encodings, threads), val_labels
        )
    sample = (labels.validation or labels.train)[: export.LATENCY_PAIRS]
    checks["latency_ms_20_pairs"] = export.latency_ms(
        int8, checkpoint / "tokenizer.json", sample[0].query, [p.passage for p in sample]
    )
    return checks


def _report(
    settings: Settings,
    options: TrainOptions,
    labels: LabelledPairs,
    model: Evaluator,
    trained: TrainReport,
    graphs: tuple[Path, Path],
    checks: dict[str, Any],
) -> dict[str, Any]:
    """What was trained, on what, how, and how it checked: the model card's source."""
    import torch

    from crag_edge.training.model import parameter_count

    origins: dict[str, int] = {}
    for p in labels.pairs:
        origins[p.origin] = origins.get(p.origin, 0) + 1
    return {
        "model_id": options.model_id or default_model_id(options.db),
        "command": options.command or "(Python API)",
        "data_license": options.data_license,
        "data": {
            "db": corpus_name(options.db),
            "chunks": labels.chunks,
            "labels_file": options.labels.name if options.labels else None,
            "llm": labels.llm,
            "pairs": len(labels.pairs),
            "train_pairs": len(labels.train),
            "validation_pairs": len(labels.validation),
            "complete": labels.complete,
            "origins": origins,
        },
        "training": {
            "base_model": settings.models.embedder,
            "architecture": options.architecture,
            "layers": options.layers,
            "vocab_size": model.config["vocab_size"],
            "max_positions": model.config["max_position_embeddings"],
            "parameters": parameter_count(model),
            "learning_rate": options.learning_rate,
            "batch_size": options.batch_size,
            "max_length": options.max_length,
            "epochs": options.epochs,
            "threads": options.threads,
            "seed": options.seed,
            "torch": torch.__version__,
            "python": platform.python_version(),
            **{k: v for k, v in asdict(trained).items() if k != "losses"},
        },
        "size_bytes": {"fp32": graphs[0].stat().st_size, "int8": graphs[1].stat().st_size},
        "checks": checks,
    }


def _release(report: dict[str, Any], int8: Path, checkpoint: Path, out: Path) -> Path:
    """Write the model card and copy what the runtime loads into the release folder."""
    from crag_edge.training import export

    (out / export.CARD).write_text(export.model_card(report), encoding="utf-8")
    files = {
        EMBEDDER_ONNX_INT8: int8,
        "tokenizer.json": checkpoint / "tokenizer.json",
        "config.json": checkpoint / "config.json",
        export.CARD: out / export.CARD,
    }
    folder = export.release(out, files)
    report["release_dir"] = str(folder)
    report["release_bytes"] = sum((folder / n).stat().st_size for n in export.RELEASE_FILES)
    return folder


def _register(
    settings: Settings, options: TrainOptions, model_id: str, folder: Path
) -> dict[str, Any]:
    """Add the release to the local manifest and install it, so `grading_tiers` can use it."""
    from crag_edge.training import export

    description = (
        f"crag-edge evaluator trained on {corpus_name(options.db)}: MiniLM L{options.layers} "
        f"{options.architecture} scorer, int8"
    )
    spec = export.register(
        settings.models.model_dir, model_id, folder, options.data_license, description
    )
    pulled = pull_model(spec, settings.models.model_dir)
    return {
        "model_dir": str(settings.models.model_dir),
        "files": {f.name: f.state for f in pulled.files},
    }
