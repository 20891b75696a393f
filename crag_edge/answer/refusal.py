"""What a reader is told when there is no whole answer, and what to do next: one account for
every face (the CLI, the TUI, `/v1/answer`, the chat API, MCP).

Three cases, told apart because each asks something different of the reader:

- `nothing_found`: nothing relevant was found (the loop's verdict INCORRECT, no evidence):
  the documents do not seem to cover the question; ask in their words, or add documents.
- `not_stated`: relevant passages were found, but none of them states an answer (the support
  check removed every sentence the model wrote from them: finish reason `unsupported`). The
  passages may still hold what the reader wants, so they are listed with their places
  (`ch02.en.html § 2.4.1`) to be read.
- `stopped`: the answer was stopped (no progress for `llm_stall_timeout_s`, cut at
  `llm_max_tokens`) or the model wrote nothing: what to change.

The answer's own text already says which of the first two it is (`generation.INSUFFICIENT`,
`generation.UNSUPPORTED`); the refusal adds the next step and the passages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from crag_edge.answer.generation import AnswerFinish, source_line
from crag_edge.answer.views import sources
from crag_edge.citations import locator
from crag_edge.config import ModelSettings, env_name
from crag_edge.result import ContextItem, CragResult

RefusalKind = Literal["nothing_found", "not_stated", "stopped"]
# The passages a `not_stated` refusal lists, best first: what a reader would open.
PASSAGES_LISTED = 5


@dataclass(frozen=True)
class Refusal:
    """Why there is no whole answer (`reason`), what the reader can do (`next_step`), and the
    passages found, with their places, when reading them is that step."""

    kind: RefusalKind
    reason: str
    next_step: str
    passages: tuple[ContextItem, ...] = ()

    @property
    def note(self) -> str:
        """One line: the reason and the next step."""
        return f"{self.reason}; {self.next_step}"

    def lines(self) -> list[str]:
        """For people: the next step, then each passage by its place."""
        step = self.next_step[:1].upper() + self.next_step[1:]
        listed = [f"  {source_line(item)}" for item in self.passages]
        return [step + (":" if listed else "."), *listed]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "reason": self.reason,
            "next_step": self.next_step,
            "passages": sources(self.passages),
        }


def refusal(
    finish: AnswerFinish, text: str, result: CragResult, settings: ModelSettings
) -> Refusal | None:
    """The refusal of an answer that ended with `finish` and `text`, written from `result`;
    None for an answer that ended on its own with something to read."""
    if finish == "insufficient_evidence":
        return Refusal(
            "nothing_found",
            "nothing relevant to the question was found in the documents",
            "ask again in the words the documents would use, or add documents that cover it",
        )
    if finish == "unsupported":
        return Refusal(
            "not_stated",
            "relevant passages were found, but none of them states an answer to the question",
            "read the passages found, where they are",
            _best(result),
        )
    return _stopped(finish, text, settings)


def _stopped(finish: AnswerFinish, text: str, settings: ModelSettings) -> Refusal | None:
    if finish == "timeout":
        return Refusal(
            "stopped",
            f"the model made no progress for {settings.llm_stall_timeout_s:g} s and the "
            "answer was stopped",
            f"retry on a less busy machine or raise {env_name('llm_stall_timeout_s')}",
        )
    if finish == "length":
        return Refusal(
            "stopped",
            f"the answer was cut at {settings.llm_max_tokens} tokens",
            f"raise {env_name('llm_max_tokens')}",
        )
    if not text.strip():
        return Refusal(
            "stopped",
            "the model wrote nothing",
            f"retry, or set {env_name('llm')} to a larger model",
        )
    return None


def _best(result: CragResult) -> tuple[ContextItem, ...]:
    """The passages to read first: those of the chunks the grading kept (not the hits read
    whole again, ungraded, for a second answer), the best graded first, one per place (a
    refined context may hold several strips of one section)."""
    grades = {hit.chunk.chunk_id: grade.score for hit, grade in result.hits if grade.kept}
    kept = [item for item in result.context if item.chunk_id in grades] or result.context
    first: dict[str, ContextItem] = {}
    for item in sorted(kept, key=lambda item: (-grades.get(item.chunk_id, 0.0), item.n)):
        first.setdefault(locator(item), item)
    return tuple(first.values())[:PASSAGES_LISTED]
