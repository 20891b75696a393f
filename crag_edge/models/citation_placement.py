"""A passage number never stands where the answer's words belong.

Small models asked to cite numbered passages sometimes end the answer's first sentence on the
citation itself: "The command to remove a linked working tree is [5]." The reader learns
which passage to open, not the answer. While a cited answer writes its first sentence, the
tokens that open a citation are masked right after a word that needs a complement (a copula,
an article, "use", a colon), so the model writes the content and cites after it. Later
sentences are left alone: there "This is described in [2]." is a citation, not a lost answer.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from llama_cpp import Llama

_NEEDS_COMPLEMENT = re.compile(
    r"(?:\b(?:is|are|was|were|be|been|the|a|an|use|using|run|called|named)|:)\s*$",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?]\s")
_CITATION_SPELLINGS = ("[1]", " [1]", "([1])", " ([1])")


class CitationPlacement:
    """Builds, per answer, a llama.cpp logits processor that keeps the first sentence's
    content in words. The tokens that open a citation are read from the model's own
    vocabulary, so the rule holds for any tokenizer."""

    def __init__(self, llm: Llama) -> None:
        self._llm = llm
        openers = {
            llm.tokenize(spelling.encode(), add_bos=False, special=False)[0]
            for spelling in _CITATION_SPELLINGS
        }
        self._openers = np.array(sorted(openers), dtype=np.intp)

    def processor(self, prompt_tokens: int) -> _FirstSentenceRule:
        """The rule for one answer whose prompt is `prompt_tokens` long."""
        return _FirstSentenceRule(self._llm, self._openers, prompt_tokens)


class _FirstSentenceRule:
    """Stateful across one generation: once the first sentence has ended, it steps aside."""

    def __init__(self, llm: Llama, openers: npt.NDArray[np.intp], prompt_tokens: int) -> None:
        self._llm = llm
        self._openers = openers
        self._prompt_tokens = prompt_tokens
        self._first_sentence_done = False

    def __call__(
        self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]
    ) -> npt.NDArray[np.single]:
        if self._first_sentence_done:
            return scores
        written = self._llm.detokenize(list(input_ids[self._prompt_tokens :]))
        text = written.decode("utf-8", errors="ignore")
        if _SENTENCE_END.search(text):
            self._first_sentence_done = True
        elif _NEEDS_COMPLEMENT.search(text):
            scores[self._openers] = -np.inf
        return scores
