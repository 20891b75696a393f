"""Question to complete answer, for plain RAG and for CRAG, timed the same way.

Plain RAG is the baseline the CRAG paper compares against: the top-k whole chunks, no
grading, no correction, the same generator call (`generation.answer_reply`) and the same
LLM. Both paths are timed by `answer.timing` (evidence ready, first word, last word), so
their ratio compares like with like. Used by `benchmarks/bench_answer_latency.py` and
`scripts/measure_answer_latency.py`.
"""

from __future__ import annotations

from dataclasses import dataclass

from crag_edge.answer.generation import answer_reply
from crag_edge.answer.timing import AnswerClock, AnswerTimings
from crag_edge.engine import Engine
from crag_edge.evaluation.answers import context_of_hits
from crag_edge.groups import CorpusView
from crag_edge.models.registry import ModelNotInstalledError

PLAIN_TOP_K = 10  # the CRAG paper's plain RAG reads the top 10 documents
# Questions sample_corpus/ answers; the first is the one `make demo` asks.
SAMPLE_QUESTIONS = (
    "How does crag-edge decide whether retrieved evidence can be trusted?",
    "How does the waggle dance tell other bees the distance to food?",
    "What does photosynthesis turn light into?",
)


@dataclass(frozen=True)
class TimedReply:
    """One answer, whole, with why it ended, where its time went and how many context items
    it read."""

    text: str
    finish_reason: str
    timings: AnswerTimings
    context_items: int


def plain_answer(engine: Engine, question: str, top_k: int = PLAIN_TOP_K) -> TimedReply:
    """Plain RAG: the top-k hits' whole chunks straight into the generator's prompt."""
    clock = AnswerClock()
    context = context_of_hits(engine.search(question, top_k=top_k, view=CorpusView.everything()))
    clock.evidence_ready()
    llm = engine.llm_factory()
    if llm is None:
        raise ModelNotInstalledError("no LLM installed: run `crag-edge models pull`")
    stream = answer_reply(llm, question, context)
    text = "".join(clock.read(stream))
    return TimedReply(text, stream.finish_reason, clock.timings(stream.usage), len(context))


def crag_answer(engine: Engine, question: str) -> TimedReply:
    """The corrective loop, then the answer from its final context (`Engine.answer`)."""
    result, stream = engine.answer(question, view=CorpusView.everything())
    "".join(stream)
    answer = stream.answer
    return TimedReply(answer.text, answer.finish_reason, answer.timings, len(result.context))
