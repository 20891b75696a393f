"""`crag-edge eval ...`: retrieval, the loop, answers and grading measured on labelled data."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from crag_edge.config import Settings
from crag_edge.console.errors import friendly_errors
from crag_edge.console.options import (
    TOP_K_MAX,
    TOP_K_MIN,
    DbOption,
    FallbackDbOption,
    JsonOption,
    choices_option,
    settings_of,
    writable_output,
)
from crag_edge.console.output import (
    counting_bar,
    out,
    print_json,
    print_report,
    say,
    tell,
)
from crag_edge.engine import Engine
from crag_edge.evaluation import evaluate_retrieval, judged_queries, read_qrels, read_queries
from crag_edge.evaluation.answers import (
    SYSTEMS,
    Record,
    answer_systems,
    run_answers,
    summarise,
)
from crag_edge.evaluation.claims import read_claims
from crag_edge.evaluation.crag import evaluate_crag
from crag_edge.evaluation.grading import (
    SCORERS,
    evaluate_grading,
    grading_models,
    sample_queries,
)
from crag_edge.evaluation.pairs import (
    SOURCES,
    pairs_from,
    pairs_from_retrieval,
    read_pairs,
    write_pairs,
)
from crag_edge.evaluation.qa import SYSTEMS as QA_SYSTEMS
from crag_edge.evaluation.qa import QaRecord, qa_systems, read_questions, run_qa
from crag_edge.evaluation.qa import summarise as summarise_qa
from crag_edge.evaluation.records import RecordLog
from crag_edge.groups import CorpusView
from crag_edge.locations import parse_location
from crag_edge.models.chat_model import ChatModel
from crag_edge.models.registry import ModelNotInstalledError
from crag_edge.retrieval import MODES, Mode
from crag_edge.text_boundary import printable_path

QueriesOption = Annotated[Path, typer.Option("--queries", help="BEIR queries.jsonl.")]
QrelsOption = Annotated[Path, typer.Option("--qrels", help="BEIR qrels .tsv (or TREC qrels).")]
RecordsOption = Annotated[
    Path | None,
    typer.Option(
        "--records",
        help="JSON Lines of every answer; what is already answered there is not asked again.",
        callback=writable_output,
    ),
]


def _first_n(what: str) -> Any:
    """The `--limit` of an evaluation over a file's items: only its first N `what`."""
    return typer.Option("--limit", min=1, help=f"Only the first N {what}.")


def _subset_of(systems: Sequence[str]) -> Any:
    """The `--systems` of an answer evaluation: which of `systems` answer."""
    return typer.Option("--systems", help="Comma-separated subset of " + ",".join(systems))


@contextmanager
def _evaluating(
    db: Path, settings: Settings, name: str, unit: str, total: int, as_json: bool
) -> Iterator[tuple[Engine, Callable[[], None]]]:
    """The corpus opened read-only, and the step of a bar (`eval name`) counting `total`
    `unit` as each is evaluated: what every evaluation over a corpus runs in."""
    with (
        Engine.open(db, settings, readonly=True) as engine,
        counting_bar(f"eval {name}", as_json) as bar,
    ):
        task = bar.add_task(unit, total=total)
        yield engine, lambda: bar.advance(task)


def _with_fallback(settings: Settings, fallback_db: Path | None) -> Settings:
    """The settings with `--fallback-db` as the `local` fallback's corpus, when given."""
    return settings if fallback_db is None else settings.replace(fallback_db=fallback_db)


@friendly_errors
def eval_retrieval(
    ctx: typer.Context,
    db: DbOption,
    queries: QueriesOption,
    qrels: QrelsOption,
    mode: Annotated[Mode, typer.Option("--mode", help=f"One of {', '.join(MODES)}.")] = "hybrid",
    as_json: JsonOption = False,
) -> None:
    """nDCG@10, Recall@10/100 and latency of one retrieval mode; documents ranked by best chunk."""
    query_texts, judgements = judged_queries(queries, qrels)
    settings = settings_of(ctx)
    with _evaluating(db, settings, mode, "queries", len(query_texts), as_json) as (engine, step):
        result = evaluate_retrieval(engine.retriever, query_texts, judgements, mode, on_query=step)
    print_report(result, as_json)


@friendly_errors
def eval_crag(
    ctx: typer.Context,
    db: DbOption,
    queries: QueriesOption,
    qrels: QrelsOption,
    fallback_db: FallbackDbOption = None,
    limit: Annotated[int | None, _first_n("judged queries")] = None,
    as_json: JsonOption = False,
) -> None:
    """The full loop per query vs plain top-k RAG: decisions, fallback rate, evidence recall,
    noise rate and latency per path."""
    settings = _with_fallback(settings_of(ctx), fallback_db)
    texts, judgements = judged_queries(queries, qrels)
    if limit is not None:
        texts = dict(list(texts.items())[:limit])
    with _evaluating(db, settings, "crag", "queries", len(texts), as_json) as (engine, step):
        report = evaluate_crag(
            lambda q: engine.query(q, view=OWNER),
            lambda q: engine.search(q, view=OWNER),
            texts,
            judgements,
            on_query=step,
        )
    print_report(report, as_json)


@friendly_errors
def eval_answers(
    ctx: typer.Context,
    db: DbOption,
    claims: Annotated[
        Path, typer.Option("--claims", help="SciFact claims .csv (one row per evidence doc).")
    ],
    fallback_db: FallbackDbOption = None,
    limit: Annotated[int | None, _first_n("claims")] = None,
    systems: Annotated[str, _subset_of(SYSTEMS)] = ",".join(SYSTEMS),
    records: RecordsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Claim verification end to end with one LLM: closed book, plain top-k RAG and CRAG;
    accuracy, macro-F1, NOT ENOUGH INFO refusals, citation precision and time per claim."""
    settings = _with_fallback(settings_of(ctx), fallback_db)
    chosen = choices_option(systems, SYSTEMS, "--systems")
    claim_list = read_claims(claims)[:limit]
    with _evaluating(db, settings, "answers", "claims", len(claim_list), as_json) as (engine, step):
        llm = _llm_of(engine)
        every = answer_systems(
            llm,
            lambda q: engine.search(q, view=OWNER),
            lambda q: engine.query(q, view=OWNER),
            timeout_s=settings.models.llm_timeout_s,
        )
        log = RecordLog(records, llm.model_id, Record)
        answered = run_answers(claim_list, {n: every[n] for n in chosen}, log, on_claim=step)
    _report(summarise(answered, chosen), [*ANSWER_METRICS], as_json)


def _report(report: dict[str, dict[str, Any]], metrics: list[str], as_json: bool) -> None:
    """An answer evaluation's report per system: JSON on stdout, or one table for people."""
    if as_json:
        print_json(report)
        return
    _print_table(report, metrics)


def _llm_of(engine: Engine) -> ChatModel:
    """The engine's LLM; an answer evaluation without one is an error naming the fix."""
    llm = engine.llm_factory()
    if llm is None:
        name = engine.settings.models.llm
        raise ModelNotInstalledError(
            f"the LLM {name} is not available: run `crag-edge models pull {name}` "
            "(and install llama-cpp-python)"
        )
    return llm


@friendly_errors
def eval_qa(
    ctx: typer.Context,
    db: DbOption,
    questions: Annotated[
        Path,
        typer.Option(
            "--questions",
            help='JSON Lines of {"id", "question", "in_corpus": true|false, "must": [[...]]}.',
        ),
    ],
    systems: Annotated[str, _subset_of(QA_SYSTEMS)] = ",".join(QA_SYSTEMS),
    records: RecordsOption = None,
    limit: Annotated[int | None, _first_n("questions")] = None,
    as_json: JsonOption = False,
) -> None:
    """Free-form answers to questions your corpus answers and questions it cannot: right,
    wrong, refused, invented, truthfulness (+1 right, 0 refused, -1 wrong) and time per
    question, for plain top-k RAG and CRAG with the same LLM."""
    chosen = choices_option(systems, QA_SYSTEMS, "--systems")
    to_ask = read_questions(questions)[:limit]
    settings = settings_of(ctx)
    with _evaluating(db, settings, "qa", "questions", len(to_ask), as_json) as (engine, step):
        llm = _llm_of(engine)
        every = qa_systems(
            llm, lambda q: engine.search(q, view=OWNER), lambda q: engine.answer(q, view=OWNER)
        )
        log = RecordLog(records, llm.model_id, QaRecord)
        answered = run_qa(to_ask, {n: every[n] for n in chosen}, log, on_question=step)
    _report(summarise_qa(answered, chosen), [*QA_METRICS], as_json)


# The evaluations measure the whole corpus, as its owner sees it.
OWNER = CorpusView.everything()

ANSWER_METRICS = (
    "questions",
    "accuracy",
    "macro_f1",
    "nei_refused",
    "citation_precision",
    "seconds_per_question",
    "predicted",
)
QA_METRICS = (
    "questions",
    "right",
    "wrong",
    "refused",
    "off_corpus_refused",
    "off_corpus_invented",
    "truthfulness",
    "truthfulness_by_kind",
    "supported_share",
    "seconds_per_question",
    "cut_off",
)


def _print_table(report: dict[str, dict[str, Any]], metrics: list[str]) -> None:
    """One row per metric, one column per system."""
    table = Table("metric", *report)
    for metric in metrics:
        table.add_row(metric, *(_fmt_cell(row[metric]) for row in report.values()))
    out.print(table)


def _fmt_cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items())
    return "-" if value is None else str(value)


@friendly_errors
def eval_pairs(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Option(
            "--from",
            help="wikiqa, climate-fever, scifact, or retrieval (needs --db, --queries, "
            "--qrels: the top-k hits of each query labelled by its qrels).",
        ),
    ],
    out: Annotated[
        Path,
        typer.Option("--out", help="Pairs file to write (JSON Lines).", callback=writable_output),
    ],
    path: Annotated[
        Path | None,
        typer.Argument(help="WikiQA .tsv, Climate-FEVER .jsonl, or the SciFact folder."),
    ] = None,
    db: Annotated[
        Path | None,
        typer.Option(
            "--db",
            help="Corpus for --from retrieval: a file or postgresql://... (default: "
            "CRAG_EDGE_DB_URL).",
            parser=parse_location,
        ),
    ] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="BEIR queries.jsonl.")] = None,
    qrels: Annotated[Path | None, typer.Option("--qrels", help="BEIR qrels .tsv.")] = None,
    top_k: Annotated[
        int,
        typer.Option("--top-k", help="Hits per query (retrieval).", min=TOP_K_MIN, max=TOP_K_MAX),
    ] = 10,
) -> None:
    """Make (query, passage, label) pairs for `eval grading` from a labelled dataset, or from
    your own corpus's retrieval results (to calibrate the grader on what it will really see)."""
    if source not in (*SOURCES, "retrieval"):
        choices = ", ".join((*SOURCES, "retrieval"))
        raise typer.BadParameter(f"{source!r} is not one of {choices}", param_hint="--from")
    if source == "retrieval":
        if db is None or queries is None or qrels is None:
            raise typer.BadParameter(
                "retrieval needs --db, --queries and --qrels", param_hint="--from"
            )
        with Engine.open(db, settings_of(ctx), readonly=True) as engine:
            pairs = pairs_from_retrieval(
                lambda q: engine.search(q, top_k=top_k, view=OWNER),
                read_queries(queries),
                read_qrels(qrels),
            )
    else:
        if path is None:
            raise typer.BadParameter(f"{source} needs the dataset path", param_hint="--from")
        pairs = pairs_from(source, path)
    write_pairs(pairs, out)
    relevant = sum(p.label for p in pairs)
    tell(f"wrote {len(pairs)} pairs ({relevant} relevant) to {printable_path(out)}")


@friendly_errors
def eval_grading(
    ctx: typer.Context,
    pairs_file: Annotated[
        Path,
        typer.Option("--pairs", help='JSON Lines of {"query": ..., "passage": ..., "label": 0|1}.'),
    ],
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="Evaluate the pairs of this many randomly chosen queries (seeded).",
        ),
    ] = None,
    scorers: Annotated[
        str,
        typer.Option(
            "--scorers", help="Comma-separated scorers to run alone: " + ",".join(SCORERS)
        ),
    ] = ",".join(SCORERS),
    fit_calibration: Annotated[
        bool,
        typer.Option("--fit-calibration", help="Also fit Platt (a, b) per tier on these pairs."),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """ROC-AUC, answerless-question detection (AUC of each query's best score), accuracy at
    the thresholds and items/s of each scorer alone and of the cascade."""
    chosen = choices_option(scorers, SCORERS, "--scorers")
    pairs = sample_queries(read_pairs(pairs_file), limit)
    embedder, grader = grading_models(settings_of(ctx))
    with counting_bar("eval grading", as_json) as bar:
        task = bar.add_task("queries", total=len({p.query for p in pairs}))
        report = evaluate_grading(
            pairs,
            embedder,
            grader,
            scorers=chosen,
            fit_calibration=fit_calibration,
            on_group=lambda: bar.advance(task),
        )
    if as_json:
        print_json(report)
        return
    say(
        f"{report['pairs']} pairs, {report['positives']} relevant, "
        f"{report['queries']} queries; tiers {report['tiers']}"
    )
    table = Table("scorer", "ROC-AUC", "answerable AUC", "acc@discard", "acc@correct", "items/s")
    for name, row in [*report["scorers"].items(), ("cascade", report["cascade"])]:
        table.add_row(
            name,
            str(row["roc_auc"]),
            str(row["answerable_auc"]),
            str(row["accuracy_at_discard_below"]),
            str(row["accuracy_at_correct"]),
            str(row["items_per_s"]),
        )
    out.print(table)
    say(f"share of items reaching each tier: {report['cascade']['tier_share']}")
