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
from typing import Any, TypeVar

from pydantic import BaseModel, Field, ValidationError

from crag_edge.cancellation import check_cancelled
from crag_edge.config import ModelSettings
from crag_edge.models.chat_model import (
    Call,
    ChatModel,
    Completion,
    FinishReason,
    LlmCallError,
    LlmServerError,
    Message,
    NextTokenLogprobs,
    Prompts,
    TextStream,
)
from crag_edge.models.llm_http import CallTimedOut, LlmHttp
from crag_edge.text_boundary import one_line

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


class _Reply(BaseModel):
    """What crag-edge reads of a server's JSON; anything else in it is ignored."""


class _Delta(_Reply):
    content: str | None = None


class _TopLogprob(_Reply):
    token: str = ""
    logprob: float = Field(le=0.0)  # a probability's log: NaN, 1e308 or "high" are not one


class _TokenLogprobs(_Reply):
    top_logprobs: list[_TopLogprob] = []


class _Logprobs(_Reply):
    content: list[_TokenLogprobs] | None = None


class _Choice(_Reply):
    message: _Delta | None = None
    delta: _Delta | None = None
    finish_reason: str | None = None
    logprobs: _Logprobs | None = None


class _Usage(_Reply):
    prompt_tokens: int = 0
    completion_tokens: int = 0


class _ChatReply(_Reply):
    """A chat completion."""

    choices: list[_Choice] = Field(min_length=1)
    usage: _Usage | None = None


class _ChatChunk(_Reply):
    """One event of a streamed chat completion; some carry no choice (Azure's content
    filter results first, the usage last), and say nothing about the reply."""

    choices: list[_Choice]


class _ModelEntry(_Reply):
    id: str


class _ModelList(_Reply):
    data: list[_ModelEntry] = []


class _Tokens(_Reply):
    tokens: list[int]


class _Detokenized(_Reply):
    """llama_cpp.server answers in `text`, llama-server in `content`."""

    text: str | None = None
    content: str | None = None


Shape = TypeVar("Shape", bound=_Reply)


def _read(shape: type[Shape], data: Any) -> Shape:
    """`data` as the API shapes it, or an `LlmCallError` saying what came instead: a server
    that sends another shape (an error object mid-stream, a number for a text) fails the call
    in one line, as a refused request does, rather than deep inside the caller."""
    try:
        return shape.model_validate(data)
    except ValidationError as exc:
        error = data.get("error") if isinstance(data, dict) else None
        if error is not None:
            said = error.get("message", error) if isinstance(error, dict) else error
            raise LlmCallError(
                f"the LLM server reported an error: {one_line(str(said))[:200]}"
            ) from None
        problem = exc.errors()[0]
        where = ".".join(str(part) for part in problem["loc"]) or "the reply"
        said = str(problem["msg"]).split(" or instance of ")[0]
        raise LlmCallError(
            f"the LLM server sent a reply crag-edge cannot read ({where}: {said}): "
            f"{str(data)[:200]}"
        ) from None


class OpenAiLlm(ChatModel):
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
        super().__init__(
            model,
            n_ctx=n_ctx,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            stall_timeout_s=stall_timeout_s,
        )
        self._http = http
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
        text = getattr(_read(_Detokenized, reply), tokenizer.text_reply)
        if text is None:
            raise LlmCallError(f"the LLM server's detokenizer sent no `{tokenizer.text_reply}`")
        return str(text)

    def _tokenize(self, text: str) -> list[int]:
        assert self._tokenizer is not None
        try:
            return _tokenize(self._http, self._tokenizer, text, self._deadline())
        except CallTimedOut:
            raise LlmCallError(f"{self._http.root_url}: tokenizing timed out") from None

    # -- generation ------------------------------------------------------------------------

    def _complete(self, call: Call) -> Completion:
        """The reply in one response; a call out of time returns "" with "timeout" (the
        server keeps no partial reply to return)."""
        body = self._body(call.messages, call.limit, call.temperature)
        if call.grammar is not None:
            body["grammar"] = call.grammar
        started = time.monotonic()
        try:
            reply = self._http.post(
                self._http.base_url + "/chat/completions", body, time.monotonic() + call.seconds
            )
        except CallTimedOut:
            return Completion("", "timeout", 0, 0, time.monotonic() - started)
        chat = _read(_ChatReply, reply)
        choice, usage = chat.choices[0], chat.usage or _Usage()
        return Completion(
            text=(choice.message or _Delta()).content or "",
            finish_reason=_finish(choice.finish_reason),
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            seconds=time.monotonic() - started,
        )

    def _stream(self, call: Call) -> TextStream[FinishReason]:
        """Stops with "timeout" once `call.stall_s` pass without a new piece. `cited` shapes no
        token here: the server samples, so only its own prompt can place citations."""
        body = self._body(call.messages, call.limit, call.temperature) | {"stream": True}
        return TextStream(self._stream_pieces(body, call.stall_s))

    def _stream_pieces(
        self, body: dict[str, Any], stall_s: float
    ) -> Generator[str, None, FinishReason]:
        """The reply's pieces. A server that ignores `max_tokens` is cut off at it: every
        event with text carries at least one token, so more events than that are too many."""
        finish: FinishReason = "stop"
        silent_since = time.monotonic()
        pieces = 0
        try:
            for event in self._http.post_stream("/chat/completions", body, stall_s):
                check_cancelled()  # each event: closing the stream hangs up on the server
                choice = next(iter(_read(_ChatChunk, event).choices), _Choice())
                finish = _finish(choice.finish_reason or finish)
                piece = (choice.delta or _Delta()).content
                if piece:
                    if pieces == body["max_tokens"]:
                        return "length"
                    pieces += 1
                    yield piece
                    silent_since = time.monotonic()  # the reader's pace is not the server's
                elif time.monotonic() - silent_since >= stall_s:
                    return "timeout"  # events (keep-alives) but no text
        except CallTimedOut:
            return "timeout"
        return finish

    # -- the judge's probabilities ---------------------------------------------------------

    def _answer_logprobs(self, asked: Prompts) -> NextTokenLogprobs:
        """One `max_tokens: 1` request per prompt with `top_logprobs`."""
        prompts = asked.prompts
        keys = [answer.strip().casefold() for answer in asked.answers]
        deadline = time.monotonic() + asked.seconds
        rows: list[list[float] | None] = [None] * len(prompts)
        started, evaluated = time.monotonic(), 0
        for i, prompt in enumerate(prompts):
            check_cancelled()
            body = self._body(prompt, 1, 0.0) | {"logprobs": True, "top_logprobs": TOP_LOGPROBS}
            try:
                reply = self._http.post(self._http.base_url + "/chat/completions", body, deadline)
            except CallTimedOut:
                break
            except LlmCallError as exc:
                # A refusal of the logprobs themselves (llama_cpp.server without logits_all
                # answers 500 "logprobs is not supported") is a setting to fix; any other
                # failure (a server still loading its model: 503) is an ordinary failed call.
                if self._logprobs_seen or "logprob" not in str(exc).lower():
                    raise
                raise self._no_logprobs(str(exc)) from None
            chat = _read(_ChatReply, reply)
            rows[i] = _answer_row(self._top_logprobs(chat), keys)
            evaluated += (chat.usage or _Usage()).prompt_tokens
        timed_out = any(row is None for row in rows)
        return NextTokenLogprobs(rows, timed_out, evaluated, time.monotonic() - started)

    def _top_logprobs(self, reply: _ChatReply) -> list[_TopLogprob]:
        """The first generated token's `top_logprobs`; an error when the server left them out:
        a setting to fix while it never sent any, a failed call once it has (the judge then
        scores 0.5, as for any failed call)."""
        logprobs = reply.choices[0].logprobs
        content = (logprobs.content if logprobs else None) or [_TokenLogprobs()]
        top = content[0].top_logprobs
        if not top and self._logprobs_seen:
            raise LlmCallError(f"{self._http.base_url}: a reply had no top_logprobs")
        if not top:
            raise self._no_logprobs("the reply has no top_logprobs")
        self._logprobs_seen = True
        return top

    def _no_logprobs(self, detail: str) -> LlmServerError:
        return LlmServerError(
            f"the LLM server at {self._http.base_url} ({SETTING}) returned no log-probabilities "
            f"for the judge ({detail}); use a server that does (python -m llama_cpp.server "
            "needs --logits_all true; llama-server, vLLM and Ollama return them) or drop llm "
            "from CRAG_EDGE_GRADING_TIERS"
        )

    # -- internals -------------------------------------------------------------------------

    def _body(self, messages: Sequence[Message], limit: int, temperature: float) -> dict[str, Any]:
        return {
            "model": self.model_id,
            "messages": [dict(m) for m in messages],
            "max_tokens": limit,
            "temperature": temperature,
        }

    def _deadline(self) -> float:
        """The deadline of a short call (tokenizing) starting now."""
        return time.monotonic() + self.timeout_s


def _first_model(http: LlmHttp, deadline: float) -> str:
    listed = _read(_ModelList, http.get("/models", deadline)).data
    if not listed:
        raise LlmCallError(f"{http.base_url}/models lists no model")
    return listed[0].id


def _find_tokenizer(http: LlmHttp, deadline: float) -> TokenizerEndpoint | None:
    """The first tokenizer endpoint the server answers, or None (token counts are estimated)."""
    for endpoint in TOKENIZERS:
        try:
            _tokenize(http, endpoint, "Yes", deadline)
        except (LlmCallError, LlmServerError):  # 404 from vLLM, Ollama, the other llama.cpp
            continue
        return endpoint
    return None


def _tokenize(http: LlmHttp, endpoint: TokenizerEndpoint, text: str, deadline: float) -> list[int]:
    body: dict[str, Any] = {endpoint.text_field: text, **dict(endpoint.extra)}
    return _read(_Tokens, http.post(http.root_url + endpoint.tokenize, body, deadline)).tokens


def _finish(reason: Any) -> FinishReason:
    return "length" if reason == "length" else "stop"


def _answer_row(top: list[_TopLogprob], keys: Sequence[str]) -> list[float]:
    """log of the summed probability of the entries whose stripped, case-folded token text is
    each key; -inf for a key no entry spells."""
    totals = [0.0] * len(keys)
    for entry in top:
        text = entry.token.strip().casefold()
        for j, key in enumerate(keys):
            if text == key:
                totals[j] += math.exp(entry.logprob)
    return [math.log(total) if total > 0 else -math.inf for total in totals]
