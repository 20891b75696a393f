"""The local LLM as a labeller: it writes questions for chunks and judges pairs.

Both are slow (an LLM call per chunk and per pair), which is why labelling is checkpointed
per unit. The judge's raw P(yes) is skewed towards 1, so it is
passed through the LLM tier's calibration (`calibration_llm` in the settings) before it
becomes part of a soft label; without a fitted calibration the raw score is used as is.
"""

from __future__ import annotations

from collections.abc import Sequence

from crag_edge.config import Settings
from crag_edge.grading.calibration import Calibration, calibration
from crag_edge.grading.llm_judge import LlmJudge
from crag_edge.models.chat_model import ChatModel
from crag_edge.models.llm import load_llm

QUESTION_SYSTEM = "You write the questions people type into a search box."
QUESTION_USER = (
    "Write one question that the following passage answers. Reply with the question only.\n\n"
    "Passage: {passage}"
)
MAX_QUESTION_TOKENS = 48
MAX_PASSAGE_TOKENS = 256
MIN_QUESTION_WORDS = 3


class LlmLabeller:
    """`Labeller` over a loaded GGUF chat model and the project's LLM judge."""

    def __init__(self, runtime: ChatModel, judge: LlmJudge, calibrate: Calibration) -> None:
        self._runtime = runtime
        self._judge = judge
        self._calibrate = calibrate

    @classmethod
    def from_settings(cls, settings: Settings) -> LlmLabeller:
        """The configured LLM; raises if llama-cpp-python or the model is not installed."""
        runtime = load_llm(settings.models)
        judge = LlmJudge(runtime, max_passage_tokens=MAX_PASSAGE_TOKENS)
        return cls(runtime, judge, calibration(settings.grading.calibration_llm))

    @property
    def name(self) -> str:
        return self._runtime.model_id

    def question(self, passage: str) -> str | None:
        """A question the passage answers, or None when the reply is not one."""
        text = self._runtime.truncate(passage, MAX_PASSAGE_TOKENS)
        reply = self._runtime.chat(
            [
                {"role": "system", "content": QUESTION_SYSTEM},
                {"role": "user", "content": QUESTION_USER.format(passage=text)},
            ],
            max_tokens=MAX_QUESTION_TOKENS,
        )
        lines = [ln.strip().strip("\"'") for ln in reply.text.splitlines() if ln.strip()]
        if reply.timed_out or not lines or len(lines[0].split()) < MIN_QUESTION_WORDS:
            return None
        return lines[0]

    def judge(self, query: str, passages: Sequence[str]) -> list[float]:
        """Calibrated probability of relevance per passage (0.5 where the judge failed)."""
        batch = self._judge.score(query, passages)
        return [float(p) for p in self._calibrate(batch.scores)]
