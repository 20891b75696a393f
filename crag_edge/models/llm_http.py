"""JSON over HTTP to an LLM server, with deadlines and retries.

A failed call is retried with exponential backoff when trying again can help: the
connection failed or broke, the server answered 5xx (overloaded, restarting) or 429 (rate
limited), waiting at least as long as its `Retry-After` asks. Any other 4xx is the request's
own fault and fails at once; 401, 403 and 404 mean the URL or the key is wrong, which no
retry fixes and which the user must be told about.

Time is bounded the way the in-process runtime bounds it: a short call (judge, rewrite) has
a total deadline that covers connecting, every attempt and every backoff pause; a stream has
a stall limit, the longest the server may go without sending an event. httpx bounds single
reads only, so an `http_bounds.Watchdog` cuts a server that trickles bytes (a header a
second, keep-alive comments forever, a line that never ends). A stream's event is at most
`MAX_EVENT_CHARS` long, a short call's reply at most `MAX_REPLY_BYTES`: what crag-edge asked
for fits many times over, an endless line or body does not.
"""

from __future__ import annotations

import email.utils
import json
import math
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx

from crag_edge.http_bounds import Watchdog, read_capped, split_credentials
from crag_edge.models.chat_model import LlmCallError, LlmServerError
from crag_edge.text_boundary import one_line

CONNECT_TIMEOUT_S = 5.0
MAX_EVENT_CHARS = 1 << 20
_LINE_END = re.compile(r"\r\n|\r|\n")
# A short call's reply: one answer of at most llm_max_tokens, or one token's log-probabilities.
MAX_REPLY_BYTES = 16 << 20
# An error reply is read for its message only (200 characters of it are quoted).
MAX_ERROR_BYTES = 64 << 10
FIRST_BACKOFF_S = 0.5
# Statuses worth another attempt: the server is busy, restarting or briefly failing.
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
# Statuses that say the URL or the key is wrong: the settings must change.
SETTINGS_STATUSES = frozenset({401, 403, 404})


class CallTimedOut(Exception):
    """The call's deadline passed (while connecting, waiting or between attempts)."""


class LlmHttp:
    """One server's HTTP client: `base_url` (e.g. http://host:8080/v1), an optional bearer
    key, `retries` extra attempts per call. Safe to share between threads (httpx.Client is).
    """

    def __init__(self, base_url: str, api_key: str | None, retries: int) -> None:
        self.base_url, auth = split_credentials(base_url.rstrip("/"))
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # No idle connections: a watchdog can cut only a connection its call opens.
        self._client = httpx.Client(
            headers=headers, auth=auth, limits=httpx.Limits(max_keepalive_connections=0)
        )
        self._retries = retries

    @property
    def root_url(self) -> str:
        """The server's root, where llama.cpp servers keep their non-OpenAI endpoints."""
        return self.base_url.removesuffix("/v1")

    def get(self, path: str, deadline: float) -> Any:
        return self._call("GET", self.base_url + path, None, deadline)

    def post(self, url: str, body: dict[str, Any], deadline: float) -> Any:
        """POST `body` to the absolute `url`; the decoded JSON reply."""
        return self._call("POST", url, body, deadline)

    def post_stream(self, path: str, body: dict[str, Any], stall_s: float) -> Iterator[Any]:
        """POST with `stream: true`; the decoded `data:` events of the server-sent event
        stream until `[DONE]`. Raises `CallTimedOut` once `stall_s` pass without an event,
        `LlmCallError` when the stream breaks, or ends without `[DONE]` (the reply is cut)."""
        url = self.base_url + path
        with (
            Watchdog(stall_s) as watchdog,
            self._attempts("POST", url, body, time.monotonic() + stall_s, watchdog) as response,
        ):
            try:
                for data in _events(response, url):
                    if data == "[DONE]":
                        return
                    watchdog.pause()  # the reader's pace is not the server's
                    yield _event(data, url)
                    watchdog.postpone(stall_s)
            except httpx.TransportError as exc:
                if watchdog.expired or isinstance(exc, httpx.TimeoutException):
                    raise CallTimedOut from None
                raise LlmCallError(f"{url}: the stream broke: {_say(exc)}") from None
            if watchdog.expired:
                raise CallTimedOut
            raise LlmCallError(f"{url}: the stream ended without [DONE]: the reply is cut off")

    def _call(self, method: str, url: str, body: Any, deadline: float) -> Any:
        """A short call's decoded JSON reply, all of it (attempts and pauses) by `deadline`."""
        with (
            Watchdog(deadline - time.monotonic()) as watchdog,
            self._attempts(method, url, body, deadline, watchdog) as response,
        ):
            return _json(response, watchdog)

    @contextmanager
    def _attempts(
        self, method: str, url: str, body: Any, deadline: float, watchdog: Watchdog
    ) -> Iterator[httpx.Response]:
        """The first successful response (2xx), after retries and backoff."""
        attempt = 0
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise CallTimedOut
            timeout = httpx.Timeout(left, connect=min(CONNECT_TIMEOUT_S, left))
            request = self._client.build_request(
                method, url, json=body, timeout=timeout, extensions=watchdog.extensions
            )
            asked_wait_s = 0.0
            try:
                response = self._client.send(request, stream=True)
            except httpx.TimeoutException:
                raise CallTimedOut from None
            except httpx.TransportError as exc:
                if watchdog.expired:
                    raise CallTimedOut from None
                problem = _say(exc)
            else:
                if response.is_success:
                    try:
                        yield response
                    finally:
                        response.close()
                    return
                problem = self._refusal(response, url)
                asked_wait_s = retry_after_s(response.headers.get("Retry-After"))
            if attempt >= self._retries:
                raise LlmCallError(f"{url}: {problem} (after {attempt + 1} attempts)")
            pause = max(FIRST_BACKOFF_S * 2**attempt, asked_wait_s)
            if time.monotonic() + pause >= deadline:
                if asked_wait_s:  # waiting as asked would outlast the call: say so, not "timeout"
                    raise LlmCallError(
                        f"{url}: {problem}; the server asks to wait {asked_wait_s:g} s, "
                        "longer than the call may take"
                    )
                raise CallTimedOut
            time.sleep(pause)
            attempt += 1

    def _refusal(self, response: httpx.Response, url: str) -> str:
        """What an error status says; raises unless another attempt may succeed. A redirect
        is not followed (the key would go along): the setting should name where it points."""
        try:
            body = read_capped(response, MAX_ERROR_BYTES)
        except httpx.TransportError:
            body = b""  # the status alone says enough
        response.close()
        if response.is_redirect:
            target = one_line(response.headers.get("Location", "nowhere"))[:200]
            raise LlmServerError(
                f"the LLM server at {url} redirects to {target} (HTTP {response.status_code}): "
                "set CRAG_EDGE_LLM_URL to the address it redirects to"
            )
        problem = f"HTTP {response.status_code}: {_server_message(body)}"
        if response.status_code in SETTINGS_STATUSES:
            raise LlmServerError(
                f"the LLM server refused {url} ({problem}): check CRAG_EDGE_LLM_URL (it "
                "ends in /v1), CRAG_EDGE_LLM_API_KEY and CRAG_EDGE_LLM_MODEL_NAME"
            )
        if response.status_code not in RETRY_STATUSES:
            raise LlmCallError(f"{url}: {problem}")
        return problem


def retry_after_s(header: str | None) -> float:
    """The wait a 429 or 503 asks for in its `Retry-After` (seconds, or an HTTP date), 0 when
    it asks none or says it unreadably: retrying sooner only earns another refusal."""
    if not header:
        return 0.0
    try:
        seconds = float(header)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(header)
        except (TypeError, ValueError):
            return 0.0
        if when.tzinfo is None:
            return 0.0
        seconds = (when - datetime.now(UTC)).total_seconds()
    return seconds if math.isfinite(seconds) and seconds > 0 else 0.0


def _json(response: httpx.Response, watchdog: Watchdog) -> Any:
    try:
        body = read_capped(response, MAX_REPLY_BYTES)
    except httpx.TransportError as exc:
        if watchdog.expired or isinstance(exc, httpx.TimeoutException):
            raise CallTimedOut from None
        raise LlmCallError(f"{response.url}: the reply broke off: {_say(exc)}") from None
    if watchdog.expired:  # a cut reply without a length reads as complete
        raise CallTimedOut
    if len(body) > MAX_REPLY_BYTES:
        raise LlmCallError(f"{response.url}: the reply exceeds {MAX_REPLY_BYTES // 2**20} MiB")
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise LlmCallError(f"{response.url}: the reply is not JSON") from None


def _events(response: httpx.Response, url: str) -> Iterator[str]:
    """The data of each `data:` line of a server-sent event stream (lines end in CR, LF or
    both); comments (pings), event names and blank separators are skipped. A line longer
    than `MAX_EVENT_CHARS` is refused before it is whole: a server that never ends one must
    not fill the memory."""
    pending = ""
    for text in response.iter_text():
        *lines, pending = _LINE_END.split(pending + text)
        if len(pending) > MAX_EVENT_CHARS:
            raise LlmCallError(f"{url}: a stream event exceeds {MAX_EVENT_CHARS:,} characters")
        yield from _data(lines)
    yield from _data([pending])  # the last line may lack its line end


def _data(lines: list[str]) -> Iterator[str]:
    """What the `data:` lines among `lines` carry."""
    for line in lines:
        data = line.removeprefix("data:").strip()
        if line.startswith("data:") and data:
            yield data


def _event(data: str, url: str) -> Any:
    """One event's JSON; a line that is not JSON fails the call in one line."""
    try:
        return json.loads(data)
    except json.JSONDecodeError:
        raise LlmCallError(f"{url}: a stream event is not JSON: {data[:200]!r}") from None


def _server_message(body: bytes) -> str:
    """The error text of an OpenAI-style (`error.message`) or FastAPI-style (`detail`) body,
    else the body itself (an HTML error page from a proxy), on one line."""
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        data = None
    said: Any = body.decode("utf-8", "replace")
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and "message" in error:
            said = error["message"]
        elif "detail" in data:
            said = data["detail"]
    return one_line(str(said))[:200]


def _say(exc: Exception) -> str:
    return str(exc) or type(exc).__name__
