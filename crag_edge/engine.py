"""The engine: one corpus, its models and settings, and the order of the pipeline's stages.

Stages: ingest; and per question, the corrective loop (`loop.CragLoop`: retrieve, grade,
correct, refine), then optionally generation (`generation.stream_answer`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any, Unpack

from crag_edge import arguments
from crag_edge.answer.checked import check_answer
from crag_edge.answer.finished import AnswerStream
from crag_edge.answer.generation import stream_answer
from crag_edge.answer.timing import AnswerClock
from crag_edge.arguments import Lookup
from crag_edge.cancellation import Cancellation, maybe_scope
from crag_edge.config import Settings
from crag_edge.correction.fallback import build_providers
from crag_edge.grading import Calibrations, Grader, corpus_calibration
from crag_edge.grading.factory import build_grader
from crag_edge.groups import CorpusView, FolderGroups, Groups
from crag_edge.ingest import Format, IngestReport, ProgressEvent, ingest
from crag_edge.locations import parse_location
from crag_edge.loop import CragLoop, Request, Stages
from crag_edge.models.llm import Message, SharedLlm
from crag_edge.models.registry import load_embedder
from crag_edge.observability import AuditEvent, AuditSink, Metrics
from crag_edge.progress import StageEvent, StageListener
from crag_edge.result import CragResult
from crag_edge.retrieval import Retriever
from crag_edge.retrieval.lexical import mentions
from crag_edge.retrieval.passages import Passage, passages
from crag_edge.store import CorpusBackend
from crag_edge.store.factory import is_database_url, open_corpus, open_or_create_corpus
from crag_edge.text_boundary import asked_question, repair
from crag_edge.types import Closing, Embedder, Hit


class Engine(Closing):
    """A corpus opened for ingest and search. Use `Engine.open`; close it (or use `with`).
    Closing twice is harmless; any other use of a closed engine raises ValueError."""

    def __init__(
        self,
        corpus: CorpusBackend,
        embedder: Embedder,
        settings: Settings,
        *,
        grader: Grader | None = None,
        metrics: Metrics | None = None,
        llm: SharedLlm | None = None,
    ) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.settings = settings
        self._configured = settings  # as given: corpus calibration applies to these
        self.metrics = metrics or Metrics()
        self.closed = False
        retrieval = settings.retrieval
        corpus.use_settings(retrieval)
        self.retriever = Retriever(
            corpus, embedder, candidates=retrieval.candidates, rrf_k=retrieval.rrf_k
        )
        self.llm_factory = llm or SharedLlm(settings.models)  # the LLM, loaded when first called
        self.grader = grader or build_grader(
            settings.grading, settings.models, self.metrics, llm=self.llm_factory, embedder=embedder
        )
        if grader is None:
            self._use_corpus_calibration()
        audit_log = settings.correction.audit_log
        self.audit_sink = AuditSink(audit_log) if audit_log else None
        self.fallbacks = build_providers(settings.correction, retrieval, embedder)
        stages = Stages(
            settings.correction,
            retrieval,
            corpus,
            embedder,
            self.retriever,
            self.grader,
            self.fallbacks,
            self.llm_factory,
        )
        self.loop = CragLoop(stages, self.metrics)

    @classmethod
    def open(
        cls,
        db: Path | str,
        settings: Settings | None = None,
        *,
        create: bool = False,
        readonly: bool = False,
        embedder: Embedder | None = None,
        llm: SharedLlm | None = None,
    ) -> Engine:
        """Open (or with `create`, create) a corpus and load the embedder it was built with.

        The corpus is opened first, so a wrong path, a foreign or corrupt file fails before
        any model loads; a corpus built by another embedder is refused. `embedder` and `llm`
        reuse models already loaded (another engine's, with the same settings). A location
        that names no corpus (`locations.parse_location`) is refused before anything opens.
        """
        db = parse_location(db)
        settings = arguments.settings(settings)
        if create and (is_database_url(db) or not Path(db).exists()):
            embedder = embedder or load_embedder(settings.models)
            corpus = open_or_create_corpus(db, embedder.model_id, embedder.dim)
        else:
            corpus = open_corpus(db, readonly=readonly)
            try:
                embedder = embedder or load_embedder(settings.models)
                corpus.check_embedder(embedder.model_id, embedder.dim)
            except BaseException:
                corpus.close()
                raise
        return cls(corpus, embedder, settings, llm=llm)

    def ingest(
        self,
        inputs: Iterable[Path | str],
        *,
        fmt: Format = "auto",
        prune: bool = False,
        progress: Callable[[ProgressEvent], None] | None = None,
        corpus: CorpusBackend | None = None,
        roots: Sequence[Path] | None = None,
        groups: frozenset[str] | None = None,
        caller: Groups = None,
        default_groups: FolderGroups | None = None,
        exclude: Sequence[str] = (),
        reread: bool = False,
    ) -> IngestReport:
        """Add or update files (incremental by content hash); see `crag_edge.ingest`.
        `reread` reads every file again, even those whose size and mtime are unchanged, and
        indexes anew each whose reading changed (after an upgrade that reads a format better).
        `corpus` is another connection to the same file to write through (a writer thread's
        own, so readers of the engine's connection are not held up); `roots` confines every
        file read to these folders, links never followed (the service's ingest roots).
        With `groups`, every document is tagged with them (`crag_edge.groups`; empty: untagged,
        seen by all), an unchanged one retagged without being embedded again; without, stored
        documents keep theirs and a new one gets the groups of the innermost folder of
        `default_groups` holding it (watched folders; none: `caller`'s), unless it is a moved
        tagged document, which keeps its groups wherever it lands. `caller` is
        the ingesting caller's groups (as `groups` of `search`; None: the owner): a stored
        document it cannot see is left unchanged. A file an `exclude` glob (a list of str)
        matches is left out, and with `prune` deleted (`crag_edge.ingest.exclude`).
        `inputs` is a list (any iterable) of paths: one path alone is a TypeError, since a
        string read as a list would ingest each of its characters (`/` the whole disk)."""
        self._check_open()
        return ingest(
            self.corpus if corpus is None else corpus,
            self.embedder,
            self.embedder.tokenizer,
            arguments.paths(inputs),
            settings=self.settings.ingest,
            fmt=fmt,
            prune=prune,
            progress=progress,
            passage_index=self.grader.passage_index(),
            roots=roots,
            groups=arguments.groups(groups),
            caller=arguments.groups(caller),
            default_groups=arguments.default_groups(default_groups),
            exclude=arguments.globs(exclude),
            reread=reread,
        )

    def search(self, question: str, **lookup: Unpack[Lookup]) -> list[Hit]:
        """Retrieve the best chunks for `question` (repaired if it is not valid Unicode)
        among those the view sees (`arguments.Lookup`: `mode`, `top_k`, and `view` or its
        `groups` shorthand, here and in `search_passages`, `query`, `answer`). `top_k` is an
        int in the `top_k` setting's range, None for the setting's value; anything else, or a
        keyword `Lookup` does not name, is a TypeError or ValueError."""
        self._check_open()
        checked = arguments.lookup(lookup)
        return self.retriever.search(
            repair(arguments.question(question)),
            top_k=checked.top_k or self.settings.retrieval.top_k,
            mode=checked.mode or self.settings.retrieval.retrieval_mode,
            view=checked.view,
        )

    def search_passages(self, question: str, **lookup: Unpack[Lookup]) -> list[Passage]:
        """`search`'s hits as a person reads them: each with its snippet, the question's
        words marked (`retrieval.passages`). Retrieval only: no model but the embedder, no
        grading; a question with nothing to search for raises `QuestionError`. `lookup` as
        for `search`."""
        asked = asked_question(arguments.question(question))
        return passages(asked, self.search(asked, **lookup))

    def query(
        self,
        question: str,
        *,
        progress: StageListener | None = None,
        history: Sequence[Message] = (),
        cancel: Cancellation | None = None,
        **lookup: Unpack[Lookup],
    ) -> CragResult:
        """The corrective loop: retrieve, grade, correct; the final context and every reason.
        `progress` hears each stage as it happens (`crag_edge.progress`). `history` is the
        conversation so far (`{"role": "user" | "assistant", "content": ...}`, oldest first):
        a follow-up question is made standalone from it before retrieval (turns of another
        role, a chat's system turn, are ignored); a history of another shape is a TypeError
        or ValueError. Text that is not
        valid Unicode (lone surrogates) is repaired first (`text_boundary`). Only documents
        the view sees are searched, the fallback's included (`lookup`: as for `search`). A
        question with nothing to search for raises `QuestionError`. Once `cancel` is
        cancelled (the caller left), the work stops at its next stage, prompt chunk or token
        and raises `cancellation.Cancelled`."""
        return self._run(self._request(question, lookup, progress, history), cancel)

    def _request(
        self,
        question: str,
        lookup: Lookup,
        progress: StageListener | None,
        history: Sequence[Message],
    ) -> Request:
        """The question and its arguments as the loop takes them: checked, repaired, the
        view resolved once."""
        self._check_open()
        asked = asked_question(arguments.question(question))
        checked = arguments.lookup(lookup)
        return Request(
            asked,
            checked.view,
            mode=checked.mode,
            top_k=checked.top_k,
            progress=progress,
            history=[
                {key: repair(text) for key, text in message.items()}
                for message in arguments.history(history)
            ],
        )

    def _run(self, request: Request, cancel: Cancellation | None) -> CragResult:
        """The loop over `request`, stopped once `cancel` is cancelled; audited when the
        settings keep an audit log."""
        with maybe_scope(cancel):
            result = self.loop.run(request)
        if self.audit_sink:
            events = [
                AuditEvent(
                    e["event"], e["at"], {k: v for k, v in e.items() if k not in ("event", "at")}
                )
                for e in result.audit
            ]
            self.audit_sink.write(events, question=request.question, corpus=self.corpus.location)
        return result

    def answer(
        self,
        question: str,
        *,
        history: Sequence[Message] = (),
        progress: StageListener | None = None,
        cancel: Cancellation | None = None,
        **lookup: Unpack[Lookup],
    ) -> tuple[CragResult, AnswerStream]:
        """The loop's result and the answer as a stream (generated lazily): iterate it for
        the text, then read its `answer`, the finished `answer.finished.Answer` every face
        renders: the text, why it ended (`generation.AnswerFinish`), its citations, the
        refusal when there is no whole answer, the support check (every sentence the model
        wrote, checked against the context; what fails is not shown under the default
        `support_check`) and the timings. `history` as for `query`; the answer is written for
        the standalone question. `progress` hears the loop's stages as for `query`, then
        `answer`: its start before the model loads, its end when the stream is exhausted.
        `lookup` as for `query`: the answer is written from the evidence the view
        sees, and nothing else, and the support check looks names up in it alone. `cancel`
        as for `query`, for the answer's stream too: reading it raises
        `cancellation.Cancelled` once cancelled."""
        clock = AnswerClock()
        request = self._request(question, lookup, progress, history)
        result = self._run(request, cancel)
        clock.evidence_ready()
        if progress is not None:
            progress(StageEvent("answer", "start"))
        needs_model = bool(result.context) and not result.insufficient_evidence
        llm = self.llm_factory() if needs_model else None
        checked = check_answer(
            stream_answer(llm, result),
            result,
            llm,
            self.settings.answer,
            self._mentions(request.view),
            self.embedder,
        )
        return result, AnswerStream(checked, result, self.settings.models, clock, progress, cancel)

    def _mentions(self, view: CorpusView) -> Callable[[str], bool]:
        """Whether the corpus, as `view` sees it, names a word anywhere (the support check's
        test of a name the passages lack)."""
        return lambda word: mentions(self.corpus, word, view)

    def calibrate(
        self, questions: int = 20, *, on_question: Callable[[int], None] | None = None
    ) -> dict[str, Any]:
        """Refit the signals' and the evaluator's calibration to this corpus without labels
        (`crag_edge.grading.corpus_calibration`), store it in the corpus file and use it from
        now on; the before/after report. `questions` is an int of at least 2 (a fit needs them)."""
        self._check_open()
        questions = arguments.count("questions", questions, 2)
        llm = self.llm_factory()
        if llm is None:
            raise corpus_calibration.CalibrationError(
                f"calibration needs the local LLM ({self.settings.models.llm}): run "
                "`crag-edge models pull` (and install the `llm` extra)"
            )
        queries = corpus_calibration.pseudo_queries(
            self.corpus,
            self.embedder,
            lambda question: [hit.chunk for hit in self.search(question)],
            llm,
            self.settings.grading,
            questions=questions,
            on_question=on_question,
        )
        fits = corpus_calibration.fit_tiers(queries, self.grader)
        corpus_calibration.store(self.corpus, fits, self.grader, llm.model_id)
        self._use_corpus_calibration()
        return corpus_calibration.report(queries, fits)

    def _use_corpus_calibration(self) -> None:
        """The corpus's stored calibration, where no calibration setting was given explicitly
        (`corpus_calibration.apply`), for the settings and the grader alike."""
        self.settings = corpus_calibration.apply(
            self._configured, self.corpus, self.grader.versions
        )
        self.grader.calibrations = Calibrations.from_settings(self.settings.grading)

    def _check_open(self) -> None:
        """One clear error for a closed engine, not the store's own from deep inside."""
        if self.closed:
            raise ValueError("the engine is closed; open the corpus again with Engine.open")

    def close(self) -> None:
        """Release the corpus and the fallback providers; a second call does nothing."""
        if self.closed:
            return
        self.closed = True
        for provider in self.fallbacks:
            provider.close()
        self.corpus.close()
