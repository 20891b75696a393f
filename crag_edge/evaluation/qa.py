"""Truthfulness on your own documents: free-form answers to questions the corpus answers
and to questions it cannot, scored as Meta's CRAG benchmark (KDD Cup 2024) scores them.

A question file holds one JSON object a line: `{"id", "question", "in_corpus", "must"}`.
`must` lists groups of alternatives; an answer is right when it holds one alternative of
every group (`matches`). Other keys are kept out of the way (e.g. `"evidence"`, a note of
where the pages say it), except `kind`, an optional label (`near`, `far`, ...) that splits
the truthfulness report.

Two systems answer with the same LLM and the same answer prompt
(`answer.generation.answer_reply`): `plain`, the top-k hits' whole chunks, ungraded and
unchecked; and `crag`, `Engine.answer` exactly as a user gets it. Each answer is right,
wrong or refused (answerable questions), refused or invented (the others); truthfulness is
the mean of +1 (right), 0 (refused) and -1 (wrong or invented) over all questions.
"""

from __future__ import annotations

import json
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from crag_edge.answer.finished import AnswerStream
from crag_edge.answer.generation import answer_reply, cited
from crag_edge.citations import locator
from crag_edge.evaluation.answers import context_of_hits
from crag_edge.evaluation.beir import EvalDataError, data_lines
from crag_edge.evaluation.records import RecordLog, run_logged
from crag_edge.models.chat_model import ChatModel
from crag_edge.result import ContextItem, CragResult
from crag_edge.types import Hit

SYSTEMS = ("plain", "crag")
REFUSAL = re.compile(r"insufficient|not enough (information|evidence)", re.IGNORECASE)
"""How the answer prompt's refusal reads (it asks the model to say the evidence is
insufficient), and how CRAG's own insufficient-evidence reply begins."""
REFUSING_FINISHES = frozenset({"insufficient_evidence", "unsupported"})
"""Finish reasons of an answer that is a refusal whatever its text."""
OUTCOMES = ("right", "wrong", "refused", "off_corpus_refused", "off_corpus_invented")
SCORES = {"right": 1, "wrong": -1, "refused": 0, "off_corpus_refused": 0,
          "off_corpus_invented": -1}  # fmt: skip


@dataclass(frozen=True)
class Question:
    """One question, whether the corpus answers it, and what a right answer must hold."""

    question_id: str
    text: str
    in_corpus: bool
    must: tuple[tuple[str, ...], ...] = ()
    kind: str | None = None


def read_questions(path: Path) -> list[Question]:
    """The questions in file order; every problem names the file and line."""
    questions: list[Question] = []
    seen: set[str] = set()
    for number, line in data_lines(path):
        where = f"{path}:{number}"
        try:
            fields = json.loads(line)
        except json.JSONDecodeError as exc:
            raise EvalDataError(f"{where}: not JSON ({exc})") from None
        question = _question(fields, where)
        if question.question_id in seen:
            raise EvalDataError(f"{where}: id {question.question_id!r} is used twice")
        seen.add(question.question_id)
        questions.append(question)
    if not questions:
        raise EvalDataError(f"{path}: no questions")
    return questions


def _question(fields: Any, where: str) -> Question:
    expected = '{"id", "question", "in_corpus": true|false, "must": [["alt", ...], ...]}'
    if not isinstance(fields, dict):
        raise EvalDataError(f"{where}: expected an object {expected}")
    missing = [k for k in ("id", "question", "in_corpus", "must") if k not in fields]
    if missing:
        raise EvalDataError(f"{where}: missing {', '.join(missing)}; expected {expected}")
    qid, text, in_corpus = (fields[k] for k in ("id", "question", "in_corpus"))
    kind = fields.get("kind")
    if isinstance(qid, bool) or not isinstance(qid, str | int) or not str(qid).strip():
        raise EvalDataError(f"{where}: id must be a non-empty string or a number")
    if not isinstance(text, str) or not text.strip():
        raise EvalDataError(f"{where}: question must be a non-empty string")
    if not isinstance(in_corpus, bool):
        raise EvalDataError(f"{where}: in_corpus must be true or false")
    if kind is not None and not isinstance(kind, str):
        raise EvalDataError(f"{where}: kind must be a string")
    must = _must(fields["must"], in_corpus, where)
    return Question(str(qid).strip(), text.strip(), in_corpus, must, kind)


def _must(value: Any, in_corpus: bool, where: str) -> tuple[tuple[str, ...], ...]:
    """An answerable question needs at least one group of non-empty alternatives; one the
    corpus cannot answer has none (there is nothing its answer must hold)."""
    shape = "must must be a list of lists of non-empty strings"
    if not isinstance(value, list) or not all(isinstance(g, list) and g for g in value):
        raise EvalDataError(f"{where}: {shape}")
    if not all(isinstance(a, str) and a.strip() for g in value for a in g):
        raise EvalDataError(f"{where}: {shape}")
    if in_corpus and not value:
        raise EvalDataError(f"{where}: a question in the corpus needs must groups")
    if not in_corpus and value:
        raise EvalDataError(f"{where}: a question not in the corpus has no must groups ([])")
    return tuple(tuple(a.strip() for a in group) for group in value)


# -- scoring ---------------------------------------------------------------------------------


def contains(answer: str, phrase: str) -> bool:
    """Case-insensitive, from the start of a word ("zip" is not in "gzip"; "negat" is in
    "negates"); an option such as `-d` must stand alone (not inside `--dry-run`)."""
    after = r"(?![\w-])" if phrase.startswith("-") else ""
    pattern = rf"(?<![\w-]){re.escape(phrase)}{after}"
    return re.search(pattern, answer, re.IGNORECASE) is not None


def matches(answer: str, must: Sequence[Sequence[str]]) -> bool:
    """One alternative of every group is in the answer."""
    return all(any(contains(answer, phrase) for phrase in group) for group in must)


def refused(answer: str, finish_reason: str) -> bool:
    """The answer declines: CRAG's refusals by their finish reason, the model's (either
    system) by saying the evidence is insufficient or there is not enough information. A
    reply that says so anywhere counts as a refusal, even with a guess beside it; an empty
    one (a stalled model) tells the reader nothing and scores as a refusal too, as a missing
    answer does in the CRAG benchmark (`cut_off` in the report counts them)."""
    if not answer.strip():
        return True
    return finish_reason in REFUSING_FINISHES or REFUSAL.search(answer) is not None


def outcome(question: Question, answer: str, finish_reason: str) -> str:
    """One of `OUTCOMES`."""
    if refused(answer, finish_reason):
        return "refused" if question.in_corpus else "off_corpus_refused"
    if not question.in_corpus:
        return "off_corpus_invented"
    return "right" if matches(answer, question.must) else "wrong"


# -- the systems and their records -----------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    """What one system made of one question: the text a reader is shown, why it ended, the
    passages it was written from, the loop's decision (CRAG) and the support check's report
    on the shown sentences, when the system has one."""

    text: str
    finish_reason: str
    passages: Sequence[ContextItem]
    decision: str | None = None
    support: dict[str, Any] | None = None


System = Callable[[str], Reply]


def qa_systems(
    llm: ChatModel,
    search: Callable[[str], Sequence[Hit]],
    answer: Callable[[str], tuple[CragResult, AnswerStream]],
) -> dict[str, System]:
    """`plain` and `crag` over one LLM; `answer` is `Engine.answer`."""

    def plain(question: str) -> Reply:
        passages = context_of_hits(search(question))
        reply = answer_reply(llm, question, passages)
        text = "".join(reply).strip()
        return Reply(text, str(reply.finish_reason), passages)

    def crag(question: str) -> Reply:
        result, stream = answer(question)
        "".join(stream)
        done = stream.answer
        support = done.support.to_dict()
        decision = str(result.decision)
        return Reply(done.text.strip(), done.finish_reason, result.context, decision, support)

    return {"plain": plain, "crag": crag}


@dataclass(frozen=True)
class QaRecord:
    """One question answered by one system: the line a records file holds. `passages` are
    the shown context, `[n, where, text]` each (`where` as a citation names it: file, then
    page, slide, sheet row or section), so an answer and its citations can be read against it;
    `support` is the support check's report (`supported_share`), when there is one."""

    question_id: str
    question: str
    in_corpus: bool
    system: str
    model: str
    answer: str
    finish_reason: str
    outcome: str
    seconds: float
    passages: list[list[Any]]
    cited: list[int]
    kind: str | None = None
    decision: str | None = None
    support: dict[str, Any] | None = None

    @property
    def key(self) -> tuple[str, str]:
        return (self.question_id, self.system)

    @property
    def asked(self) -> str:
        return self.question


def run_qa(
    questions: Sequence[Question],
    systems: dict[str, System],
    log: RecordLog[QaRecord],
    *,
    on_question: Callable[[], None] | None = None,
) -> list[QaRecord]:
    """Every question through every system; answers already in `log` are reused and scored
    again against the questions as they are now (a corrected `must` needs no new answer)."""
    by_id = {q.question_id: q for q in questions}
    records = run_logged(
        questions,
        list(systems),
        log,
        lambda q: (q.question_id, q.text),
        lambda q, name: _answer(q, name, systems[name], log.model),
        on_question,
    )
    return [_scored(r, by_id[r.question_id]) for r in records]


def _scored(record: QaRecord, question: Question) -> QaRecord:
    scored = outcome(question, record.answer, record.finish_reason)
    return replace(record, in_corpus=question.in_corpus, kind=question.kind, outcome=scored)


def _answer(question: Question, name: str, system: System, model: str) -> QaRecord:
    started = time.perf_counter()
    reply = system(question.text)
    seconds = time.perf_counter() - started
    return QaRecord(
        question_id=question.question_id,
        question=question.text,
        in_corpus=question.in_corpus,
        system=name,
        model=model,
        answer=reply.text,
        finish_reason=reply.finish_reason,
        outcome=outcome(question, reply.text, reply.finish_reason),
        seconds=round(seconds, 3),
        passages=[[p.n, locator(p), p.text] for p in reply.passages],
        cited=[p.n for p in cited(reply.text, reply.passages)],
        kind=question.kind,
        decision=reply.decision,
        support=reply.support,
    )


# -- the report ------------------------------------------------------------------------------


def truthfulness(records: Sequence[QaRecord]) -> float | None:
    """Mean of +1 (right), 0 (refused), -1 (wrong or invented); None without records."""
    if not records:
        return None
    return sum(SCORES[r.outcome] for r in records) / len(records)


def supported_share(records: Sequence[QaRecord]) -> float | None:
    """Share of shown sentences the support check passed, over the records that carry its
    report (`answer.checked.SupportReport.to_dict`); None when none showed a sentence."""
    shown = [s for r in records if r.support for s in r.support["sentences"] if s["shown"]]
    if not shown:
        return None
    return sum(bool(s["supported"]) for s in shown) / len(shown)


def check_seconds(records: Sequence[QaRecord], key: str) -> float | None:
    """The median over answers the check read of `key` in its report: `seconds` (what the
    check cost) or `held_s` (from the model's first word to the first shown sentence)."""
    values = [float(r.support[key]) for r in records if r.support and r.support.get(key) is not None
              and r.support["sentences"]]  # fmt: skip
    return statistics.median(values) if values else None


def judge_calls(records: Sequence[QaRecord]) -> float | None:
    """The mean over answers the check read of the (sentence, passage) pairs it asked the
    LLM about; None when no record carries the count."""
    counts = [int(r.support["judge_calls"]) for r in records
              if r.support and r.support["sentences"] and "judge_calls" in r.support]  # fmt: skip
    return statistics.fmean(counts) if counts else None


def summarise(records: Sequence[QaRecord], systems: Sequence[str]) -> dict[str, dict[str, Any]]:
    """One entry per system: the count of each outcome, truthfulness (overall, and per
    `kind` when questions carry one), the supported share and seconds per question."""
    report: dict[str, dict[str, Any]] = {}
    for name in systems:
        mine = [r for r in records if r.system == name]
        counts = Counter(r.outcome for r in mine)
        kinds = sorted({r.kind for r in mine if r.kind is not None})
        report[name] = {
            "questions": len(mine),
            "answerable": sum(r.in_corpus for r in mine),
            "off_corpus": sum(not r.in_corpus for r in mine),
            **{o: counts[o] for o in OUTCOMES},
            "truthfulness": _rounded(truthfulness(mine)),
            "truthfulness_by_kind": {
                k: _rounded(truthfulness([r for r in mine if r.kind == k])) for k in kinds
            },
            "supported_share": _rounded(supported_share(mine)),
            "check_s_median": _rounded(check_seconds(mine, "seconds"), 2),
            "first_sentence_held_s_median": _rounded(check_seconds(mine, "held_s"), 2),
            "judge_calls_per_answer": _rounded(judge_calls(mine), 2),
            "seconds_per_question": _rounded(
                sum(r.seconds for r in mine) / len(mine) if mine else None, 1
            ),
            "cut_off": sum(r.finish_reason in ("length", "timeout") for r in mine),
        }
    return report


def _rounded(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)
