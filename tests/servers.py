"""Real local servers for tests: an HTTP file server (with Range support) and a wheel folder.

They stand in for the outside world (a model hub, a package index) and speak its real
protocols: HTTP/1.1 with byte ranges, and pip's `--find-links` wheel folders.
"""

from __future__ import annotations

import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path


@contextmanager
def file_server(files: dict[str, bytes], *, fail_after: int | None = None) -> Iterator[str]:
    """Serve `files` by path on 127.0.0.1; yield the base URL.

    `fail_after` cuts every full (non-Range) response after that many bytes, like a dropped
    connection, so that resuming can be tested.
    """

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            if body is None:
                self.send_error(404)
                return
            ranged = self.headers.get("Range", "")
            start = int(ranged.removeprefix("bytes=").split("-")[0]) if ranged else 0
            if start >= len(body) and ranged:
                self.send_response(416)
                self.end_headers()
                return
            self.send_response(206 if ranged else 200)
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            payload = body[start:]
            if fail_after is not None and not ranged:
                payload = payload[:fail_after]
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def build_wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    """Write a minimal valid wheel carrying `members`, as a PyPI data wheel would."""
    dist = package.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
    wheel = (
        "Wheel-Version: 1.0\nGenerator: crag-edge-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(f"{info}/WHEEL", wheel)
        archive.writestr(f"{info}/RECORD", "")
    return path
