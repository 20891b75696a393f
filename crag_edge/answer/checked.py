"""The answer a reader sees: each sentence released only once the support check has passed it.

The model's pieces are gathered into sentences. The cheap tier decides what it can as each
sentence completes (a number no passage holds fails; a repeat, or a sentence that only speaks
of the passages, is dropped); the rest waits for the LLM tier (one model, one KV cache: the model
cannot write and check at once). So the model is paused once, after its first sentence, which
is checked and shown while the rest is written; every later sentence is checked when the
model has finished, all within `support_budget_s`. Term coverage alone never
accepts a sentence while the LLM can read it: "If not, X" holds every term of a passage that
says "if so, X". What a sentence that fails becomes depends
on `support_check`: `remove` (default) leaves it out and lists it in the report, `flag` shows
it marked "(unsupported)", `keep` shows every sentence as written. A passed sentence, a
quote included, is still read where it stands before it is shown: one that points back is
read with the sentence it points to (`answer.pointing`), and one that answers nothing asked
waits until something that answers is shown, and is removed if it supports nothing that does
(`answer.answering`). A shown sentence's
citation is corrected to the passage that supports it. Where the question asks for a table
row's cells and the model misstates them (a removed sentence) or states them in part (a
shown one), the row's cells are shown as the row states them
(`table_rows.row_cells_asked`). An answer none of whose sentences is supported is not an
answer. When the loop trusted its evidence (CORRECT), the answer is written
once more from the search's top hits read whole (`support_reread`, `CragResult.reread`) and
checked the same way: the refined strips sometimes lack the sentence that answers, and the
model then answers from memory. Otherwise, or when the second answer fares no better, the
reader gets the insufficient-evidence reply and the finish reason `unsupported`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace

from crag_edge.answer.answering import Answering, Asked, read_against
from crag_edge.answer.attribution import drawn_from, drawn_from_note
from crag_edge.answer.entries import passed_over, said_of_neighbour, value_of_unnamed
from crag_edge.answer.generation import (
    UNSUPPORTED,
    AnswerFinish,
    AnswerStream,
    answer_reply,
    cited,
    stream_answer,
)
from crag_edge.answer.narrowing import passage_places, sentence_locator
from crag_edge.answer.pointing import Said, pointer_fault, statement_read
from crag_edge.answer.restated import other_subject
from crag_edge.answer.support import (
    CITATION,
    LlmSupport,
    Mentioned,
    SentenceSupport,
    TermSupport,
    answer_facts,
    candidates,
    cited_numbers,
    cited_passage,
    claim_text,
    facts,
    held_words,
    quoted_row,
    stated,
    swapped_options,
    term_support,
    unheld_options,
)
from crag_edge.answer.table_rows import (
    RowCells,
    misplaced,
    other_row,
    row_cells_asked,
    unnamed_row,
)
from crag_edge.citations import locator
from crag_edge.config import AnswerSettings
from crag_edge.models.chat_model import ChatModel, FinishReason, TextStream
from crag_edge.result import ContextItem, CragResult
from crag_edge.sentences import sentence_spans
from crag_edge.types import Decision, Embedder, Vector

FLAG = " (unsupported)"
UNASKED = "answers nothing that was asked, and supports no sentence that does"
# Verdicts on sentences that add nothing (a repeat, a sentence only about the passages):
# never shown, not even flagged.
SILENT = ("repeat", "meta")
# The tiers that find a sentence not stated by any passage (rather than out of its place):
# a removed one of these may give way to the table row it misstates (`_row_in_place`).
NOT_STATED = ("terms", "llm", "budget")
_LEADING_CITATIONS = re.compile(r"(?:\[\d+\]\s*)*\[\d+\]")


@dataclass
class SupportReport:
    """Every sentence of the model's answer with its check, in order; `seconds` spent
    checking (model calls included), `mode` the `support_check` setting it ran under,
    `held_s` from the model's first word to the first shown sentence (None: none shown),
    `reread` whether the answer shown was written again from the top hits read whole
    (`support_reread`), `judge_calls` the (sentence, passage) pairs the LLM was asked about:
    the check's cost in model calls, which the cheaper tiers exist to save."""

    mode: str
    sentences: list[SentenceSupport] = field(default_factory=list)
    seconds: float = 0.0
    judge_calls: int = 0
    held_s: float | None = None
    reread: bool = False

    @property
    def supported_share(self) -> float | None:
        """The share of shown sentences the check passed; None when none was shown."""
        shown = [s for s in self.sentences if s.shown]
        return sum(s.supported for s in shown) / len(shown) if shown else None

    @property
    def removed(self) -> list[SentenceSupport]:
        return [s for s in self.sentences if not s.shown]

    def summary(self) -> str:
        """One line for people: `support: 2 of 3 sentences stated by their passages, 1
        removed`."""
        total = len(self.sentences)
        stated = sum(s.supported for s in self.sentences)
        line = f"support: {stated} of {total} sentences stated by their passages"
        if self.removed:
            line += f", {len(self.removed)} removed"
        flagged = [s for s in self.sentences if s.shown and not s.supported]
        if flagged:
            line += f", {len(flagged)} shown unsupported ({self.mode})"
        if self.reread:
            line += "; written again from the top hits read whole"
        return line

    def narrowed(self, item: ContextItem) -> list[tuple[str, str]]:
        """(place, claim) for each shown sentence that passage `item` states in a narrower
        place than the passage's own citation (its row, slide or page): where a reader checks
        that sentence."""
        whole = locator(item)
        return [
            (s.locator, claim_text(s.text))
            for s in self.sentences
            if s.shown and s.passage == item.n and s.locator not in (None, whole)
        ]

    def to_dict(self) -> dict[str, object]:
        return {
            "mode": self.mode,
            "supported_share": self.supported_share,
            "seconds": round(self.seconds, 3),
            "held_s": None if self.held_s is None else round(self.held_s, 3),
            "reread": self.reread,
            "judge_calls": self.judge_calls,
            "sentences": [s.to_dict() for s in self.sentences],
        }


@dataclass
class _HeldSentence:
    """A complete sentence waiting for its verdict; `gap` is the whitespace before it."""

    gap: str
    text: str
    terms: TermSupport
    verdict: SentenceSupport | None = None
    read: Asked | None = None  # how it stands to the question, once asked
    judged: str = ""  # what the judge is asked about (`pointing.statement_read`)

    def said(self) -> Said:
        assert self.verdict is not None
        return Said(self.text, self.verdict.passage, self.verdict.supported)


def complete_sentences(text: str, final: bool) -> list[tuple[int, int]]:
    """Spans of the sentences of `text` that can no longer change: citations that open a
    piece ("[2]" after the period) belong to the sentence before it, and until the answer is
    final its last sentence may still grow."""
    spans: list[tuple[int, int]] = []
    for start, end in sentence_spans(text):
        lead = _LEADING_CITATIONS.match(text, start)
        if spans and lead is not None:
            spans[-1] = (spans[-1][0], lead.end())
            start = lead.end() + len(text[lead.end() : end]) - len(text[lead.end() : end].lstrip())
        if start < end:
            spans.append((start, end))
    return spans if final else spans[:-1]


# Carries an answer on from the text it has so far (`generation.answer_reply`'s `prefix`).
Resume = Callable[[str], TextStream[FinishReason]]
# The answer written again from the top hits read whole, checked (`check_answer`).
Reread = Callable[[], "CheckedAnswer"]


class CheckedAnswer(TextStream[AnswerFinish]):
    """The answer stream as the reader gets it; read `support` once it has ended. With
    `resume`, the model is paused after its first sentence so that the sentence is checked
    and shown before the rest is written."""

    def __init__(
        self,
        stream: AnswerStream | TextStream[AnswerFinish],
        result: CragResult,
        llm: ChatModel | None,
        settings: AnswerSettings,
        resume: Resume | None = None,
        mentioned: Mentioned = None,
        reread: Reread | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self._inner: TextStream[AnswerFinish] | TextStream[FinishReason] = stream
        self._resume = resume
        self._context = result.context
        self._question = result.question
        self._passages = {item.n: item.text for item in result.context}
        self._answering = Answering(result.question)
        self._embedder = embedder
        self._question_vector: Vector | None = None
        self._places = passage_places(result.context, (hit.chunk for hit, _ in result.hits))
        self._llm = llm
        self._settings = settings
        self._mentioned = mentioned
        self._reread = reread
        self._again: CheckedAnswer | None = None
        self.support = SupportReport(settings.support_check)
        self._first_word: float | None = None
        self._seen_sentences: list[_HeldSentence] = []
        super().__init__(self._checked(), stream.usage)

    def _checked(self) -> Generator[str, None, AnswerFinish]:
        if not self._context or self._llm is None:
            yield from self._inner
            return self._inner.finish_reason
        buffer, taken = "", 0
        pending: list[_HeldSentence] = []
        may_pause = self._resume is not None
        try:
            while True:
                for piece in self._inner:
                    self._first_word = self._first_word or time.monotonic()
                    buffer += piece
                    taken = self._take(buffer, taken, pending, final=False)
                    yield from self._release(pending)
                    if may_pause and pending and pending[0].verdict is None:
                        break
                else:
                    break
                may_pause = False
                yield from self._check_first(pending, buffer)
        finally:
            self._inner.close()
        self._take(buffer, taken, pending, final=True)
        yield from self._conclude(pending, buffer)
        return self._finish_reason()

    def _check_first(self, pending: list[_HeldSentence], buffer: str) -> Generator[str, None, None]:
        """The first sentence waiting for the LLM is checked as soon as it is written, so the
        reader need not wait for the whole answer: the model stops (one model, one KV cache),
        the sentence is checked and released, and the model carries on from `buffer`, its
        prompt mostly still cached. Once per answer: each pause costs a re-read of the
        question and the answer so far (timed in docs/answer-quality.md)."""
        self._inner.close()
        started = time.monotonic()
        assert self._llm is not None
        with self._llm.cache_kept():
            self._judge(pending[:1])
        self.support.seconds += time.monotonic() - started
        yield from self._release(pending)
        assert self._resume is not None
        self._inner = self._resume(buffer)

    def _take(self, buffer: str, taken: int, pending: list[_HeldSentence], *, final: bool) -> int:
        """Queue the sentences completed since `taken` (an offset into `buffer`); each is
        read by the cheap tier as it completes."""
        for start, end in complete_sentences(buffer, final):
            if end <= taken:
                continue
            text, gap, taken = buffer[start:end], buffer[taken:start], end
            if not any(c.isalnum() for c in claim_text(text)):
                continue  # a stray citation or punctuation: nothing to show or check
            terms = term_support(text, self._context, self._mentioned, self._question)
            sentence = _HeldSentence(gap, text, terms)
            before = [*self._seen_sentences, *pending]
            self._read_by_terms(sentence, before)
            spoken = [s for s in before if s.verdict is None or s.verdict.checked_by not in SILENT]
            sentence.judged = statement_read(text, spoken[-1].text if spoken else None)
            pending.append(sentence)
        return taken

    def _read_by_terms(self, sentence: _HeldSentence, before: Sequence[_HeldSentence]) -> None:
        """The cheap tier's verdicts: a number or a name no passage holds fails at once; a
        repeat of an earlier sentence (its citations aside), and a sentence that says nothing
        of its own ("This is [2].") or only speaks of the passages ("This is the evidence
        from [2].") is dropped; a passage's own words, quoted, pass; the rest waits for the
        LLM."""
        terms = sentence.terms
        if self._settings.support_check == "keep":
            return
        claim = claim_text(sentence.text)
        if any(claim_text(p.text) == claim for p in before):
            sentence.verdict = _verdict(sentence, None, 0.0, "repeat", supported=False)
        elif terms.meta:
            sentence.verdict = _verdict(sentence, None, 0.0, "meta", supported=False)
        elif terms.missing:
            n, share = terms.best()
            sentence.verdict = _verdict(sentence, n, share, "terms", supported=False)
        elif terms.quoted is not None:
            sentence.verdict = _verdict(sentence, terms.quoted, 1.0, "quote", supported=True)

    def _release(self, pending: list[_HeldSentence]) -> Generator[str, None, None]:
        """Yield the decided sentences at the head of the queue, in order, once read where
        they stand (`_in_place`); a passed sentence that does not answer waits while nothing
        that answers has been shown (`answering.Answering`)."""
        while pending and pending[0].verdict is not None:
            head = pending[0]
            before = self._last_seen()
            self._in_place(head, before)
            if self._waits(head, before):
                return
            self._seen_sentences.append(pending.pop(0))
            yield from self._show(head)

    def _last_seen(self) -> Said | None:
        """The sentence a reader would see last, repeats and sentences about the passages
        aside (they are never shown); None before the first."""
        spoken = [
            s for s in self._seen_sentences if s.verdict and s.verdict.checked_by not in SILENT
        ]
        return spoken[-1].said() if spoken else None

    def _in_place(self, sentence: _HeldSentence, before: Said | None) -> None:
        """Fail a passed sentence that the pointer rules fail where it stands
        (`pointing.pointer_fault`): a quote's "This feature" after a sentence its passage
        does not state, a pointer after a removed sentence, one pointing forward; or one
        whose facts its passage does not hold where the sentence puts them (`_fact_fault`)."""
        verdict = sentence.verdict
        if verdict is None or not verdict.supported:
            return
        fault = pointer_fault(sentence.said(), before, self._passages) or self._fact_fault(
            sentence.text, verdict.passage, before
        )
        if fault is not None:
            sentence.verdict = _failed(verdict, *fault)

    def _fact_fault(
        self, text: str, passage: int | None, before: Said | None
    ) -> tuple[str, str] | None:
        """Whichever tier passed it, a sentence whose options or table values its passage
        does not hold where the sentence puts them (`_option_fault`, `_row_fault`), or
        whose words its passage says of another subject (`_subject_fault`)."""
        if passage is None or passage not in self._passages:
            return None
        claim = claim_text(text)
        return (
            self._option_fault(claim, passage)
            or self._row_fault(claim, passage, before)
            or self._subject_fault(claim, passage)
            or self._entry_fault(claim, passage)
        )

    def _subject_fault(self, claim: str, passage: int) -> tuple[str, str] | None:
        """The passage's words restated of another subject (`restated.other_subject`):
        "The harbour crane runs on biodiesel …" of "The harbour's emergency generator runs
        on biodiesel …"."""
        if (theirs := other_subject(claim, self._passages[passage])) is None:
            return None
        return "subject", f"says what passage [{passage}] says of {theirs}"

    def _entry_fault(self, claim: str, passage: int) -> tuple[str, str] | None:
        """A definition entry's words said of the term beside it
        (`entries.said_of_neighbour`: "The git stash apply command … removes it …" of pop's
        entry), its value said of a subject the passage never names
        (`entries.value_of_unnamed`: "Reflog entries are kept for 60 days" of
        gc.rerereResolved's), or a command named over the sibling the question names
        (`entries.passed_over`: `git worktree prune` asked what removes a worktree)."""
        item = next(item for item in self._context if item.n == passage)
        if names := said_of_neighbour(claim, self._question, item, self._context):
            return "entry", f"says of {names[0]} what passage [{passage}] says of {names[1]}"
        if unnamed := value_of_unnamed(claim, self._question, item):
            subject, term = unnamed
            why = f"gives {term}'s value in passage [{passage}] to {subject}, which it never names"
            return "entry", why
        if over := passed_over(claim, self._question, item.text):
            return "entry", f"names {over[0]} where passage [{passage}] names {over[1]}"
        return None

    def _option_fault(self, claim: str, passage: int) -> tuple[str, str] | None:
        """An option the passage does not hold (`support.unheld_options`), or one its
        lines about the sentence do not name where they name others
        (`support.swapped_options`)."""
        if options := unheld_options(claim, self._question, self._passages[passage]):
            return "option", f"names {', '.join(options)}, which passage [{passage}] does not hold"
        item = next(item for item in self._context if item.n == passage)
        if options := swapped_options(claim, self._question, item):
            where = f"passage [{passage}]'s lines about it name other options"
            return "option", f"names {', '.join(options)}, where {where}"
        return None

    def _row_fault(self, claim: str, passage: int, before: Said | None) -> tuple[str, str] | None:
        """A table row's value taken for something the row is not about: naming no row
        (`table_rows.unnamed_row`), another row or a column it does not stand under
        (`table_rows.misplaced`: "abbrev() returns 192.168.0.0/24" of a row whose
        `abbrev(cidr)` is 192.168.0/24), or speaking of another row than the question asks
        about (`table_rows.other_row`). A sentence pointing back names what the sentence
        before it names: "Its range is …" after "An integer takes 4 bytes." is stated of
        the integer row."""
        rows = self._passages[passage]
        naming = statement_read(claim, None if before is None else before.text)
        if unnamed_row(naming, self._question, rows):
            why = "takes a value from a row of passage [{}] without naming its subject"
        elif misplaced(naming, answer_facts(claim, self._question), rows, facts, held_words):
            why = "takes a value of passage [{}] from a row or column it does not name"
        elif subject := other_row(naming, self._question, rows):
            why = f"speaks of {subject} in passage [{{}}], not of what was asked"
        else:
            return None
        return "row", why.format(passage)

    def _waits(self, sentence: _HeldSentence, before: Said | None) -> bool:
        """Whether a passed sentence is held back: it does not answer, and nothing shown yet
        answers (or it neither addresses the question nor supports what does)."""
        verdict = sentence.verdict
        if verdict is None or not verdict.supported:
            return False
        leans = before is not None and before.supported
        read = self._read(sentence)
        return self._answering.decide(read, sentence.text, verdict.passage, leans) is None

    def _read(self, sentence: _HeldSentence) -> Asked:
        """How the sentence stands to the question (`answering.read_against`), read once; a
        sentence restating a table row's cells is read as the row with its column names."""
        if sentence.read is None:
            similarity = None if self._embedder is None else self._similarity
            quoted = sentence.terms.quoted
            row = None if quoted is None else quoted_row(sentence.text, self._passages[quoted])
            sentence.read = read_against(self._question, row or sentence.text, similarity)
        return sentence.read

    def _similarity(self, claim: str) -> float:
        """The embedder's cosine between the question and a claim."""
        assert self._embedder is not None
        if self._question_vector is None:
            self._question_vector = self._embedder.embed([self._question])[0]
        return float(self._embedder.embed([claim])[0] @ self._question_vector)

    def _decide_in_place(self, pending: Sequence[_HeldSentence]) -> None:
        """The whole answer's last word on what is still waiting: the pointer rules in
        order, then every passed sentence that answers nothing asked and supports no
        sentence that does fails (`Answering.finally_decide`)."""
        before = self._last_seen()
        shown_before = before is not None and before.supported
        for sentence in pending:
            self._in_place(sentence, before)
            if sentence.verdict is not None and sentence.verdict.checked_by not in SILENT:
                before = sentence.said()
        waiting = [s for s in pending if s.verdict is not None and s.verdict.supported]
        reads = [(self._read(s), s.text, s.verdict.passage if s.verdict else None) for s in waiting]
        for sentence, shown in zip(
            waiting, self._answering.finally_decide(reads, shown_before), strict=True
        ):
            if not shown and sentence.verdict is not None:
                sentence.verdict = _failed(sentence.verdict, "unasked", UNASKED)

    def _conclude(self, pending: list[_HeldSentence], buffer: str) -> Generator[str, None, None]:
        """Decide what waits (the LLM tier, within the budget), release it, and stand in the
        insufficient-evidence reply for an answer with nothing left to show."""
        started = time.monotonic()
        self._judge([p for p in pending if p.verdict is None])
        self._decide_in_place(pending)
        self.support.seconds += time.monotonic() - started
        for sentence in pending:
            self._seen_sentences.append(sentence)
            yield from self._show(sentence)
        yield from self._complete_rows()
        note = drawn_from_note(drawn_from(buffer, self._context))
        if self._settings.support_check == "keep" and note and not cited(buffer, self._context):
            yield note
        if not any(s.shown for s in self.support.sentences) and self._answered():
            yield from self._answer_again()

    def _answer_again(self) -> Generator[str, None, None]:
        """The answer written again (`reread`), when there is one and the model ended
        its first answer on its own; else, or when the second answer is empty, the
        insufficient-evidence reply. Every sentence of both answers is in the report, in the
        order written."""
        ended = self._inner.finish_reason == "stop"
        again = self._reread() if self._reread is not None and ended else None
        if again is None:
            yield UNSUPPORTED
            return
        self.support.reread = True
        wrote = False
        for piece in again:
            if self.support.held_s is None and self._first_word is not None:
                self.support.held_s = time.monotonic() - self._first_word
            wrote = True
            yield piece
        self.support.sentences += again.support.sentences
        self.support.seconds += again.support.seconds
        self.support.judge_calls += again.support.judge_calls
        if wrote:
            self._again = again
        else:  # the second answer wrote nothing: the first one's verdict stands
            yield UNSUPPORTED

    def _answered(self) -> bool:
        """Whether the model wrote anything to check: an empty or stalled answer keeps its
        own finish reason, so its note says why."""
        return bool(self.support.sentences)

    def _judge(self, waiting: Sequence[_HeldSentence]) -> None:
        """The LLM tier for every waiting sentence: its best candidate first, the next one
        for those that failed; a passage it passes by is kept over a higher score it fails
        by; what the deadline leaves unchecked is decided by terms."""
        deadline = time.monotonic() + self._settings.support_budget_s
        assert self._llm is not None
        tier = LlmSupport(self._llm, self._settings.support_judge_reads)
        best: dict[int, tuple[bool, float, int]] = {}  # (passes, score, passage)
        for round_ in range(2):
            asks = [
                (i, s.judged, c[round_])
                for i, s in enumerate(waiting)
                if len(c := candidates(s.terms, cited_numbers(s.text))) > round_
                and not best.get(i, (False,))[0]
            ]
            scores = tier.scores(self._context, [(t, n) for _, t, n in asks], deadline)
            self.support.judge_calls += len(asks)
            for (i, _, n), score in zip(asks, scores, strict=True):
                if score is None:
                    continue
                passes = self._passes(waiting[i].terms, (n, score))
                best[i] = max(best.get(i, (False, -1.0, n)), (passes, score, n))
        for i, sentence in enumerate(waiting):
            scored = (best[i][2], best[i][1]) if i in best else None
            sentence.verdict = self._llm_verdict(sentence, scored)

    def _passes(self, terms: TermSupport, scored: tuple[int, float] | None) -> bool:
        settings = self._settings
        return stated(terms, scored, settings.support_threshold, settings.support_threshold_located)

    def _llm_verdict(
        self, sentence: _HeldSentence, scored: tuple[int, float] | None
    ) -> SentenceSupport:
        if scored is None:  # the budget ran out first: the terms decide, strictly
            n, share = sentence.terms.best()
            ok = share >= self._settings.support_terms_accept and not sentence.terms.missing
            return _verdict(sentence, n, share, "budget", supported=ok)
        supported = self._passes(sentence.terms, scored)
        n, score = scored
        if supported:
            n = cited_passage(sentence.terms, scored, self._settings.support_threshold)
        return _verdict(sentence, n, score, "llm", supported=supported)

    def _show(self, sentence: _HeldSentence) -> Generator[str, None, None]:
        verdict = sentence.verdict
        assert verdict is not None
        mode = self._settings.support_check
        silent = verdict.checked_by in SILENT
        shown = verdict.supported or (mode != "remove" and not silent)
        text = sentence.text
        passage = verdict.passage
        if mode != "keep" and verdict.supported and passage is not None:
            text = text if passage in verdict.cited else with_citation(text, passage)
        elif mode == "flag" and not verdict.supported:
            text += FLAG
        record = replace(verdict, text=text, shown=shown, locator=self._locator(verdict))
        self.support.sentences.append(record)
        if not shown:
            yield from self._row_in_place(sentence)
            return
        if self.support.held_s is None and self._first_word is not None:
            self.support.held_s = time.monotonic() - self._first_word
        yield (sentence.gap if any(s.shown for s in self.support.sentences[:-1]) else "") + text

    def _row_in_place(self, sentence: _HeldSentence) -> Generator[str, None, None]:
        """In place of a removed sentence that misstates a table row the question asks
        about, that row's cells as the row states them (`table_rows.row_cells_asked`)."""
        verdict = sentence.verdict
        if self._settings.support_check != "remove" or verdict is None:
            return
        found = self._row_asked(sentence) if verdict.checked_by in NOT_STATED else None
        if found is not None:
            yield from self._show_row(sentence, *found)

    def _complete_rows(self) -> Generator[str, None, None]:
        """After the answer, the cells of a table row the question asks about whose list
        the shown sentences state only in part ("can use the log link" of a row listing
        identity, log, sqrt), as the row states them."""
        if self._settings.support_check == "keep":
            return
        for sentence in list(self._seen_sentences):
            if sentence.verdict is None or not sentence.verdict.supported:
                continue
            found = self._row_asked(sentence)
            shown = " ".join(s.text for s in self.support.sentences if s.shown)
            if found is not None and found[1].list_part_said(shown):
                yield from self._show_row(replace(sentence, gap=" "), *found)

    def _row_asked(self, sentence: _HeldSentence) -> tuple[int, RowCells] | None:
        """The passage and the cells of the table row the question asks about and the
        sentence speaks of, from the passage holding most of its terms first."""
        claim = claim_text(sentence.text)
        ranked = sorted(self._context, key=lambda item: -sentence.terms.shares.get(item.n, 0.0))
        for item in ranked:
            cells = row_cells_asked(claim, self._question, item.text, facts, held_words)
            if cells is not None:
                return item.n, cells
        return None

    def _show_row(
        self, sentence: _HeldSentence, n: int, cells: RowCells
    ) -> Generator[str, None, None]:
        """The row's cells shown as a sentence of the answer, cited to passage `n` and its
        row; once per answer."""
        text = f"{cells.text} [{n}]."
        if any(s.shown and s.text == text for s in self.support.sentences):
            return
        row = SentenceSupport(text, True, 1.0, n, (n,), "row-cells", True)
        yield from self._show(replace(sentence, text=text, verdict=row))

    def _locator(self, verdict: SentenceSupport) -> str | None:
        """Where the passage that states a supported sentence is cited for it."""
        item = next((c for c in self._context if c.n == verdict.passage), None)
        if not verdict.supported or item is None:
            return None
        return sentence_locator(verdict.text, item, self._places[item.n])

    def _finish_reason(self) -> AnswerFinish:
        """`unsupported` when the model ended its answer and no sentence of it was shown. An
        answer cut off or stalled keeps that reason, so its note says what to change (the
        reader still gets the insufficient-evidence reply in place of what was not stated)."""
        if self._again is not None:
            return self._again.finish_reason
        inner = self._inner.finish_reason
        shown = any(s.shown for s in self.support.sentences)
        return "unsupported" if inner == "stop" and self.support.sentences and not shown else inner


def _verdict(
    sentence: _HeldSentence, n: int | None, score: float, tier: str, *, supported: bool
) -> SentenceSupport:
    reason = "" if supported else _why(sentence, n, score, tier)
    return SentenceSupport(
        text=sentence.text,
        supported=supported,
        score=round(score, 4),
        passage=n,
        cited=cited_numbers(sentence.text),
        checked_by=tier,
        shown=supported,
        reason=reason,
    )


def _failed(verdict: SentenceSupport, tier: str, reason: str) -> SentenceSupport:
    """A passed sentence failed by a rule that reads it in its answer (`tier`, `reason`)."""
    return replace(verdict, supported=False, shown=False, checked_by=tier, reason=reason)


def _why(sentence: _HeldSentence, n: int | None, score: float, tier: str) -> str:
    if tier == "repeat":
        return "repeats an earlier sentence"
    if tier == "meta":
        return "says nothing of its own, or only speaks of the passages"
    if sentence.terms.missing:
        return f"no passage holds {', '.join(sentence.terms.missing)}"
    if n is None:
        return "no passage to check it against"
    if tier == "llm":
        return f"no passage states it (best [{n}], support {score:.2f})"
    return f"not checked in time; passage [{n}] holds {score:.0%} of its terms"


def with_citation(sentence: str, n: int) -> str:
    """The sentence citing passage `n`: its own citations replaced, or `[n]` added before
    its closing punctuation."""
    bare = CITATION.sub("", sentence).rstrip()
    if bare and bare[-1] in ".!?":
        return f"{bare[:-1]} [{n}]{bare[-1]}"
    return f"{bare} [{n}]"


def check_answer(
    stream: AnswerStream,
    result: CragResult,
    llm: ChatModel | None,
    settings: AnswerSettings,
    mentioned: Mentioned = None,
    embedder: Embedder | None = None,
) -> CheckedAnswer:
    """The support-checked stream of `stream`, written from `result.context` by `llm`; a
    model that can continue a reply is paused after its first sentence, and an answer with
    nothing stated is written again from `result.reread` when the loop trusted its
    evidence. `mentioned` as for `support.term_support`; `embedder` (the corpus's) tells
    how near each sentence's meaning is to the question's (`answering.read_against`)."""

    def resume(prefix: str) -> TextStream[FinishReason]:
        assert llm is not None
        return answer_reply(llm, result.question, result.context, prefix=prefix)

    def reread() -> CheckedAnswer:
        again = result.read_again()
        return check_answer(stream_answer(llm, again), again, llm, settings, mentioned, embedder)

    can_resume = llm is not None and llm.continues
    trusted = result.decision == Decision.CORRECT
    can_reread = settings.support_reread and trusted and bool(result.reread)
    return CheckedAnswer(
        stream,
        result,
        llm,
        settings,
        resume if can_resume else None,
        mentioned,
        reread if can_reread else None,
        embedder,
    )
