"""`crag-edge evaluator ...`: a typer sub-app, mounted by `crag_edge.cli`.

Kept out of `crag_edge/cli.py` so that the main CLI never imports training code; nothing
here imports torch until `train` runs.
"""

from __future__ import annotations

import json
import math
import shlex
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from crag_edge.config import Settings
from crag_edge.console.commands import command
from crag_edge.console.errors import EXPECTED_ERRORS, fail
from crag_edge.console.output import stderr_bar, tell
from crag_edge.locations import corpus_name, is_database_url, parse_location, shown_location
from crag_edge.models.cross_encoder import MIN_LENGTH
from crag_edge.store import CorpusNotFoundError
from crag_edge.training import TorchMissingError, TrainingInputError
from crag_edge.training.data import LabelStoreError
from crag_edge.training.pipeline import DEFAULT_LICENSE, TrainOptions, train_evaluator

evaluator_app = typer.Typer(
    help="Train the retrieval evaluator (the cascade's cross-encoder) on your own corpus.",
    no_args_is_help=True,
)
EXPECTED: tuple[type[Exception], ...] = (
    *EXPECTED_ERRORS,
    TorchMissingError,
    TrainingInputError,
    LabelStoreError,
)


@evaluator_app.callback()
def evaluator() -> None:
    """Train the retrieval evaluator (the cascade's cross-encoder) on your own corpus."""


class _RichEvents:
    """Pipeline progress as one rich bar per stage."""

    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.task: TaskID | None = None

    def stage(self, name: str, total: int | None) -> None:
        if self.task is not None:
            self.bar.stop_task(self.task)
        self.task = self.bar.add_task(name, total=total)

    def update(self, completed: int, total: int | None = None) -> None:
        if self.task is not None:
            if total is not None:
                self.bar.update(self.task, total=total)
            self.bar.update(self.task, completed=completed)

    def note(self, message: str) -> None:
        self.bar.console.print(f"  {message}")


def _positive(value: float) -> float:
    """A number of minutes, epochs or a rate: above zero and finite (`nan` parses as a float)."""
    if not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"must be a finite number above 0; got {value}")
    return value


@command(evaluator_app, "train")
def train(
    ctx: typer.Context,
    db: Annotated[
        Path,
        typer.Option(
            "--db",
            help="Corpus to draw pairs from: a file or postgresql://... (default: "
            "CRAG_EDGE_DB_URL).",
            parser=parse_location,
            show_default=False,
        ),
    ],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Output folder (default <db>.evaluator beside the file, or <database>.evaluator "
            "here for a database).",
        ),
    ] = None,
    labels: Annotated[
        Path | None,
        typer.Option("--labels", help='Human labels, JSON Lines {"query","passage","label"}.'),
    ] = None,
    budget_minutes: Annotated[
        float,
        typer.Option(
            "--budget-minutes", help="Wall-clock budget for the whole run.", callback=_positive
        ),
    ] = 30.0,
    max_pairs: Annotated[
        int, typer.Option("--max-pairs", min=1, help="Stop labelling here.")
    ] = 6000,
    layers: Annotated[
        int, typer.Option("--layers", min=1, max=6, help="Keep the first L MiniLM layers (1-6).")
    ] = 4,
    architecture: Annotated[
        str,
        typer.Option(
            "--architecture",
            help="segment: starts as the embedder's cosine, generalises best (measured); "
            "cross: joint attention, a classifier on [CLS].",
        ),
    ] = "segment",
    vocab_size: Annotated[
        int | None,
        typer.Option(
            "--vocab-size", min=1000, help="Prune the vocabulary to N tokens (smaller model)."
        ),
    ] = None,
    negatives: Annotated[
        int, typer.Option("--negatives", min=0, help="Hard negatives mined per query.")
    ] = 3,
    epochs: Annotated[
        float, typer.Option("--epochs", help="Passes over the pairs.", callback=_positive)
    ] = 2.0,
    learning_rate: Annotated[
        float, typer.Option("--lr", help="Peak learning rate.", callback=_positive)
    ] = 6e-5,
    max_length: Annotated[
        int,
        typer.Option(
            "--max-length",
            min=MIN_LENGTH,
            help="Tokens per pair in training (inference reads 256).",
        ),
    ] = 256,
    llm_labels: Annotated[
        bool,
        typer.Option(
            "--llm-labels/--no-llm-labels",
            help="Let the local LLM write queries and judge pairs (slow; used when installed).",
        ),
    ] = True,
    model_id: Annotated[
        str | None, typer.Option("--model-id", help="Manifest id (default evaluator-<db>).")
    ] = None,
    register: Annotated[
        bool,
        typer.Option("--register/--no-register", help="Install it as the cascade's cross-encoder."),
    ] = True,
    data_license: Annotated[
        str, typer.Option("--data-license", help="Licence/attribution of the training data.")
    ] = DEFAULT_LICENSE,
    seed: Annotated[int, typer.Option("--seed")] = 13,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Label pairs from the corpus, fine-tune a MiniLM cross-encoder, export ONNX + int8,
    write a model card and register it. Rerun the same command to resume."""
    settings: Settings = ctx.obj if isinstance(ctx.obj, Settings) else Settings.load()
    # Every option of this command that names a field of TrainOptions, under the same name.
    given = {f.name: ctx.params[f.name] for f in fields(TrainOptions) if f.name in ctx.params}
    options = TrainOptions(**given | {"out": out or default_out(db), "model_id": model_id or ""})
    options = replace(options, command=reproduce_command(options))
    try:
        if not is_database_url(db) and not Path(db).is_file():
            raise CorpusNotFoundError(
                db, f"no corpus here: build one with `crag-edge ingest --db {db} PATH...`"
            )
        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn())
        times = (TimeElapsedColumn(), TimeRemainingColumn())
        with stderr_bar(*columns, *times, quiet=as_json, transient=False) as bar:
            report = train_evaluator(settings, options, _RichEvents(bar))
    except EXPECTED as exc:
        raise fail(exc) from None
    except KeyboardInterrupt:
        tell(("interrupted", "yellow"), ": rerun the same command to resume")
        raise typer.Exit(130) from None
    if as_json:
        sys.stdout.write(json.dumps(report, indent=2) + "\n")
        return
    _print_summary(report)


def default_out(db: Path | str) -> Path:
    """Where the run writes when `--out` is not given: beside a corpus file, or in the working
    directory for a database (named after it)."""
    if is_database_url(db):
        return Path(f"{corpus_name(db)}.evaluator")
    return Path(db).with_name(f"{Path(db).stem}.evaluator")


def reproduce_command(o: TrainOptions) -> str:
    """The command with every setting spelled out, for the model card: the defaults may
    change between versions, the card must not."""
    args = ["crag-edge", "evaluator", "train", "--db", shown_location(o.db), "--out", str(o.out)]
    if o.labels:
        args += ["--labels", str(o.labels)]
    args += ["--budget-minutes", f"{o.budget_minutes:g}", "--max-pairs", str(o.max_pairs)]
    args += ["--layers", str(o.layers), "--architecture", o.architecture]
    if o.vocab_size is not None:
        args += ["--vocab-size", str(o.vocab_size)]
    args += ["--negatives", str(o.negatives), "--epochs", f"{o.epochs:g}"]
    args += ["--lr", f"{o.learning_rate:g}", "--max-length", str(o.max_length)]
    args += ["--seed", str(o.seed)]
    args.append("--llm-labels" if o.llm_labels else "--no-llm-labels")
    if o.model_id:
        args += ["--model-id", o.model_id]
    if o.data_license != DEFAULT_LICENSE:
        args += ["--data-license", o.data_license]
    return shlex.join(args)


def _print_summary(report: dict[str, Any]) -> None:
    checks, train = report["checks"], report["training"]
    tell(
        ("trained", "green"),
        f" {report['model_id']}: {report['data']['pairs']} pairs, "
        f"{train['steps_done']}/{train['total_steps']} steps in {train['seconds']} s; "
        f"validation AUC {checks.get('validation_auc_int8')} (int8), "
        f"ONNX vs torch {checks['onnx_fp32_max_abs_diff']:.1e}, "
        f"{checks['latency_ms_20_pairs']} ms / 20 pairs; "
        f"{report['release_bytes'] / 1e6:.1f} MB in {report['release_dir']}",
    )
    if "registered" in report:
        tell(
            f"registered as cross-encoder {report['model_id']!r} in "
            f"{report['registered']['model_dir']}"
        )
