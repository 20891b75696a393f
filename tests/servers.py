"""Real local servers for tests: an HTTP file server (with Range support), a scriptable HTTP
API server, a raw socket server for replies no well-behaved server sends,
llama-cpp-python's OpenAI-compatible LLM server, an OpenAI-compatible server whose answer
never ends, and a wheel folder.

They stand in for the outside world (a model hub, a search API, a package index) and speak
its real protocols: HTTP/1.1 with byte ranges, JSON over HTTP, and pip's `--find-links`
wheel folders.
"""

from __future__ import annotations

import json
import re
import socket
import socketserver
import ssl
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, replace
from email.message import Message
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx


@contextmanager
def serving(server: socketserver.BaseServer) -> Iterator[int]:
    """Run `server` (bound to a free port on 127.0.0.1) in a daemon thread; yield its port,
    then shut it down and close its socket."""
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server.server_address[1]  # type: ignore[index]
    finally:
        server.shutdown()
        server.server_close()


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

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as port:
        yield f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class ApiRequest:
    """One request as an `api_server` responder sees it."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: Message
    body: bytes


# (status, headers, body)
ApiResponse = tuple[int, dict[str, str], bytes]


class _QuietServer(ThreadingHTTPServer):
    """Clients that give up (timeouts under test) close the socket: not worth a traceback."""

    def handle_error(self, request: object, client_address: object) -> None:
        pass


@contextmanager
def api_server(respond: Callable[[ApiRequest], ApiResponse]) -> Iterator[str]:
    """Answer every GET and POST on 127.0.0.1 with `respond(request)`; yield the base URL.

    `respond` may sleep to play a slow service; handler threads are daemons, so a reply
    still pending when the test ends does not hold it up.
    """

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            parts = urlsplit(self.path)
            request = ApiRequest(
                self.command,
                parts.path,
                parse_qs(parts.query),
                self.headers,
                self.rfile.read(length),
            )
            status, headers, body = respond(request)
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = _answer
        do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(_QuietServer(("127.0.0.1", 0), Handler)) as port:
        yield f"http://127.0.0.1:{port}"


@dataclass(frozen=True)
class EndlessLlm:
    """An LLM server that streams one word after another until its client hangs up
    (`hung_up` is set then) or the test ends (`stop`): a long answer whose end is not a
    matter of timing."""

    url: str
    asked: threading.Event
    hung_up: threading.Event
    stop: threading.Event


@contextmanager
def endless_llm_server(reply: str | None = None) -> Iterator[EndlessLlm]:
    """The OpenAI API of an LLM server on 127.0.0.1: `GET /v1/models`, a streamed `POST
    /v1/chat/completions`, and llama-cpp-python's tokenizer endpoints. With `reply`, every
    answer is those words and then ends: a model that answers from memory, as a reader's
    question sometimes makes a real one do, whatever its passages say."""
    llm = EndlessLlm("", threading.Event(), threading.Event(), threading.Event())
    words = reply.split(" ") if reply is not None else None

    def piece(text: str) -> str:
        return json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]})

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"  # the stream ends when the connection does

        def do_GET(self) -> None:
            self._reply(json.dumps({"object": "list", "data": [{"id": "endless"}]}))

        def do_POST(self) -> None:
            asked = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            if self.path == "/extras/tokenize":  # one token a character
                self._reply(json.dumps({"tokens": [ord(c) for c in asked["input"]]}))
            elif self.path == "/extras/detokenize":
                self._reply(json.dumps({"text": "".join(map(chr, asked["tokens"]))}))
            else:
                self._stream()

        def _stream(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            llm.asked.set()
            try:
                if words is not None:
                    for i, word in enumerate(words):
                        self.wfile.write(
                            f"data: {piece(word if i == 0 else ' ' + word)}\n\n".encode()
                        )
                while words is None and not llm.stop.wait(0.02):
                    self.wfile.write(f"data: {piece('word ')}\n\n".encode())
                    self.wfile.flush()
                self.wfile.write(b"data: [DONE]\n\n")
            except OSError:
                llm.hung_up.set()

        def _reply(self, body: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(_QuietServer(("127.0.0.1", 0), Handler)) as port:
        try:
            yield replace(llm, url=f"http://127.0.0.1:{port}/v1")
        finally:
            llm.stop.set()  # before the shutdown: a handler still streaming words ends


def trickle(connection: socket.socket, data: bytes, pause_s: float) -> None:
    """Send `data` one byte at a time, `pause_s` apart: a server that answers but never
    quite finishes. Stops quietly when the client hangs up."""
    for byte in data:
        connection.sendall(bytes([byte]))
        time.sleep(pause_s)


# A self-signed certificate for 127.0.0.1 (valid until 2125), for HTTPS stand-ins; clients
# trust it through SSL_CERT_FILE. Made with `openssl req -x509 -newkey rsa:2048 -nodes
# -days 36500 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1`; it guards nothing.
TLS_CERT = Path(__file__).parent / "data" / "tls" / "cert.pem"
TLS_KEY = TLS_CERT.with_name("key.pem")


@contextmanager
def socket_server(
    talk: Callable[[socket.socket, bytes], None], *, tls: bool = False
) -> Iterator[str]:
    """Accept HTTP connections on 127.0.0.1 (HTTPS with `TLS_CERT` when `tls`) and hand each
    to `talk` with the request (head and body) read; yield the base URL. `talk` writes raw
    bytes at any pace, well-formed or not, and may stop whenever it likes: the misbehaving
    servers `api_server` cannot play."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(TLS_CERT, TLS_KEY)

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            connection: socket.socket = self.request
            if tls:
                connection = context.wrap_socket(connection, server_side=True)
            request = b""
            while b"\r\n\r\n" not in request and (data := connection.recv(65536)):
                request += data
            head, _, body = request.partition(b"\r\n\r\n")
            length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
            missing = (int(length.group(1)) if length else 0) - len(body)
            while missing > 0 and (data := connection.recv(missing)):
                body += data
                missing -= len(data)
            with suppress(OSError):  # the client hung up, as a timeout does
                talk(connection, head + b"\r\n\r\n" + body)

    class Server(socketserver.ThreadingTCPServer):
        daemon_threads = True
        allow_reuse_address = True

    with serving(Server(("127.0.0.1", 0), Handler)) as port:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"


def build_wheel(folder: Path, package: str, version: str, members: dict[str, bytes]) -> Path:
    """Write a minimal valid wheel carrying `members`, as a PyPI data wheel would."""
    dist = package.replace("-", "_")
    path = folder / f"{dist}-{version}-py3-none-any.whl"
    info = f"{dist}-{version}.dist-info"
    metadata = f"Metadata-Version: 2.1\nName: {package}\nVersion: {version}\n"
    wheel = (
        "Wheel-Version: 1.0\nGenerator: crag-edge-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    )
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        archive.writestr(f"{info}/METADATA", metadata)
        archive.writestr(f"{info}/WHEEL", wheel)
        archive.writestr(f"{info}/RECORD", "")
    return path


@dataclass(frozen=True)
class LlmServer:
    """A running `python -m llama_cpp.server`: its OpenAI base URL, port and process."""

    url: str
    port: int
    process: subprocess.Popen[bytes]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def llama_cpp_server(
    model: Path, log: Path, *, logits_all: bool = True, port: int = 0, n_ctx: int = 1024
) -> Iterator[LlmServer]:
    """llama-cpp-python's own server for `model` on 127.0.0.1 (one thread, quiet), ready
    to answer; its output goes to `log`. `logits_all` false makes it refuse logprobs."""
    port = port or free_port()
    args = [sys.executable, "-m", "llama_cpp.server", "--model", str(model)]
    args += ["--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx)]
    args += ["--n_threads", "1", "--n_threads_batch", "1", "--verbose", "false"]
    args += ["--logits_all", str(logits_all).lower()]
    with log.open("ab") as sink:
        process = subprocess.Popen(args, stdout=sink, stderr=subprocess.STDOUT)
    server = LlmServer(f"http://127.0.0.1:{port}/v1", port, process)
    try:
        _wait_until_up(server, log)
        yield server
    finally:
        process.kill()
        process.wait()


def _wait_until_up(server: LlmServer, log: Path, patience_s: float = 180.0) -> None:
    give_up = time.monotonic() + patience_s
    while time.monotonic() < give_up:
        if server.process.poll() is not None:
            raise RuntimeError(f"llama_cpp.server exited: {log.read_text()[-2000:]}")
        try:
            httpx.get(f"{server.url}/models", timeout=2.0).raise_for_status()
            return
        except httpx.HTTPError:
            time.sleep(0.25)
    raise RuntimeError(f"llama_cpp.server did not start in {patience_s:g}s: {log}")
