"""The commands that build and look after a corpus: `ingest` (and `--watch`), `check`,
`calibrate` and `cache clear`."""

from __future__ import annotations

import contextlib
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from crag_edge.console.errors import friendly_errors
from crag_edge.console.options import (
    DbOption,
    JsonOption,
    groups_option,
    settings_of,
)
from crag_edge.console.output import (
    counting_bar,
    fmt_number,
    out,
    print_json,
    say,
    stage_bar,
    tell,
)
from crag_edge.engine import Engine
from crag_edge.grading import corpus_calibration
from crag_edge.groups import folder_groups, watched_folders
from crag_edge.ingest import Format, IngestReport
from crag_edge.ingest.exclude import checked_globs
from crag_edge.ingest.rate import Frame, IngestMeter
from crag_edge.ingest.watch import FolderWatcher
from crag_edge.store.factory import open_corpus
from crag_edge.text_boundary import printable_path


def _globs(globs: list[str] | None) -> list[str] | None:
    """`--exclude` globs, each one that cannot match a path a usage error (exit 2)."""
    try:
        return None if globs is None else list(checked_globs(globs))
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--exclude") from None


@friendly_errors
def ingest(
    ctx: typer.Context,
    inputs: Annotated[
        list[Path],
        typer.Argument(
            help="Files and folders (txt, md, html, pdf, docx, pptx, xlsx, ods, csv, odt, "
            "odp, epub, eml, mbox, rtf), or BEIR corpus.jsonl files. With --watch, a folder "
            "may be given as DIR=a,b: the access groups of its new files (DIR=: untagged)."
        ),
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
            "keep their groups and new ones are untagged: visible to every caller. With "
            "--watch: the default groups of the folders given without =GROUPS, given to every "
            "new file (stored documents, and files renamed or moved, even from another "
            "folder, keep theirs).",
        ),
    ] = None,
    exclude: Annotated[
        list[str] | None,
        typer.Option(
            "--exclude",
            metavar="GLOB",
            callback=_globs,
            help="Leave out the files a glob matches at the end of their path: a name "
            "('*.fr.html', 'index.html') or a folder's files ('toc/*'); repeatable. With "
            "--prune (and --watch), stored documents of excluded files are deleted.",
        ),
    ] = None,
    reread: Annotated[
        bool,
        typer.Option(
            "--reread",
            help="Read every file again, even those unchanged since they were ingested, and "
            "index anew each whose text now reads differently (after an upgrade that reads "
            "a format better); access groups are kept.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Add files to a corpus (created if missing). Incremental: unchanged files cost nothing."""
    tags = frozenset() if groups is not None and not groups.strip() else groups_option(groups)
    if watch and reread:
        raise typer.BadParameter("reads once; it does not go with --watch", param_hint="--reread")
    if watch:
        _watch_folders(ctx, inputs, db, fmt, as_json, tags, exclude or [])
        return
    meter = IngestMeter()
    with (
        Engine.open(db, settings_of(ctx), create=True) as engine,
        stage_bar(as_json) as bar,
    ):
        task = bar.add_task("reading files", total=None)

        def show(frame: Frame) -> None:
            total = max(frame.total, frame.done, 1) if frame.finished else frame.total or None
            completed = total if frame.finished else frame.done
            bar.update(task, completed=completed, total=total, description=frame.describe())

        report = engine.ingest(
            inputs,
            fmt=fmt,
            prune=prune,
            progress=lambda event: show(meter.update(event)),
            groups=tags,
            exclude=exclude or [],
            reread=reread,
        )
        show(meter.final(report))
    _print_ingest_report(report, as_json)
    if nothing := report.nothing_indexed():
        if not as_json:
            tell(("error:", "red"), f" {nothing}")
        raise typer.Exit(1)


def _watch_folders(
    ctx: typer.Context,
    inputs: list[Path],
    db: Path,
    fmt: str,
    as_json: bool,
    groups: frozenset[str] | None,
    exclude: list[str],
) -> None:
    """`ingest --watch`: sync the folders now and after every change; Ctrl+C ends it (exit 0)
    with a summary. Each sync that changed or failed something prints its ingest report."""
    if fmt != "auto" or as_json:
        raise typer.BadParameter("takes neither --format beir nor --json", param_hint="--watch")
    folders, defaults = _folders_and_groups(inputs, groups)
    totals, syncs = IngestReport(), 0
    with Engine.open(db, settings_of(ctx), create=True) as engine:

        def sync(touched: list[Path]) -> None:
            nonlocal syncs
            report = engine.ingest(touched, prune=True, default_groups=defaults, exclude=exclude)
            syncs += 1
            totals.added += report.added
            totals.updated += report.updated
            totals.pruned += report.pruned
            totals.errors += report.errors
            if report.added or report.updated or report.retagged or report.pruned or report.errors:
                say(f"synced {', '.join(map(printable_path, touched))}")
                _print_ingest_report(report, as_json=False)

        watcher = FolderWatcher(folders, sync, notice=tell)
        tell(f"watching {', '.join(map(printable_path, folders))} (Ctrl+C stops)")
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl+C is how watching ends
            watcher.run()
    say(
        f"stopped watching after {syncs} syncs: added {totals.added}, updated "
        f"{totals.updated}, pruned {totals.pruned}, errors {len(totals.errors)}"
    )


def _folders_and_groups(
    inputs: list[Path], groups: frozenset[str] | None
) -> tuple[list[Path], dict[Path, frozenset[str]]]:
    """The `--watch` folders (each `DIR` or `DIR=GROUPS`) and the groups of their new files
    by folder: a folder's own, else `groups` (`--groups`), else none."""
    try:
        given = [
            (Path(name).expanduser(), tags)
            for name, tags in watched_folders(map(str, inputs), groups)
        ]
        if not_folders := [str(folder) for folder, _ in given if not folder.is_dir()]:
            raise ValueError(f"not a folder: {', '.join(not_folders)}")
        pairs = [(folder.resolve(), tags) for folder, tags in given if tags is not None]
        return [folder for folder, _ in given], folder_groups(pairs)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--watch") from None


@friendly_errors
def check(db: DbOption, as_json: JsonOption = False) -> None:
    """Verify a corpus without changing it (no model loads): SQLite's quick_check of every
    page and index, and every chunk in each search index. Exit 1 names the first problem."""
    with open_corpus(db, readonly=True) as corpus:
        report = corpus.check()
    if as_json:
        print_json(report)
        return
    say(f"ok: {report['path']} ({report['chunks']} chunks, quick_check ok)")


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
            say(f"{'removed the' if removed else 'no'} calibration fit in {printable_path(db)}")
        return
    with Engine.open(db, settings_of(ctx)) as engine, counting_bar("questions", as_json) as bar:
        task = bar.add_task("calibrate", total=questions)
        result = engine.calibrate(questions, on_question=lambda n: bar.update(task, completed=n))
    if as_json:
        print_json(result)
        return
    _print_calibration(result, db)


def _print_calibration(result: dict[str, Any], db: Path) -> None:
    say(
        f"{result['questions']} pseudo-questions, {result['pairs']} judged pairs "
        f"({result['relevant_share']:.0%} relevant by the judge)"
    )
    table = Table("tier", "AUC", "a, b", "log-loss", "mean p relevant", "mean p other", "used")
    for tier, row in result["tiers"].items():
        before, after = row["before"], row["after"]
        table.add_row(
            tier,
            fmt_number(row["auc"]),
            f"{row['a']:.2f}, {row['b']:.2f}",
            *(
                f"{fmt_number(before[key])} → {fmt_number(after[key])}"
                for key in ("log_loss", "mean_relevant", "mean_other")
            ),
            "yes" if row["stored"] else "no: the settings' calibration",
        )
    out.print(table)
    stored = [tier for tier, row in result["tiers"].items() if row["stored"]]
    where = printable_path(db)
    if stored:
        say(f"{', '.join(stored)} fit stored in {where}; used by default for this corpus")
    else:
        say(
            f"no tier ranks the judge's labels (AUC < {corpus_calibration.MIN_TIER_AUC}): "
            f"{where} uses the settings' calibration"
        )


@friendly_errors
def cache_clear(db: DbOption, as_json: JsonOption = False) -> None:
    """Delete every cached model score (they are also dropped with their chunks on ingest)."""
    with open_corpus(db) as corpus:
        removed = corpus.score_cache().clear()
    if as_json:
        print_json({"removed": removed})
        return
    say(f"removed {removed} cached scores from {printable_path(db)}")


def _print_ingest_report(report: IngestReport, as_json: bool) -> None:
    if as_json:
        print_json(asdict(report) | {"chunks_per_second": round(report.chunks_per_second, 2)})
        return
    say(
        f"added {report.added}, updated {report.updated}, unchanged {report.unchanged}, "
        f"retagged {report.retagged}, pruned {report.pruned}, skipped {len(report.skipped)}, "
        + (f"excluded {report.excluded}, " if report.excluded else "")
        + f"errors {len(report.errors)}; "
        f"{report.chunks_written:,} chunks in {report.seconds:.1f} s "
        f"({report.chunks_per_second:.1f} chunks/s)"
        + (
            f"; stored the evaluator's readings of {report.passages_encoded:,} passages"
            if report.passages_encoded
            else ""
        )
    )
    for source, message in report.skipped:
        tell(("skipped", "yellow"), f" {source}: {message}")
    for reason, count in report.skipped_by_reason().items():
        if count > 1:
            tell(("skipped", "yellow"), f" {count} files: {reason}")
    for source, message in report.warnings:
        tell(("warning", "yellow"), f" {source}: {message}")
    for source, message in report.errors:
        tell(("failed", "red"), f" {source}: {message}")
