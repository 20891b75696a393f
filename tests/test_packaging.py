"""The offline bundle's parts and the service units: where an install finds its models, the
portable llama.cpp build's loader, the bundle builder's refusals and pins, and the systemd
units against systemd's own checker. The whole air-gapped install is checked by
scripts/check_offline_bundle.sh (minutes, root, a built bundle: not part of this suite)."""

from __future__ import annotations

import ctypes
import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from crag_edge.config import PREFIX_MODEL_DIR, default_model_dir
from crag_edge.models.llama_backends import BackendLoadError, _loaded_libggml, load_cpu_backends
from crag_edge.models.llm import LlmUnavailableError, _import_llama_cpp
from scripts.build_bundle import BundleError, portable_llama_wheel, write_requirements

ROOT = Path(__file__).resolve().parent.parent
UNITS = sorted((ROOT / "packaging" / "systemd").glob("*.service"))
INSTALLED_PROGRAM = "/opt/crag-edge/bin/crag-edge"


def test_a_checkout_keeps_its_models_folder(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "venv" / PREFIX_MODEL_DIR).mkdir(parents=True)
    assert default_model_dir(tmp_path / "crag_edge", tmp_path / "venv") == tmp_path / "models"


def test_an_installed_package_finds_the_models_installed_with_its_environment(
    tmp_path: Path,
) -> None:
    package = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "crag_edge"
    (tmp_path / "venv" / PREFIX_MODEL_DIR).mkdir(parents=True)
    found = default_model_dir(package, tmp_path / "venv")
    assert found == tmp_path / "venv" / "share" / "crag-edge" / "models"


def test_without_installed_models_the_per_user_cache_is_used(tmp_path: Path) -> None:
    package = tmp_path / "venv" / "lib" / "python3.11" / "site-packages" / "crag_edge"
    found = default_model_dir(package, tmp_path / "venv")
    assert found == Path.home() / ".cache" / "crag-edge" / "models"


def fake_llama_cpp(tmp_path: Path, libraries: list[str]) -> SimpleNamespace:
    """A llama_cpp package folder whose lib/ holds files of these names (not libraries)."""
    lib = tmp_path / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    for name in libraries:
        (lib / name).write_bytes(b"not an ELF file")
    return SimpleNamespace(__file__=str(tmp_path / "llama_cpp" / "__init__.py"))


def test_a_damaged_portable_build_is_one_clear_error(tmp_path: Path) -> None:
    package = fake_llama_cpp(tmp_path, ["libggml.so", "libggml-cpu-haswell.so"])
    with pytest.raises(BackendLoadError, match="backend registry"):
        load_cpu_backends(package)


def test_a_native_build_is_left_alone(tmp_path: Path) -> None:
    """No CPU-variant library: nothing is loaded (a broken libggml.so is never touched)."""
    load_cpu_backends(fake_llama_cpp(tmp_path, ["libggml.so", "libggml-cpu.so"]))


def mapped_libggml_files(lib_dir: Path) -> set[str]:
    with open("/proc/self/maps", encoding="utf-8") as maps:
        paths = {Path(line.split(maxsplit=5)[-1].strip()) for line in maps}
    return {
        p.name for p in paths if p.parent == lib_dir.resolve() and p.name.startswith("libggml.")
    }


@pytest.mark.skipif(not Path("/proc/self/maps").is_file(), reason="needs Linux's /proc")
def test_the_backend_registry_opened_is_the_one_llama_cpp_uses() -> None:
    """Opening libggml by another of its names (the wheel holds each as a copy) would load a
    second library with a registry of its own: the CPU variant registered there, llama.cpp
    would still find no backend and refuse every model."""
    llama_cpp = pytest.importorskip("llama_cpp")
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    before = mapped_libggml_files(lib_dir)
    assert len(before) == 1, f"libllama should have loaded one libggml: {before}"
    ctypes.CDLL(str(_loaded_libggml(lib_dir)))
    assert mapped_libggml_files(lib_dir) == before


def test_the_llm_says_the_runtime_is_unavailable_when_its_backends_do_not_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", fake_llama_cpp(tmp_path, ["libggml-cpu-x.so"]))
    with pytest.raises(LlmUnavailableError, match="backend registry"):
        _import_llama_cpp()


def make_wheel(folder: Path, name: str, members: list[str]) -> Path:
    wheel = folder / name
    with zipfile.ZipFile(wheel, "w") as archive:
        for member in members:
            archive.writestr(member, b"")
    return wheel


def test_the_bundle_refuses_a_llama_wheel_built_for_this_cpu_only(tmp_path: Path) -> None:
    native = ["llama_cpp/__init__.py", "llama_cpp/lib/libggml-cpu.so"]
    make_wheel(tmp_path, "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl", native)
    with pytest.raises(BundleError, match="not a portable build"):
        portable_llama_wheel(tmp_path)


def test_the_bundle_takes_the_portable_llama_wheel(tmp_path: Path) -> None:
    members = ["llama_cpp/lib/libggml-cpu-x64.so", "llama_cpp/lib/libggml-cpu-haswell.so"]
    wheel = make_wheel(tmp_path, "llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl", members)
    assert portable_llama_wheel(tmp_path) == wheel


def test_the_bundle_pins_every_wheel_by_version_and_hash(tmp_path: Path) -> None:
    project = make_wheel(tmp_path, "crag_edge-0.1.0-py3-none-any.whl", ["crag_edge/x.py"])
    make_wheel(tmp_path, "numpy-2.3.5-cp311-cp311-manylinux_2_28_x86_64.whl", ["numpy/x.py"])
    out = tmp_path / "requirements.txt"
    write_requirements(tmp_path, project, "llm,tui", out)
    lines = out.read_text().splitlines()
    assert [line.split(" ")[0] for line in lines] == ["crag_edge[llm,tui]==0.1.0", "numpy==2.3.5"]
    assert all(re.fullmatch(r"\S+ --hash=sha256:[0-9a-f]{64}", line) for line in lines)


def systemd_analyze(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze is not installed (Debian: apt-get install systemd)")
    command = ["systemd-analyze", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def runnable_copy(unit: Path, folder: Path) -> Path:
    """The unit with its program pointed at this environment's crag-edge: `verify` checks that
    the program exists, and /opt/crag-edge is where the unit is installed, not this machine."""
    program = Path(sys.prefix) / "bin" / "crag-edge"
    if not program.is_file():
        pytest.skip(f"no crag-edge program in {program.parent} to stand in for the installed one")
    text = unit.read_text(encoding="utf-8")
    assert INSTALLED_PROGRAM in text, f"{unit.name} runs something other than {INSTALLED_PROGRAM}"
    copy = folder / unit.name
    copy.write_text(text.replace(INSTALLED_PROGRAM, str(program)), encoding="utf-8")
    return copy


def test_both_services_have_units() -> None:
    assert [u.name for u in UNITS] == ["crag-edge-serve.service", "crag-edge-watch.service"]


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_the_unit_passes_systemd_analyze_verify(unit: Path, tmp_path: Path) -> None:
    run = systemd_analyze("verify", str(runnable_copy(unit, tmp_path)))
    assert run.returncode == 0 and not run.stderr.strip(), run.stderr


@pytest.mark.parametrize("unit", UNITS, ids=lambda u: u.name)
def test_the_unit_is_hardened(unit: Path, tmp_path: Path) -> None:
    """The directives a deployment relies on, and systemd's own exposure score: at most 2
    ("OK"; 10 is an unhardened service), so that dropping a protection shows up here."""
    text = unit.read_text(encoding="utf-8")
    for directive in [
        "DynamicUser=yes",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "NoNewPrivileges=yes",
        "Restart=on-failure",
    ]:
        assert f"\n{directive}\n" in text, f"{unit.name} lacks {directive}"
    run = systemd_analyze("security", "--offline=yes", str(runnable_copy(unit, tmp_path)))
    score = re.search(r"Overall exposure level for \S+: (\d+\.\d)", run.stdout)
    assert score, run.stdout[-500:] + run.stderr
    assert float(score.group(1)) <= 2.0, run.stdout


def test_the_service_gets_its_token_file_as_a_credential() -> None:
    text = (ROOT / "packaging" / "systemd" / "crag-edge-serve.service").read_text()
    assert "\nLoadCredential=tokens.db:/etc/crag-edge/tokens.db\n" in text
    assert "\nEnvironment=CRAG_EDGE_TOKENS_FILE=%d/tokens.db\n" in text


def test_every_data_file_of_the_package_goes_into_its_wheel() -> None:
    """A file the package reads at run time but the wheel leaves out works in a checkout and
    fails in every real install (the model manifest once did): each non-Python file under
    crag_edge/ must match a `package-data` pattern."""
    with (ROOT / "pyproject.toml").open("rb") as handle:
        patterns = tomllib.load(handle)["tool"]["setuptools"]["package-data"]["crag_edge"]
    package = ROOT / "crag_edge"
    data = [
        p.relative_to(package).as_posix()
        for p in package.rglob("*")
        if p.is_file() and p.suffix not in {".py", ".pyc"} and "__pycache__" not in p.parts
    ]
    assert data, "no data files found under crag_edge/"
    left_out = [f for f in data if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert not left_out, f"not in [tool.setuptools.package-data]: {left_out}"


STUB = """import os, shutil, sys


def main():
    args = sys.argv[1:]
    if args[:2] == ["models", "pull"]:  # copied as a copy keeps them: modes and all
        target = os.path.join(os.environ["CRAG_EDGE_MODEL_DIR"], args[2])
        shutil.copytree(args[args.index("--from") + 1], target)
"""


def stub_bundle(folder: Path) -> Path:
    """A bundle of install.sh, one wheel whose `crag-edge` copies a model folder as `models
    pull` does, and one model: what install.sh does with modes, without the real wheels."""
    folder.mkdir(mode=0o777)
    shutil.copy(ROOT / "packaging" / "bundle" / "install.sh", folder / "install.sh")
    (folder / "wheelhouse").mkdir(mode=0o777)
    info = "crag_edge-0.0.0.dist-info"
    members = {
        "crag_edge_stub.py": STUB,
        f"{info}/METADATA": "Metadata-Version: 2.1\nName: crag-edge\nVersion: 0.0.0\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
        "Tag: py3-none-any\n",
        f"{info}/entry_points.txt": "[console_scripts]\ncrag-edge = crag_edge_stub:main\n",
    }
    members[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*members, f"{info}/RECORD"])
    wheel = folder / "wheelhouse" / "crag_edge-0.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    (folder / "requirements.txt").write_text(f"crag-edge==0.0.0 --hash=sha256:{digest}\n")
    (folder / "models" / "tiny").mkdir(parents=True, mode=0o777)
    (folder / "models" / "models.txt").write_text("tiny\n")
    (folder / "models" / "tiny" / "model.onnx").write_bytes(b"weights")
    return folder


def test_install_sh_leaves_nothing_world_writable_under_a_loose_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        bundle = stub_bundle(tmp_path / "bundle")
        for path in [bundle, *bundle.rglob("*")]:
            path.chmod(0o777 if path.is_dir() or path.name == "install.sh" else 0o666)
        done = subprocess.run(
            ["sh", str(bundle / "install.sh"), str(tmp_path / "opt")],
            capture_output=True,
            text=True,
            env=os.environ | {"PYTHON": sys.executable},
            timeout=300,
            check=False,
        )
    finally:
        os.umask(previous)
    assert done.returncode == 0, done.stderr
    installed = list((tmp_path / "opt").rglob("*"))
    assert tmp_path / "opt" / "share" / "crag-edge" / "models" / "tiny" / "model.onnx" in installed
    writable = [p for p in installed if not p.is_symlink() and p.stat().st_mode & 0o002]
    assert writable == []
