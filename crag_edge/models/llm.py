"""GGUF chat models on llama.cpp: one loaded model shared by many threads, every call bounded.

A llama.cpp context is single-threaded state (KV cache, sampler), so a `LlamaRuntime` owns one
`Llama` and serialises every call with a lock. Each call has a wall-clock deadline that
covers waiting for the lock, prompt evaluation (checked between `n_batch`-token chunks) and
generation (a llama-cpp `stopping_criteria`); a call that runs out of time returns what it
has and says so instead of raising.

Short calls (judge, rewrite) get a total deadline: they sit inside the corrective loop, which
must end in bounded time. A streamed answer gets a stall deadline instead: it runs as long as
the model keeps making progress and stops once `stall_timeout_s` pass without a new prompt
chunk or token. A slow laptop then still finishes its answer (bounded by `max_tokens`),
while a machine that stopped making progress gets an answer that says it was stopped.

`logits_all` stays off: it makes llama.cpp keep n_ctx x n_vocab floats (4096 x 151,936 x 4 B =
2.5 GB for Qwen2.5) just to serve OpenAI-style `logprobs`. The yes/no judge only needs the
next-token distribution at the last prompt position, which llama.cpp computes anyway; it is
read with `llama_get_logits_ith(ctx, -1)` (`next_token_logprobs`). Prompts are evaluated
incrementally against what is already in the KV cache, so prompts sharing a prefix (one
question, many passages) pay for that prefix once.

`create_chat_completion` accepts no `stopping_criteria` (its chat handler installs its own),
so `chat` renders the model's own chat template and calls `create_completion` with tokens.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import threading
import time
from collections.abc import Generator, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from crag_edge.cancellation import check_cancelled
from crag_edge.config import ModelSettings, SettingsError
from crag_edge.models.chat_model import (
    Call,
    ChatModel,
    Completion,
    FinishReason,
    LlmCallError,
    Message,
    NextTokenLogprobs,
    Prompts,
    PromptUsage,
    TextStream,
)
from crag_edge.models.citation_placement import CitationPlacement
from crag_edge.models.errors import ModelFileError
from crag_edge.models.llama_backends import load_cpu_backends
from crag_edge.models.manifest import load_manifest
from crag_edge.models.prefix_states import PrefixStates, StateFiles
from crag_edge.models.registry import ModelNotInstalledError, announce, installed_file
from crag_edge.models.remote_llm import OpenAiLlm

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar


GGUF_MAGIC = b"GGUF"
# System prompts whose fixed part's tokens are remembered (the pipeline uses a handful).
FIXED_PARTS_KEPT = 16
# Beside the pulled models: KV snapshots of system prompts (`prefix_states.StateFiles`).
PREFIX_STATE_DIR = "prefix-states"
INSTALL_HINT = "pip install 'crag-edge[llm]'"


class LlmUnavailableError(RuntimeError):
    """llama-cpp-python is not installed; the message says how to install it."""


class _Deadline:
    """A wall-clock limit on a whole call, usable as a llama-cpp stopping criterion;
    remembers that it fired. Each look at it (between prompt chunks, after each token) is
    also where cancelled work stops: `Cancelled` rises through the call, which gives the
    model back."""

    def __init__(self, seconds: float) -> None:
        self._seconds = seconds
        self._at = time.monotonic() + seconds
        self.fired = False

    def remaining(self) -> float:
        return max(0.0, self._at - time.monotonic())

    def expired(self) -> bool:
        check_cancelled()
        if time.monotonic() >= self._at:
            self.fired = True
        return self.fired

    def progressed(self) -> None:
        """A prompt chunk was evaluated or a token generated; a total limit ignores it."""

    def __call__(self, input_ids: npt.NDArray[np.intc], logits: npt.NDArray[np.single]) -> bool:
        """llama.cpp asks after each generated token whether to stop."""
        self.progressed()
        return self.expired()


class _StallDeadline(_Deadline):
    """A limit on silence rather than on the total: it fires when `seconds` pass without
    progress (an evaluated `n_batch` chunk, a generated token), however long the call takes.

    Progress is noticed when it arrives, so a chunk or token that took longer than the limit
    fires it as well: llama.cpp cannot be interrupted inside one.
    """

    def restart(self) -> None:
        """Give the whole limit again from now (unless it already fired)."""
        if not self.fired:
            self._at = time.monotonic() + self._seconds

    def progressed(self) -> None:
        if not self.expired():
            self.restart()


class LlamaRuntime(ChatModel):
    """One GGUF chat model, loaded once, safe to share between threads.

    `n_threads` 0 uses every core available to the process. `max_tokens` and `timeout_s`
    are the defaults and upper bounds of each call; `stall_timeout_s` replaces `timeout_s`
    for `stream_chat` (see the module docstring). `state_dir` keeps KV snapshots of system
    prompts for later processes (`prefix_states.StateFiles`); None keeps them in memory only.
    """

    continues = True

    def __init__(
        self,
        model_path: Path | str,
        *,
        model_id: str = "",
        n_ctx: int = 4096,
        n_threads: int = 0,
        n_batch: int = 512,
        max_tokens: int = 256,
        timeout_s: float = 60.0,
        stall_timeout_s: float = 30.0,
        state_dir: Path | None = None,
    ) -> None:
        if n_ctx < 64 or n_batch < 1 or max_tokens < 1 or n_threads < 0 or timeout_s <= 0:
            raise ValueError(
                "need n_ctx >= 64, n_batch >= 1, max_tokens >= 1, n_threads >= 0, timeout_s > 0; "
                f"got {n_ctx}, {n_batch}, {max_tokens}, {n_threads}, {timeout_s}"
            )
        if stall_timeout_s <= 0:
            raise ValueError(f"need stall_timeout_s > 0; got {stall_timeout_s}")
        path = Path(model_path)
        super().__init__(
            model_id or path.stem,
            n_ctx=n_ctx,
            max_tokens=max_tokens,
            timeout_s=timeout_s,
            stall_timeout_s=stall_timeout_s,
        )
        _check_gguf(path, self.model_id)
        llama_cpp = _import_llama_cpp()
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        threads = n_threads or _available_cores()
        try:
            self._llm: Llama = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_batch=n_batch,
                n_threads=threads,
                n_threads_batch=threads,
                logits_all=False,
                verbose=False,
            )
        except ValueError as exc:  # llama.cpp rejects the file: truncated or not a model
            raise ValueError(
                f"{path} is not a loadable GGUF model ({exc}); the file may be corrupt or "
                f"truncated: run `crag-edge models verify` and `crag-edge models pull "
                f"{self.model_id}`"
            ) from None
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(
                f"{path} has no chat template: crag-edge needs an instruction-tuned chat model"
            )
        model = self._llm._model  # token texts for the template; no public accessor exists
        self._formatter = Jinja2ChatFormatter(
            template=template,
            eos_token=model.token_get_text(self._llm.token_eos()),
            bos_token=model.token_get_text(self._llm.token_bos()),
        )
        self._llama_cpp = llama_cpp
        self._lock = threading.Lock()
        self._n_batch = n_batch
        self._n_vocab = self._llm.n_vocab()
        files = (
            StateFiles.for_model(state_dir, path, llama_cpp.__version__, n_ctx)
            if state_dir is not None
            else None
        )
        self._prefix_states = PrefixStates(llama_cpp, self._llm, files=files)
        self._citation_placement = CitationPlacement(self._llm)
        self._fixed_parts: dict[tuple[tuple[str, str], ...], list[int]] = {}

    # Tokenizing reads the vocabulary only, which llama.cpp never mutates after loading:
    # these need no lock, so callers can budget prompts while another thread generates.
    def tokenize(self, text: str) -> list[int]:
        """Token ids of plain text (special-token markup is not interpreted)."""
        return list(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def truncate(self, text: str, max_tokens: int) -> str:
        """`text` cut to at most `max_tokens` tokens, on a token boundary."""
        ids = self.tokenize(text)
        if len(ids) <= max_tokens:
            return text
        return self._llm.detokenize(ids[:max_tokens]).decode("utf-8", errors="ignore")

    def count_tokens(self, text: str) -> int:
        return len(self.tokenize(text))

    def count_chat_tokens(self, messages: Sequence[Message]) -> int:
        return len(self.chat_tokens(messages))

    def evaluated_tokens(self, messages: Sequence[Message]) -> int:
        """Tokens of the prompt of `messages` beyond its fixed part (which a snapshot
        restores): what the model reads before its first word."""
        prompt, fixed, _ = self._prompt(messages)
        return len(prompt) - fixed

    def chat_tokens(self, messages: Sequence[Message]) -> list[int]:
        """The prompt the model's own chat template makes of `messages`, ending in the
        assistant turn's header, as token ids."""
        # The template reads plain role/content dicts; llama-cpp types them as OpenAI messages.
        rendered = self._formatter(messages=cast(Any, [dict(m) for m in messages]))
        ids = self._llm.tokenize(rendered.prompt.encode("utf-8"), add_bos=False, special=True)
        return list(ids)

    def check_grammar(self, grammar: str) -> None:
        """Raise ValueError for a GBNF text llama.cpp cannot parse.

        llama-cpp-python hands an invalid grammar's NULL sampler to llama.cpp, which then
        crashes the process; parsing it here first turns that into an exception.
        """
        lib = self._llama_cpp
        sampler = lib.llama_sampler_init_grammar(
            self._llm._model.vocab, grammar.encode("utf-8"), b"root"
        )
        if not sampler:
            raise ValueError(f"invalid GBNF grammar (llama.cpp could not parse it):\n{grammar}")
        lib.llama_sampler_free(sampler)

    def _complete(self, call: Call) -> Completion:
        """Generate the assistant's reply, optionally constrained by a GBNF `grammar`.

        Never blocks past the deadline: a call that runs out of time (queueing for the
        model, evaluating the prompt or generating) returns the text so far with
        `finish_reason == "timeout"`.
        """
        deadline = _Deadline(call.seconds)
        compiled = self._compile(call.grammar) if call.grammar is not None else None
        prompt, fixed, persist = self._prompt(call.messages)
        self._check_fits(len(prompt) + 1)
        started = time.monotonic()
        if not self._lock.acquire(timeout=deadline.remaining()):
            return Completion("", "timeout", len(prompt), 0, time.monotonic() - started)
        try:
            if self._eval_prompt(prompt, deadline, fixed, persist) is None:
                return Completion("", "timeout", len(prompt), 0, time.monotonic() - started)
            response: Any = self._llm.create_completion(
                prompt=prompt,
                max_tokens=call.limit,
                temperature=call.temperature,
                grammar=compiled,
                stopping_criteria=self._llama_cpp.StoppingCriteriaList([deadline]),
                stop=[],
            )
        except RuntimeError as exc:
            raise LlmCallError(f"{self.model_id}: generation failed: {exc}") from exc
        finally:
            self._lock.release()
        choice = response["choices"][0]
        finish: FinishReason = "timeout" if deadline.fired else choice["finish_reason"]
        return Completion(
            text=choice["text"],
            finish_reason=finish,
            prompt_tokens=len(prompt),
            completion_tokens=response["usage"]["completion_tokens"],
            seconds=time.monotonic() - started,
        )

    def _stream(self, call: Call) -> TextStream[FinishReason]:
        """The assistant's reply piece by piece (for answers shown as they are written), then
        its finish reason: `stop`, `length` (`max_tokens` reached) or `timeout` (stalled).
        A `cited` reply keeps its first sentence's content in words (`CitationPlacement`).

        Holds the model for the whole stream. Bounded by a stall deadline, not a total one:
        it stops once `call.stall_s` pass without progress, waiting for the model included, and
        the time the reader takes between pieces does not count.
        """
        usage = PromptUsage()
        return TextStream(self._stream_pieces(call, usage), usage)

    def _stream_pieces(self, call: Call, usage: PromptUsage) -> Generator[str, None, FinishReason]:
        deadline = _StallDeadline(call.stall_s)
        prompt, fixed, persist = self._prompt(call.messages)
        asked = len(prompt)  # the reply, and its citation rule, start here
        prompt += self._llm.tokenize(call.prefix.encode(), add_bos=False) if call.prefix else []
        self._check_fits(len(prompt) + 1)
        usage.prompt_tokens = len(prompt)
        if not self._lock.acquire(timeout=deadline.remaining()):
            return "timeout"
        finish: FinishReason = "stop"
        try:
            usage.evaluated_tokens = self._eval_prompt(prompt, deadline, fixed, persist)
            if usage.evaluated_tokens is None or deadline.fired:
                return "timeout"
            chunks: Any = self._llm.create_completion(
                prompt=prompt,
                max_tokens=max(1, call.limit - (len(prompt) - asked)),
                temperature=call.temperature,
                stopping_criteria=self._llama_cpp.StoppingCriteriaList([deadline]),
                logits_processor=self._citation_rule(call.cited, asked),
                stop=[],
                stream=True,
            )
            for chunk in chunks:
                choice = chunk["choices"][0]
                finish = choice["finish_reason"] or finish
                if choice["text"]:
                    yield choice["text"]
                    deadline.restart()  # the reader's pace is not the model's
        except RuntimeError as exc:
            raise LlmCallError(f"{self.model_id}: generation failed: {exc}") from exc
        finally:
            self._lock.release()
        return "timeout" if deadline.fired else finish

    def _citation_rule(self, cited: bool, prompt_tokens: int) -> Any:
        if not cited:
            return None
        rule = self._citation_placement.processor(prompt_tokens)
        return self._llama_cpp.LogitsProcessorList([rule])

    def next_token_logprobs(
        self,
        prompts: Iterable[Sequence[Message]],
        token_ids: Sequence[int],
        *,
        timeout_s: float | None = None,
    ) -> NextTokenLogprobs:
        """For each chat prompt, log P(token) of each of `token_ids` as the assistant's first
        token, normalised over the whole vocabulary.

        One forward pass per prompt and no sampling; prompts sharing a prefix with the one
        before reuse its KV cache. Prompts left when the deadline passes get None.
        """
        ids = np.asarray(token_ids, dtype=np.intp)
        if ids.size == 0 or ids.min() < 0 or ids.max() >= self._n_vocab:
            raise ValueError(f"token ids must be in [0, {self._n_vocab}); got {list(token_ids)}")
        deadline = _Deadline(self.call_seconds(timeout_s))
        tokenized = [self._prompt(p) for p in prompts]
        for prompt, _, _ in tokenized:
            self._check_fits(len(prompt))
        rows: list[list[float] | None] = [None] * len(tokenized)
        started = time.monotonic()
        evaluated = 0
        if not self._lock.acquire(timeout=deadline.remaining()):
            return NextTokenLogprobs(rows, True, 0, time.monotonic() - started)
        try:
            for i, (prompt, fixed, persist) in enumerate(tokenized):
                count = self._eval_prompt(prompt, deadline, fixed, persist)
                if count is None:
                    break
                evaluated += count
                rows[i] = self._last_logprobs(ids)
        except RuntimeError as exc:
            raise LlmCallError(f"{self.model_id}: prompt evaluation failed: {exc}") from exc
        finally:
            self._lock.release()
        timed_out = any(row is None for row in rows)
        return NextTokenLogprobs(rows, timed_out, evaluated, time.monotonic() - started)

    def _answer_logprobs(self, asked: Prompts) -> NextTokenLogprobs:
        """The probabilities of each answer's single-token spellings (capitalised, lower,
        upper; with or without a leading space) summed, from one `next_token_logprobs`
        pass."""
        groups = [self._spelling_ids(answer) for answer in asked.answers]
        ids = [i for group in groups for i in group]
        result = self.next_token_logprobs(asked.prompts, ids, timeout_s=asked.seconds)
        bounds = np.cumsum([0] + [len(group) for group in groups])
        rows: list[list[float] | None] = [
            None if row is None else [_logsumexp(row[a:b]) for a, b in itertools.pairwise(bounds)]
            for row in result.rows
        ]
        return dataclasses.replace(result, rows=rows)

    def _spelling_ids(self, answer: str) -> list[int]:
        capital, lower = answer.strip().capitalize(), answer.strip().lower()
        forms = {capital, lower, f" {capital}", f" {lower}", answer.strip().upper()}
        ids = sorted({ids[0] for ids in map(self.tokenize, forms) if len(ids) == 1})
        if not ids:
            raise ValueError(f"{self.model_id}: {answer!r} is not a single token in any spelling")
        return ids

    def _prompt(self, messages: Sequence[Message]) -> tuple[list[int], int, bool]:
        """The prompt's tokens, the length of its fixed part (everything before the last
        message's text: the template's header, the system prompt and any earlier turns, which
        every prompt opening with the same turns shares) and whether that part is the system
        prompt alone, the only kind kept on disk (earlier turns are a user's conversation)."""
        prompt = self.chat_tokens(messages)
        if not messages or messages[0].get("role") != "system":
            return prompt, 0, False
        opening = list(messages[:-1]) if len(messages) > 1 else list(messages)
        key = tuple((m["role"], m["content"]) for m in opening)
        if key not in self._fixed_parts:
            if len(self._fixed_parts) >= FIXED_PARTS_KEPT:
                self._fixed_parts.clear()
            self._fixed_parts[key] = self.chat_tokens([*opening, {"role": "user", "content": ""}])
        return prompt, _common_prefix(self._fixed_parts[key], prompt), len(opening) == 1

    @contextlib.contextmanager
    def cache_kept(self) -> Iterator[None]:
        """The KV cache as it is now, put back after the block: the checks asked while an
        answer is paused read other text, and the answer then carries on without evaluating
        its prompt again."""
        with self._lock:
            kept = self._prefix_states.snapshot()
        try:
            yield
        finally:
            if kept is not None:
                with self._lock:
                    self._prefix_states.put_back(kept)

    # -- internals; callers hold the lock --------------------------------------------------

    def _eval_prompt(
        self, prompt: list[int], deadline: _Deadline, fixed: int = 0, persist: bool = False
    ) -> int | None:
        """Bring the KV cache to exactly `prompt`, evaluating only what is not cached yet;
        return how many tokens that took.

        The cache is reused up to the prefix `prompt` shares with the one before, or up to a
        stored snapshot of its fixed part (`PrefixStates`) when that reaches further; a fixed
        part evaluated here is snapshotted for the next prompt that starts with it, and with
        `persist` (a system prompt alone) written to disk and read back by the next process
        (`StateFiles`). Works in `n_batch` chunks and gives up (returning None) once the
        deadline has passed; the cache then holds a prefix that the next call can still
        reuse. Each chunk evaluated is progress for a stall deadline.
        """
        llm = self._llm
        keep = _common_prefix(llm.input_ids[: llm.n_tokens], prompt)
        keep = min(keep, len(prompt) - 1)  # the last position must be evaluated for its logits
        if persist and keep < fixed < len(prompt):
            self._prefix_states.load(prompt[:fixed])
        stored = self._prefix_states.longest_in(prompt)
        if stored > keep:  # a failed restore leaves nothing cached that can be trusted
            keep = stored if self._prefix_states.restore(prompt, stored) else 0
        if keep == 0:
            llm.reset()
        else:
            llm.n_tokens = keep  # Llama.eval drops the KV cache past n_tokens before decoding
        snapshot = keep < fixed < len(prompt) and prompt[:fixed] not in self._prefix_states
        stops = [fixed, len(prompt)] if snapshot else [len(prompt)]
        start = keep
        for stop in stops:
            if not self._eval_range(prompt, start, stop, deadline):
                return None
            if snapshot and stop == fixed:
                self._prefix_states.save(prompt[:fixed], persist=persist)
            start = stop
        return len(prompt) - keep

    def _eval_range(self, prompt: list[int], start: int, stop: int, deadline: _Deadline) -> bool:
        """Evaluate `prompt[start:stop]` after the cached `prompt[:start]`; False once the
        deadline passed."""
        for begin in range(start, stop, self._n_batch):
            if deadline.expired():
                return False
            self._llm.eval(prompt[begin : min(stop, begin + self._n_batch)])
            deadline.progressed()
        return True

    def _last_logprobs(self, ids: npt.NDArray[np.intp]) -> list[float]:
        pointer = self._llama_cpp.llama_get_logits_ith(self._llm.ctx, -1)
        logits = np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)).astype(np.float64)
        peak = logits.max()
        log_norm = peak + np.log(np.exp(logits - peak).sum())
        return [float(v) for v in logits[ids] - log_norm]

    def _compile(self, grammar: str) -> LlamaGrammar:
        self.check_grammar(grammar)
        return self._llama_cpp.LlamaGrammar.from_string(grammar, verbose=False)

    def _check_fits(self, n_tokens: int) -> None:
        """An over-long prompt is a failed call (one line at the CLI, the judge's neutral
        score, a keyword rewrite), not a bug."""
        if n_tokens >= self.n_ctx:
            raise LlmCallError(
                f"prompt of {n_tokens} tokens does not fit the {self.n_ctx}-token context of "
                f"{self.model_id}; shorten it or raise CRAG_EDGE_LLM_CONTEXT"
            )


def load_llm(settings: ModelSettings, model_id: str | None = None) -> LlamaRuntime:
    """The runtime of a pulled LLM (default: `settings.llm`), sized by the settings."""
    model_id = model_id or settings.llm
    spec = load_manifest(settings.model_dir).get(model_id)
    if spec.role not in ("llm", "llm-small"):
        raise SettingsError(f"llm: {model_id!r} is a {spec.role}, not an LLM")
    announce("LLM", model_id)
    return LlamaRuntime(
        installed_file(settings, model_id, spec.files[0].name),
        model_id=model_id,
        n_ctx=settings.llm_context,
        n_threads=settings.llm_threads,
        max_tokens=settings.llm_max_tokens,
        timeout_s=settings.llm_timeout_s,
        stall_timeout_s=settings.llm_stall_timeout_s,
        state_dir=settings.model_dir / PREFIX_STATE_DIR,
    )


class SharedLlm:
    """The default LLM, loaded on first use and shared by every caller; None when it is not
    installed or llama-cpp-python is missing (the tiers and rewrites that need it step aside).

    With `llm_url` set it is the OpenAI-compatible server there instead. A server that cannot
    be reached raises `LlmServerError` naming it (a configured server is not optional), and
    the next call tries again.
    """

    def __init__(self, settings: ModelSettings) -> None:
        self._settings = settings
        self._runtime: ChatModel | None = None
        self._missing = False
        self._lock = threading.Lock()

    def __call__(self) -> ChatModel | None:
        with self._lock:
            if self._runtime is None and self._settings.llm_url:
                self._runtime = OpenAiLlm.connect(self._settings)
            if self._runtime is None and not self._missing:
                try:
                    self._runtime = load_llm(self._settings)
                except (ModelNotInstalledError, LlmUnavailableError):
                    self._missing = True
            return self._runtime


def _import_llama_cpp() -> Any:
    try:
        import llama_cpp

        load_cpu_backends(llama_cpp)
    except ImportError as exc:  # also raised when the compiled library fails to load
        raise LlmUnavailableError(
            f"the LLM runtime needs llama-cpp-python ({exc}): run `{INSTALL_HINT}` "
            "(it compiles llama.cpp from source where no wheel fits, ~5 minutes)"
        ) from None
    return llama_cpp


def _check_gguf(path: Path, model_id: str) -> None:
    """Fail early, with the fix, on a missing file or one that is not GGUF at all."""
    if not path.is_file():
        raise FileNotFoundError(
            f"LLM file not found: {path}; run `crag-edge models pull {model_id}`"
        )
    with path.open("rb") as handle:
        magic = handle.read(len(GGUF_MAGIC))
    if magic != GGUF_MAGIC:
        raise ModelFileError(
            f"{path} is not a GGUF model (starts with {magic!r}, expected {GGUF_MAGIC!r}); "
            f"run `crag-edge models pull {model_id}` to fetch a verified copy"
        )


def _available_cores() -> int:
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return max(1, os.cpu_count() or 1)


def _logsumexp(values: Sequence[float]) -> float:
    peak = max(values)
    return peak + math.log(sum(math.exp(v - peak) for v in values))


def _common_prefix(cached: npt.NDArray[np.intc] | Sequence[int], prompt: Sequence[int]) -> int:
    n = min(len(cached), len(prompt))
    if n == 0:
        return 0
    differs = np.flatnonzero(np.asarray(cached[:n]) != np.asarray(prompt[:n]))
    return int(differs[0]) if differs.size else n
