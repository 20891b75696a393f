"""The LLM behind an OpenAI-compatible HTTP server (llama.cpp's `llama-server`,
`python -m llama_cpp.server`, vLLM, Ollama), selected by `CRAG_EDGE_LLM_URL`.

It offers the calls of the in-process runtime (`ChatModel`) over the API those servers share:
chat and streamed chat through `POST /v1/chat/completions`, and the judge's yes/no
probabilities through its `logprobs` / `top_logprobs` fields with `max_tokens: 1`. The
entries of `top_logprobs` are matched by their token text, stripped and case-folded, so
"Yes", " yes" and "YES" all count as "yes"; an answer outside the top `TOP_LOGPROBS`
counts as probability 0 (the in-process runtime sums the same spellings from the whole
vocabulary; the difference is measured in docs/llm-server.md). A server that returns no
log-probabilities is an error naming it, raised at the first judged batch: the judge never
falls back to a silent 0.5.

The OpenAI API has no tokenizer. The llama.cpp servers expose one (`/extras/tokenize` in
llama_cpp.server, `/tokenize` in llama-server), used when found; otherwise token counts are
estimated at `CHARS_PER_TOKEN` characters per token, fewer than English text averages, so
counts come out high and cut text comes out short: a prompt may waste some room but is not
refused for overflowing the context. The chat template is the server's, so a chat prompt is
counted as its messages plus `TEMPLATE_TOKENS` per message for the template's markup.

A GBNF `grammar` is passed on as the `grammar` field, which both llama.cpp servers apply;
servers that ignore it (vLLM, Ollama) return free text, which the callers already check
(the judge's and the verdict's parsers score what does not parse as unusable).
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

from crag_edge.config import ModelSettings
from crag_edge.models.chat_model import (
    Completion,
    FinishReason,
    LlmCallError,
    LlmServerError,
    Message,
    NextTokenLogprobs,
    TextStream,
)
from crag_edge.models.llm_http import CallTimedOut, LlmHttp

TOP_LOGPROBS = 20  # the most OpenAI's API (and vLLM by default) returns
CHARS_PER_TOKEN = 3
TEMPLATE_TOKENS = 8
SETTING = "CRAG_EDGE_LLM_URL"


@dataclass(frozen=True)
class TokenizerEndpoint:
    """A llama.cpp server's tokenizer: where to POST text and ids, and the JSON names."""

    tokenize: str
    text_field: str
    detokenize: str
    text_reply: str
    extra: tuple[tuple[str, bool], ...] = ()


TOKENIZERS = (
    TokenizerEndpoint("/extras/tokenize", "input", "/extras/detokenize", "text"),
    TokenizerEndpoint("/tokenize", "content", "/detokenize", "content", (("add_special", False),)),
)


class OpenAiLlm:
    """A chat model served at `http.base_url`, bounded like `LlamaRuntime`: `timeout_s` per
    short call (retries and backoff included), `stall_timeout_s` of silence per stream."""

    def __init__(
        self,
        http: LlmHttp,
        model: str,
        *,
        n_ctx: int,
        max_tokens: int,
        timeout_s: float,
        stall_timeout_s: float,
        tokenizer: TokenizerEndpoint | None,
    ) -> None:
        self._http = http
        self._model = model
        self._n_ctx = n_ctx
        self._max_tokens = max_tokens
        self._timeout_s = timeout_s
        self._stall_timeout_s = stall_timeout_s
        self._tokenizer = tokenizer
        self._logprobs_seen = False

    @classmethod
    def connect(cls, settings: ModelSettings) -> OpenAiLlm:
        """The server at `settings.llm_url`: its model (the configured name or the first it
        lists) and its tokenizer, if it has one. Raises `LlmServerError` when it cannot be
        reached."""
        assert settings.llm_url is not None
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        http = LlmHttp(settings.llm_url, key, settings.llm_retries)
        deadline = time.monotonic() + settings.llm_timeout_s
        try:
            model = settings.llm_model_name or _first_model(http, deadline)
            tokenizer = _find_tokenizer(http, deadline)
        except (LlmCallError, CallTimedOut) as exc:
            raise LlmServerError(
                f"cannot reach the LLM server at {http.base_url} ({SETTING}): "
                f"{exc or 'no reply within llm_timeout_s'}"
            ) from None
        return cls(
            http,
            model,
            n_ctx=settings.llm_context,
            max_tokens=settings.llm_max_tokens,
            timeout_s=settings.llm_timeout_s,
            stall_timeout_s=settings.llm_stall_timeout_s,
            tokenizer=tokenizer,
        )

    @property
    def model_id(self) -> str:
        return self._model

    @property
    def n_ctx(self) -> int:
        return self._n_ctx

    @property
    def max_tokens(self) -> int:
        return self._max_tokens

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    @property
    def exact_tokens(self) -> bool:
        """Whether token counts come from the server's tokenizer (else they are estimates)."""
        return self._tokenizer is not None

    # -- tokens ----------------------------------------------------------------------------

    def count_tokens(self, text: str) -> int:
        if self._tokenizer is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(self._tokenize(text))

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        content = sum(self.count_tokens(m.get("content", "")) for m in messages)
        return content + TEMPLATE_TOKENS * (len(messages) + 1)  # + the assistant's header

    def truncate(self, text: str, max_tokens: int) -> str:
        if self._tokenizer is None:
            return text[: max(0, max_tokens) * CHARS_PER_TOKEN]
        ids = self._tokenize(text)
        if len(ids) <= max_tokens:
            return text
        tokenizer = self._tokenizer
        body = {"tokens": ids[: max(0, max_tokens)]}
        reply = self._http.post(self._http.root_url + tokenizer.detokenize, body, self._deadline())
        return str(reply[tokenizer.text_reply])

    def _tokenize(self, text: str) -> list[int]:
        assert self._tokenizer is not None
        try:
            return _tokenize(self._http, self._tokenizer, text, self._deadline())
        except CallTimedOut:
            raise LlmCallError(f"{self._http.root_url}: tokenizing timed out") from None

    # -- generation ------------------------------------------------------------------------

    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        grammar: str | None = None,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        """The reply in one response; a call out of time returns "" with "timeout" (the
        server keeps no partial reply to return)."""
        body = self._body(messages, max_tokens, temperature)
        if grammar is not None:
            body["grammar"] = grammar
        started = time.monotonic()
        try:
            reply = self._http.post(
                self._http.base_url + "/chat/completions", body, self._deadline(timeout_s)
            )
        except CallTimedOut:
            return Completion("", "timeout", 0, 0, time.monotonic() - started)
        choice, usage = _first_choice(reply), reply.get("usage") or {}
        return Completion(
            text=(choice.get("message") or {}).get("content") or "",
            finish_reason=_finish(choice.get("finish_reason")),
            prompt_tokens=int(usage.get("prompt_tokens", 0)),
            completion_tokens=int(usage.get("completion_tokens", 0)),
            seconds=time.monotonic() - started,
        )

    def stream_chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        stall_timeout_s: float | None = None,
        cited: bool = False,
    ) -> TextStream[FinishReason]:
        """Lazy like the in-process stream: nothing is sent until the first piece is asked
        for. Stops with "timeout" once `stall_timeout_s` pass without a new piece. `cited`
        shapes no token here: the server samples, so only its own prompt can place citations."""
        stall = self._stall_timeout_s
        if stall_timeout_s is not None:
            stall = max(0.0, min(stall_timeout_s, stall))
        body = self._body(messages, max_tokens, temperature) | {"stream": True}
        return TextStream(self._stream_pieces(body, stall))

    def _stream_pieces(
        self, body: dict[str, Any], stall_s: float
    ) -> Generator[str, None, FinishReason]:
        finish: FinishReason = "stop"
        silent_since = time.monotonic()
        try:
            for event in self._http.post_stream("/chat/completions", body, stall_s):
                choice = _first_choice(event)
                finish = _finish(choice.get("finish_reason") or finish)
                piece = (choice.get("delta") or {}).get("content")
                if piece:
                    yield piece
                    silent_since = time.monotonic()  # the reader's pace is not the server's
                elif time.monotonic() - silent_since >= stall_s:
                    return "timeout"  # events (keep-alives) but no text
        except CallTimedOut:
            return "timeout"
        return finish

    # -- the judge's probabilities ---------------------------------------------------------

    def answer_logprobs(
        self,
        prompts: Sequence[Sequence[Message]],
        answers: Sequence[str],
        *,
        timeout_s: float | None = None,
    ) -> NextTokenLogprobs:
        """One `max_tokens: 1` request per prompt with `top_logprobs`; prompts left when the
        deadline passes get None."""
        keys = [answer.strip().casefold() for answer in answers]
        deadline = self._deadline(timeout_s)
        rows: list[list[float] | None] = [None] * len(prompts)
        started, evaluated = time.monotonic(), 0
        for i, prompt in enumerate(prompts):
            body = self._body(prompt, 1, 0.0) | {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
            try:
                reply = self._http.post(self._http.base_url + "/chat/completions", body, deadline)
            except CallTimedOut:
                break
            except LlmCallError as exc:
                if self._logprobs_seen:
                    raise
                raise self._no_logprobs(str(exc)) from None
            rows[i] = _answer_row(self._top_logprobs(reply), keys)
            evaluated += int((reply.get("usage") or {}).get("prompt_tokens", 0))
        timed_out = any(row is None for row in rows)
        return NextTokenLogprobs(rows, timed_out, evaluated, time.monotonic() - started)

    def _top_logprobs(self, reply: Any) -> list[Any]:
        """The first generated token's `top_logprobs`; an error when the server left them out."""
        logprobs = _first_choice(reply).get("logprobs") or {}
        content = logprobs.get("content") or [{}]
        top = content[0].get("top_logprobs")
        if not top:
            raise self._no_logprobs("the reply has no top_logprobs")
        self._logprobs_seen = True
        return list(top)

    def _no_logprobs(self, detail: str) -> LlmServerError:
        return LlmServerError(
            f"the LLM server at {self._http.base_url} ({SETTING}) returned no log-probabilities "
            f"for the judge ({detail}); use a server that does (python -m llama_cpp.server "
            "needs --logits_all true; llama-server, vLLM and Ollama return them) or drop llm "
            "from CRAG_EDGE_GRADING_TIERS"
        )

    # -- internals -------------------------------------------------------------------------

    def _body(
        self, messages: Sequence[Message], max_tokens: int | None, temperature: float
    ) -> dict[str, Any]:
        limit = self._max_tokens if max_tokens is None else min(max_tokens, self._max_tokens)
        if limit < 1:
            raise ValueError(f"max_tokens must be >= 1; got {max_tokens}")
        return {
            "model": self._model,
            "messages": [dict(m) for m in messages],
            "max_tokens": limit,
            "temperature": temperature,
        }

    def _deadline(self, timeout_s: float | None = None) -> float:
        seconds = (
            self._timeout_s if timeout_s is None else max(0.0, min(timeout_s, self._timeout_s))
        )
        return time.monotonic() + seconds


def _first_model(http: LlmHttp, deadline: float) -> str:
    listed = http.get("/models", deadline).get("data") or []
    if not listed:
        raise LlmCallError(f"{http.base_url}/models lists no model")
    return str(listed[0]["id"])


def _find_tokenizer(http: LlmHttp, deadline: float) -> TokenizerEndpoint | None:
    """The first tokenizer endpoint the server answers, or None (token counts are estimated)."""
    for endpoint in TOKENIZERS:
        try:
            _tokenize(http, endpoint, "Yes", deadline)
        except LlmCallError:
            continue
        return endpoint
    return None


def _tokenize(http: LlmHttp, endpoint: TokenizerEndpoint, text: str, deadline: float) -> list[int]:
    body: dict[str, Any] = {endpoint.text_field: text, **dict(endpoint.extra)}
    reply = http.post(http.root_url + endpoint.tokenize, body, deadline)
    return [int(t) for t in reply["tokens"]]


def _first_choice(reply: Any) -> dict[str, Any]:
    choices = reply.get("choices") if isinstance(reply, dict) else None
    if not choices:
        raise LlmCallError(f"the LLM server replied without choices: {str(reply)[:200]}")
    return dict(choices[0])


def _finish(reason: Any) -> FinishReason:
    return "length" if reason == "length" else "stop"


def _answer_row(top: list[Any], keys: Sequence[str]) -> list[float]:
    """log of the summed probability of the entries whose stripped, case-folded token text is
    each key; -inf for a key no entry spells."""
    totals = [0.0] * len(keys)
    for entry in top:
        text = str(entry.get("token", "")).strip().casefold()
        for j, key in enumerate(keys):
            if text == key:
                totals[j] += math.exp(float(entry["logprob"]))
    return [math.log(total) if total > 0 else -math.inf for total in totals]
