"""Load llama.cpp's CPU backend when llama-cpp-python was built to choose it at run time.

A portable build (`GGML_BACKEND_DL` with `GGML_CPU_ALL_VARIANTS`, as the offline bundle ships)
holds one CPU library per instruction-set level, `libggml-cpu-<variant>.so`, and registers
none of them itself: llama.cpp looks for them beside the Python executable and in the working
directory, where they never are. They sit in the package's `lib/` folder, so they are loaded
from there before the first model, and llama.cpp keeps the best one this CPU runs. A native
build registers its CPU backend itself and is left alone.
"""

from __future__ import annotations

import ctypes
import re
from pathlib import Path
from typing import Any

VARIANT_GLOB = "libggml-cpu-*.so"
LIBGGML_NAME = re.compile(r"libggml\.so(\.\d+)*")


class BackendLoadError(ImportError):
    """A portable llama.cpp build none of whose CPU libraries loads here: to its users, the
    same as a compiled library that fails to import."""


def cpu_variants(lib_dir: Path) -> list[Path]:
    """The CPU-variant libraries of a portable build in `lib_dir` (none for a native build)."""
    return sorted(lib_dir.glob(VARIANT_GLOB))


def load_cpu_backends(llama_cpp: Any) -> None:
    """Register the best CPU variant of a portable build, once per process."""
    lib_dir = Path(llama_cpp.__file__).parent / "lib"
    if not cpu_variants(lib_dir):
        return
    try:
        libggml = ctypes.CDLL(str(_loaded_libggml(lib_dir)))
    except OSError as exc:
        raise BackendLoadError(f"cannot load llama.cpp's backend registry: {exc}") from None
    libggml.ggml_backend_reg_count.restype = ctypes.c_size_t
    if libggml.ggml_backend_reg_count():
        return
    libggml.ggml_backend_load_all_from_path.argtypes = [ctypes.c_char_p]
    libggml.ggml_backend_load_all_from_path(str(lib_dir).encode())
    if not libggml.ggml_backend_reg_count():
        raise BackendLoadError(
            f"none of llama.cpp's CPU libraries in {lib_dir} loads on this machine "
            f"({', '.join(p.name for p in cpu_variants(lib_dir))})"
        )


def _loaded_libggml(lib_dir: Path) -> Path:
    """The libggml file libllama loaded (by its soname, `libggml.so.0`). A wheel holds each
    name of a library as a copy, not a link, so opening `libggml.so` would load a second
    library, with a backend registry of its own that llama.cpp never reads."""
    folder = lib_dir.resolve()
    with open("/proc/self/maps", encoding="utf-8") as maps:
        for line in maps:
            path = Path(line.split(maxsplit=5)[-1].strip())
            if path.parent == folder and LIBGGML_NAME.fullmatch(path.name):
                return path
    return lib_dir / "libggml.so"
