"""Build the offline bundle (`make bundle`): everything an air-gapped machine needs to install
crag-edge with Python 3.11 alone, in one archive.

    dist/crag-edge-bundle-<version>-<platform>.tar.gz
      install.sh               installs into a new virtual environment, no network used
      requirements.txt         every wheel pinned by version and sha256 (pip --require-hashes)
      wheelhouse/              crag-edge, a portable llama-cpp-python, every runtime dependency
      models/<id>/...          the default models, each file checked against the manifest
      models/models.txt        the model ids install.sh installs and verifies
      models/manifest.toml     the manifest: each file's size and sha256
      models/SHA256SUMS        the same hashes for `sha256sum -c`, without Python
      sample_corpus/           a few documents to try it on
      bundle.json              what was built: version, platform, extras, models, wheels

Run with the environment's Python 3.11 (the wheels are resolved for the interpreter that runs
this script). The llama-cpp-python wheel must be the portable build (`make llama-wheel`): a
wheel compiled for this CPU alone would crash with an illegal instruction elsewhere.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

from crag_edge.models import provision
from crag_edge.models.manifest import ModelSpec, load_manifest

ROOT = Path(__file__).resolve().parent.parent
PACKAGED_MANIFEST = ROOT / "crag_edge" / "models" / "manifest.toml"
CPU_VARIANT = "llama_cpp/lib/libggml-cpu-"


class BundleError(RuntimeError):
    """The bundle cannot be built as asked; the message says what to do."""


def platform_tag() -> str:
    """The interpreter and platform the wheelhouse is resolved for, e.g. `cp311-linux_x86_64`."""
    version = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{version}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def project_version() -> str:
    with (ROOT / "pyproject.toml").open("rb") as handle:
        return str(tomllib.load(handle)["project"]["version"])


def portable_llama_wheel(folder: Path) -> Path:
    """The one llama-cpp-python wheel in `folder`, refused unless it carries CPU variants."""
    wheels = sorted(folder.glob("llama_cpp_python-*.whl"))
    if len(wheels) != 1:
        raise BundleError(
            f"expected one llama-cpp-python wheel in {folder}, found {len(wheels)}: "
            "run `make llama-wheel`"
        )
    with zipfile.ZipFile(wheels[0]) as archive:
        variants = [n for n in archive.namelist() if n.startswith(CPU_VARIANT)]
    if not variants:
        raise BundleError(
            f"{wheels[0].name} is not a portable build (no {CPU_VARIANT}<variant>.so): it runs "
            "only on CPUs like this one; delete it and run `make llama-wheel`"
        )
    return wheels[0]


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], check=True)


def fill_wheelhouse(wheelhouse: Path, llama_wheel: Path, extras: str) -> Path:
    """The project's wheel, the portable llama wheel and every dependency of `extras`; returns
    the project's wheel. pip resolves llama-cpp-python to the local wheel only (never its
    source distribution)."""
    local = wheelhouse.parent / "local-wheels"
    pip("wheel", "--quiet", "--no-deps", "--wheel-dir", str(local), str(ROOT))
    (project,) = local.glob("crag_edge-*.whl")
    shutil.copy2(llama_wheel, local)
    pip(
        "wheel",
        "--quiet",
        "--wheel-dir",
        str(wheelhouse),
        "--find-links",
        str(local),
        "--only-binary",
        "llama-cpp-python",
        f"crag-edge[{extras}] @ {project.resolve().as_uri()}",
    )
    shutil.rmtree(local)
    return wheelhouse / project.name


def write_requirements(wheelhouse: Path, project: Path, extras: str, out: Path) -> list[str]:
    """One pinned, hashed line per wheel: `pip install --require-hashes` then installs exactly
    these files and refuses a dependency missing from the list."""
    lines = []
    for wheel in sorted(wheelhouse.glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if wheel == project:
            name = f"{name}[{extras}]"
        lines.append(f"{name}=={version} --hash=sha256:{provision.sha256_of(wheel)}")
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [line.split(" ")[0] for line in lines]


def copy_models(specs: list[ModelSpec], model_dir: Path, target: Path) -> list[str]:
    """Copy every file of `specs` after checking it against the manifest, so the bundle never
    carries a damaged model; returns the `SHA256SUMS` lines."""
    sums = []
    for spec in specs:
        source = provision.model_path(model_dir, spec)
        report = provision.verify_model(spec, model_dir)
        bad = [f"{f.name} ({f.state})" for f in report.files if f.state != "ok"]
        if bad:
            raise BundleError(
                f"{spec.model_id} in {source} is incomplete: {', '.join(bad)}; run "
                f"`crag-edge models pull {spec.model_id}` first"
            )
        folder = target / spec.model_id
        folder.mkdir(parents=True)
        for mf in spec.files:
            shutil.copy2(source / mf.name, folder / mf.name)
            sums.append(f"{mf.sha256}  {spec.model_id}/{mf.name}")
    return sums


def write_models(model_dir: Path, target: Path) -> list[str]:
    """The default models, the manifest, the ids to install and `SHA256SUMS`."""
    specs = load_manifest(model_dir).defaults()
    sums = copy_models(specs, model_dir, target)
    shutil.copy2(PACKAGED_MANIFEST, target / "manifest.toml")
    ids = [spec.model_id for spec in specs]
    (target / "models.txt").write_text("\n".join(ids) + "\n", encoding="utf-8")
    (target / "SHA256SUMS").write_text("\n".join(sums) + "\n", encoding="utf-8")
    return ids


def archive(stage: Path, out: Path) -> None:
    """Gzip level 1: the models are already compressed and dominate the size."""
    partial = out.with_name(out.name + ".partial")
    with tarfile.open(partial, "w:gz", compresslevel=1) as tar:
        tar.add(stage, arcname=stage.name)
    partial.replace(out)


def build(dist: Path, llama_wheels: Path, model_dir: Path, extras: str) -> Path:
    name = f"crag-edge-bundle-{project_version()}-{platform_tag()}"
    stage = dist / name
    shutil.rmtree(stage, ignore_errors=True)
    llama_wheel = portable_llama_wheel(llama_wheels)
    project = fill_wheelhouse(stage / "wheelhouse", llama_wheel, extras)
    pins = write_requirements(stage / "wheelhouse", project, extras, stage / "requirements.txt")
    models = write_models(model_dir, stage / "models")
    shutil.copytree(ROOT / "sample_corpus", stage / "sample_corpus")
    shutil.copy2(ROOT / "packaging" / "bundle" / "install.sh", stage / "install.sh")
    facts = {"name": name, "extras": extras, "models": models, "wheels": pins}
    (stage / "bundle.json").write_text(json.dumps(facts, indent=2) + "\n", encoding="utf-8")
    out = dist / f"{name}.tar.gz"
    archive(stage, out)
    shutil.rmtree(stage)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--llama-wheels", type=Path, required=True, help="folder of the wheel")
    parser.add_argument("--model-dir", type=Path, default=ROOT / "models")
    parser.add_argument("--extras", default="llm,server,tui,office")
    args = parser.parse_args(argv)
    try:
        out = build(args.dist, args.llama_wheels, args.model_dir, args.extras)
    except (BundleError, subprocess.CalledProcessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"{out} ({out.stat().st_size / 1e9:.2f} GB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
