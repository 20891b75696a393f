"""The LLM tier of the grading cascade: a GGUF chat model judges (query, passage) relevance.

Two modes:

- "logprob": per passage, one forward pass and no generation; the score is
  P(yes) / (P(yes) + P(no)) over the assistant's first token (all single-token spellings of
  yes/no summed). The question and instructions come before the passage, so every passage
  of a batch reuses the KV cache of that shared prefix.
- "grammar": one call for the whole batch; the passages are numbered in one prompt and a
  GBNF grammar built for exactly N forces the reply to N lines "[i] d", d a digit 0-9
  (score d / 9). Output that cannot be parsed into N ratings scores 0.5 for every item and
  adds a warning.

Both give 0.5 plus a warning for items not scored before the timeout. Scores are raw: the
logprob score is the uncalibrated yes-probability, skewed upwards, so calibrate before
thresholding.

The two modes rank pairs alike and run at the same speed (prompt evaluation dominates
both); the default is "logprob" because its score is a continuous probability (grammar
mode's ratings collapse to a few distinct values, so no threshold can be placed between
them), a timeout keeps the items already scored, and there is no output to fail parsing.
Measured in docs/grading.md ("The LLM judge's two modes").
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Sequence
from typing import Literal

from crag_edge.config import MIN_JUDGE_FOCUS_TOKENS
from crag_edge.grading.focus import focused_passage
from crag_edge.models.chat_model import ChatModel, LlmCallError, Message
from crag_edge.types import ScoredBatch

JudgeMode = Literal["logprob", "grammar"]
MODES: tuple[JudgeMode, ...] = ("logprob", "grammar")
DEFAULT_MODE: JudgeMode = "logprob"
NEUTRAL = 0.5
# The runtime sums every usual spelling of each ("Yes", " yes", "YES", ...).
ANSWERS = ("yes", "no")
# Below this share of the first-token probability on yes/no the model is not answering the
# question it was asked (wrong template, a base model) and its yes-ratio means little.
MIN_YES_NO_MASS = 0.5
MIN_PASSAGE_TOKENS = MIN_JUDGE_FOCUS_TOKENS
MAX_RATING = 9

LOGPROB_SYSTEM = (
    "You check search results for a retrieval system. Given a query and a passage, answer "
    "Yes if the passage contains information that answers the query or is evidence for or "
    "against it, and No otherwise. Answer with one word: Yes or No."
)
LOGPROB_USER = (
    "Query: {query}\n\nPassage: {passage}\n\n"
    "Does the passage contain information that answers the query? Answer Yes or No."
)
GRAMMAR_SYSTEM = (
    "You check search results for a retrieval system. Rate how well each passage answers "
    "the query, from 0 (unrelated) to 9 (answers it directly). Reply with one line per "
    "passage in the form [number] rating."
)
GRAMMAR_USER = (
    "Query: {query}\n\nPassages:\n{passages}\n\n"
    "Rate every passage, one line each, as [number] rating (0-9)."
)
_RATING_LINE = re.compile(r"\[(\d+)\] ([0-9])")


class LlmJudge:
    """`PairScorer` backed by a shared `ChatModel` (in-process or an LLM server).

    `max_passage_tokens` caps each passage (grammar mode shrinks it further so that a whole
    batch fits the context); with `focus_tokens` (0: off), a longer passage is first reduced to its
    strips that best cover the query (`focus.focused_passage`); `timeout_s` bounds one `score`
    call (at most the runtime's).
    """

    def __init__(
        self,
        runtime: ChatModel,
        mode: JudgeMode = DEFAULT_MODE,
        *,
        max_passage_tokens: int = 256,
        focus_tokens: int = 0,
        timeout_s: float | None = None,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"unknown LLM judge mode {mode!r}; use one of {', '.join(MODES)}")
        shortest = min(max_passage_tokens, focus_tokens or max_passage_tokens)
        if shortest < MIN_PASSAGE_TOKENS or (timeout_s is not None and timeout_s < 0):
            raise ValueError(
                f"need max_passage_tokens and focus_tokens >= {MIN_PASSAGE_TOKENS} and "
                f"timeout_s >= 0; got {max_passage_tokens}, {focus_tokens}, {timeout_s}"
            )
        self._runtime = runtime
        self._mode: JudgeMode = mode
        self._max_passage_tokens = max_passage_tokens
        self._focus_tokens = focus_tokens
        # The runtime caps every call at its own timeout; a longer one here could not hold.
        cap = runtime.timeout_s
        self._timeout_s = cap if timeout_s is None else min(timeout_s, cap)
        # Prompt tokens of everything but the passages: the base of the grammar-mode budget.
        self._grammar_overhead = runtime.count_chat_tokens(_grammar_messages("", []))

    @property
    def name(self) -> str:
        return f"llm-{self._mode}"

    @property
    def mode(self) -> JudgeMode:
        return self._mode

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        """One relevance score in [0, 1] per passage, in order; failures score 0.5 and warn."""
        if not passages:
            return ScoredBatch([])
        deadline = time.monotonic() + self._timeout_s
        try:
            if self._mode == "logprob":
                return self._score_logprob(query, passages, deadline)
            return self._score_grammar(query, passages, deadline)
        except LlmCallError as exc:
            return _neutral(len(passages), f"llm judge failed, every item scored 0.5: {exc}")

    def _read(self, query: str, passage: str) -> str:
        """What the judge reads of `passage`: itself, or its focus when one is set."""
        if not self._focus_tokens:
            return passage
        return focused_passage(query, passage, self._focus_tokens, self._runtime.count_tokens)

    # -- logprob mode ----------------------------------------------------------------------

    def _score_logprob(self, query: str, passages: Sequence[str], deadline: float) -> ScoredBatch:
        runtime = self._runtime
        fixed = runtime.count_chat_tokens(_logprob_messages(query, ""))
        budget = min(self._max_passage_tokens, runtime.n_ctx - fixed - 1)
        if budget < MIN_PASSAGE_TOKENS:
            return _neutral(len(passages), "llm judge: the query alone fills the context")
        prompts = [
            _logprob_messages(query, runtime.truncate(self._read(query, p), budget))
            for p in passages
        ]
        result = runtime.answer_logprobs(prompts, ANSWERS, timeout_s=_left(deadline))
        scores: list[float] = []
        masses: list[float] = []
        failed: list[int] = []
        for i, row in enumerate(result.rows):
            if row is None:
                scores.append(NEUTRAL)
                failed.append(i)
                continue
            log_yes, log_no = row
            # A server's top_logprobs may hold neither answer (both -inf): no evidence.
            neither = log_yes == log_no == -math.inf
            scores.append(NEUTRAL if neither else 1.0 / (1.0 + math.exp(log_no - log_yes)))
            masses.append(math.exp(log_yes) + math.exp(log_no))
        warnings = []
        if result.timed_out:
            done = len(masses)
            warnings.append(
                f"llm judge timed out after {self._timeout_s:g}s: {done} of {len(passages)} "
                f"items scored, the other {len(passages) - done} scored 0.5"
            )
        if masses and sum(masses) / len(masses) < MIN_YES_NO_MASS:
            warnings.append(
                f"llm judge: {runtime.model_id} put only {sum(masses) / len(masses):.0%} of its "
                "first-token probability on yes/no; its scores are unreliable"
            )
        return ScoredBatch(scores, warnings, failed)

    # -- grammar mode ----------------------------------------------------------------------

    def _score_grammar(self, query: str, passages: Sequence[str], deadline: float) -> ScoredBatch:
        """Batches that cannot give every passage `MIN_PASSAGE_TOKENS` in one context are
        split into as few calls as fit."""
        runtime = self._runtime
        query_tokens = runtime.count_tokens(query)
        per_item = _rating_tokens(runtime, 1) + 8  # its rating line plus its label in the prompt
        room = runtime.n_ctx - self._grammar_overhead - query_tokens - 8
        fit = room // (per_item + MIN_PASSAGE_TOKENS)
        if fit < 1:
            return _neutral(len(passages), "llm judge: the query alone fills the context")
        scores: list[float] = []
        warnings: list[str] = []
        failed: list[int] = []
        for start in range(0, len(passages), fit):
            group = passages[start : start + fit]
            budget = min(self._max_passage_tokens, room // len(group) - per_item)
            batch = self._grammar_call(query, group, budget, deadline)
            scores.extend(batch.scores)
            warnings.extend(batch.warnings)
            failed.extend(start + i for i in batch.failed)
        return ScoredBatch(scores, warnings, failed)

    def _grammar_call(
        self, query: str, passages: Sequence[str], budget: int, deadline: float
    ) -> ScoredBatch:
        runtime = self._runtime
        n = len(passages)
        texts = [runtime.truncate(" ".join(self._read(query, p).split()), budget) for p in passages]
        completion = runtime.chat(
            _grammar_messages(query, texts),
            max_tokens=_rating_tokens(runtime, n) + 1,
            grammar=rating_grammar(n),
            timeout_s=_left(deadline),
        )
        ratings = parse_ratings(completion.text, n)
        if ratings is not None:
            return ScoredBatch([r / MAX_RATING for r in ratings])
        if completion.timed_out:
            reason = f"timed out after {self._timeout_s:g}s"
        elif completion.finish_reason == "length":
            reason = f"ran out of tokens after {completion.completion_tokens}"
        else:
            reason = "gave unparseable output"
        shown = completion.text[:80].replace("\n", " | ")
        return _neutral(n, f"llm judge {reason} ({shown!r}); all {n} items scored 0.5")


def rating_grammar(n: int) -> str:
    """GBNF for exactly `n` lines "[i] d" (i = 1..n, d a digit), nothing before or after."""
    if n < 1:
        raise ValueError(f"need at least one item; got {n}")
    lines = ' "\\n" '.join(f'"[{i}] " r' for i in range(1, n + 1))
    return f"root ::= {lines}\nr ::= [0-{MAX_RATING}]\n"


def parse_ratings(text: str, n: int) -> list[int] | None:
    """The n ratings of a reply to `rating_grammar(n)`, or None unless it is exactly that."""
    lines = text.strip().splitlines()
    if len(lines) != n:
        return None
    ratings = []
    for expected, line in enumerate(lines, start=1):
        match = _RATING_LINE.fullmatch(line.strip())
        if match is None or int(match.group(1)) != expected:
            return None
        ratings.append(int(match.group(2)))
    return ratings


def _logprob_messages(query: str, passage: str) -> list[Message]:
    return [
        {"role": "system", "content": LOGPROB_SYSTEM},
        {"role": "user", "content": LOGPROB_USER.format(query=query, passage=passage)},
    ]


def _grammar_messages(query: str, passages: Sequence[str]) -> list[Message]:
    numbered = "\n\n".join(f"[{i}] {p}" for i, p in enumerate(passages, start=1))
    user = GRAMMAR_USER.format(query=query, passages=numbered)
    return [{"role": "system", "content": GRAMMAR_SYSTEM}, {"role": "user", "content": user}]


def _rating_tokens(runtime: ChatModel, n: int) -> int:
    """Tokens of the longest reply `rating_grammar(n)` allows."""
    return runtime.count_tokens("\n".join(f"[{i}] {MAX_RATING}" for i in range(1, n + 1)))


def _left(deadline: float) -> float:
    return max(0.0, deadline - time.monotonic())


def _neutral(n: int, warning: str) -> ScoredBatch:
    return ScoredBatch([NEUTRAL] * n, [warning], list(range(n)))
