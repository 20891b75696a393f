"""What every chat model runtime offers the pipeline, in-process or behind an HTTP server.

`ChatModel` is the one interface the judge, the rewrite, the follow-up and the answer call,
and the code path both runtimes share (the bounds of every call):
`crag_edge.models.llm.LlamaRuntime` (llama.cpp in this process) and
`crag_edge.models.remote_llm.OpenAiLlm` (any OpenAI-compatible server) subclass it. The
values the calls return live here too, so neither runtime depends on the other.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from crag_edge.text_boundary import repair

Message = Mapping[str, str]
FinishReason = Literal["stop", "length", "timeout"]
Reason = TypeVar("Reason", bound=str)


class LlmCallError(RuntimeError):
    """One call failed: llama.cpp could not evaluate the prompt (e.g. it does not fit the
    context) or the LLM server kept failing through its retries. Callers step aside (the
    judge scores 0.5, a rewrite falls back to keywords)."""


class LlmServerError(RuntimeError):
    """The LLM server named by `llm_url` cannot serve crag-edge at all (unreachable, or it
    returns no log-probabilities for the judge): a setting to fix, never a neutral score."""


@dataclass(frozen=True)
class Completion:
    """The text one `chat` call produced and why it ended."""

    text: str
    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    seconds: float

    def __post_init__(self) -> None:
        """The text passes `text_boundary.repair`, as a stream's pieces do: a rewrite or a
        follow-up question is searched and shown, and a server's JSON can hold a lone
        surrogate the tokenizer refuses, or an escape sequence for the terminal."""
        object.__setattr__(self, "text", repair(self.text))

    @property
    def timed_out(self) -> bool:
        return self.finish_reason == "timeout"


@dataclass(frozen=True)
class NextTokenLogprobs:
    """Per prompt, the log-probabilities of the requested tokens as the next token.

    `rows[i]` is None when prompt i was not evaluated before the deadline (then `timed_out`).
    `evaluated_tokens` counts the prompt tokens actually run, after reusing cached prefixes.
    """

    rows: list[list[float] | None]
    timed_out: bool
    evaluated_tokens: int
    seconds: float


@dataclass
class PromptUsage:
    """A streamed reply's prompt: its length in tokens and how many of them were evaluated
    (the rest came from the KV cache of an earlier prompt sharing that prefix). Filled in
    by the runtime once the prompt is evaluated; None where it cannot tell (an LLM server)."""

    prompt_tokens: int | None = None
    evaluated_tokens: int | None = None


class TextStream(Generic[Reason]):
    """Text pieces as they are generated; once exhausted, why the generation ended.

    Iterate it for the pieces, then read `finish_reason` and `text` (the whole reply): a
    caller can tell an answer that ended on its own from one that was cut off or stopped.
    Wraps a generator that yields the pieces and returns the finish reason; `usage` is
    the prompt's, as far as the runtime reports it. `close()` ends it early and gives the
    model back. Pieces pass `text_boundary.repair`: a model that echoes an escape sequence
    must not reach the terminal that prints its answer.
    """

    def __init__(
        self, pieces: Generator[str, None, Reason], usage: PromptUsage | None = None
    ) -> None:
        self._pieces = pieces
        self._seen: list[str] = []
        self._finish: Reason | None = None
        self.usage = usage if usage is not None else PromptUsage()

    def __iter__(self) -> TextStream[Reason]:
        return self

    def __next__(self) -> str:
        try:
            piece = repair(next(self._pieces))
        except StopIteration as end:
            self._finish = end.value
            raise
        self._seen.append(piece)
        return piece

    @property
    def finish_reason(self) -> Reason:
        if self._finish is None:
            raise RuntimeError("the stream has not ended: read finish_reason after the last piece")
        return self._finish

    @property
    def text(self) -> str:
        """The pieces so far, joined (the whole reply once the stream has ended)."""
        return "".join(self._seen)

    def close(self) -> None:
        self._pieces.close()


@dataclass(frozen=True)
class Call:
    """One call with its bounds resolved (`ChatModel.token_limit`, `call_seconds`)."""

    messages: Sequence[Message]
    limit: int  # tokens to generate at most
    temperature: float
    grammar: str | None = None  # GBNF, where the runtime can apply it (`chat`)
    seconds: float = 0.0  # the total deadline (`chat`)
    stall_s: float = 0.0  # the longest silence (`stream_chat`)
    cited: bool = False  # `stream_chat`'s citation placement
    prefix: str = ""  # the reply so far, which `stream_chat` continues


@dataclass(frozen=True)
class Prompts:
    """The judge's prompts and the answers whose probabilities it reads, with the deadline
    resolved (`ChatModel.call_seconds`)."""

    prompts: Sequence[Sequence[Message]]
    answers: Sequence[str]
    seconds: float


class ChatModel(ABC):
    """A chat model with bounded calls, the one code path of both runtimes: `max_tokens` and
    `timeout_s` are the defaults and upper bounds of each call, `stall_timeout_s` of each
    stream's silence, checked here once; `n_ctx` is the context window prompts must fit.
    Each runtime writes only its own generation (`_complete`, `_stream`) and token counts.
    `continues` says whether `stream_chat` can carry on a reply from its `prefix` (an
    in-process model can; an OpenAI-compatible server has no such call)."""

    continues = False

    def __init__(
        self,
        model_id: str,
        *,
        n_ctx: int,
        max_tokens: int,
        timeout_s: float,
        stall_timeout_s: float,
    ) -> None:
        self.model_id = model_id
        self.n_ctx = n_ctx
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.stall_timeout_s = stall_timeout_s

    def cache_kept(self) -> contextlib.AbstractContextManager[None]:
        """The model's cache as it is now, put back after the block, where the runtime keeps
        one (an in-process model); nothing to keep for a server."""
        return contextlib.nullcontext()

    @abstractmethod
    def count_tokens(self, text: str) -> int:
        """Tokens of plain text (an upper estimate where the exact count is unknown)."""

    @abstractmethod
    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt the chat template makes of `messages`."""

    @abstractmethod
    def truncate(self, text: str, max_tokens: int) -> str:
        """`text` cut to at most `max_tokens` tokens."""

    def chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        grammar: str | None = None,
        temperature: float = 0.0,
        timeout_s: float | None = None,
    ) -> Completion:
        """The assistant's reply within a total deadline (`finish_reason` "timeout" when it
        ran out), constrained by the GBNF `grammar` where the runtime can."""
        limit = self.token_limit(max_tokens)
        seconds = self.call_seconds(timeout_s)
        return self._complete(Call(messages, limit, temperature, grammar=grammar, seconds=seconds))

    def stream_chat(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        temperature: float = 0.0,
        stall_timeout_s: float | None = None,
        cited: bool = False,
        prefix: str = "",
    ) -> TextStream[FinishReason]:
        """The reply piece by piece, bounded by a stall deadline rather than a total one.
        A `cited` reply (an answer citing numbered passages) states its first sentence's
        content in words rather than ending it on a passage number, where the runtime can.
        With `prefix` (only where `continues`), the reply carries on from that text, which
        is not repeated. Lazy: nothing runs until the first piece is asked for."""
        if prefix and not self.continues:
            raise ValueError(f"{self.model_id} cannot continue a reply from a prefix")
        limit = self.token_limit(max_tokens)
        stall = self.stall_timeout_s
        if stall_timeout_s is not None:
            stall = max(0.0, min(stall_timeout_s, stall))
        call = Call(messages, limit, temperature, stall_s=stall, cited=cited, prefix=prefix)
        return self._stream(call)

    def answer_logprobs(
        self,
        prompts: Sequence[Sequence[Message]],
        answers: Sequence[str],
        *,
        timeout_s: float | None = None,
    ) -> NextTokenLogprobs:
        """Per prompt, log P(the assistant's first token is `answers[j]`) for each j, any
        case, with or without a leading space (the yes/no judge); -inf for an answer the
        runtime saw no probability for. Prompts left when the deadline passes get None."""
        return self._answer_logprobs(Prompts(prompts, answers, self.call_seconds(timeout_s)))

    def token_limit(self, max_tokens: int | None) -> int:
        """A call's token limit: `max_tokens` within the model's, the model's by default."""
        limit = self.max_tokens if max_tokens is None else min(max_tokens, self.max_tokens)
        if limit < 1:
            raise ValueError(f"max_tokens must be >= 1; got {max_tokens}")
        return limit

    def call_seconds(self, timeout_s: float | None) -> float:
        """A call's deadline in seconds: `timeout_s` within the model's, the model's by
        default."""
        if timeout_s is None:
            return self.timeout_s
        return max(0.0, min(timeout_s, self.timeout_s))

    @abstractmethod
    def _complete(self, call: Call) -> Completion:
        """`chat` with its bounds resolved."""

    @abstractmethod
    def _stream(self, call: Call) -> TextStream[FinishReason]:
        """`stream_chat` with its bounds resolved."""

    @abstractmethod
    def _answer_logprobs(self, asked: Prompts) -> NextTokenLogprobs:
        """`answer_logprobs` with its deadline resolved."""
