"""Settings: one validated object in sections, one per component, read from env vars, `.env`
and TOML.

Each component receives only its section (`settings.retrieval` for the retriever,
`settings.correction` for the corrective loop and its fallback providers, `settings.server`
for the HTTP service, ...), so a component's signature shows what tunes it and no component
copies another's fields. Users keep one flat namespace: every field name is unique across the
sections, so `CRAG_EDGE_TOP_K`, a flat TOML key (`top_k = 5`, at the top or under
`[crag_edge]`), a `.env` line and `Settings.load(top_k=5)` each name exactly one field. The
sources below place flat names into their sections before validation; a TOML section table
(`[retrieval]`) is read too. pydantic-settings' own nested names (`CRAG_EDGE_RETRIEVAL__TOP_K`)
are not used: the flat names are the public interface, and errors name them.

Precedence, highest first: explicit keyword arguments, environment variables, `.env`,
the TOML file given with `--config` (or `CRAG_EDGE_CONFIG`), then the defaults below.
Every setting is `CRAG_EDGE_<NAME>` in the environment; three are also read under the names
kept for compatibility (`KB_AGENT_*`), which win when both are set.

The names of retrieval modes, grading tiers and fallback providers are defined here once;
the CLI, the service and the TUI take their choices from these tuples.
"""

from __future__ import annotations

import json
import os
import sys
import tomllib
import types
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, Self, Union, get_args, get_origin

import annotated_types
from dotenv.parser import parse_stream
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    FiniteFloat,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    DotEnvSettingsSource,
    EnvSettingsSource,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from crag_edge.locations import parse_location
from crag_edge.renamed import renamed_names
from crag_edge.text_boundary import has_no_controls, is_valid, printable_path

ENV_PREFIX = "CRAG_EDGE_"
ENV_FILE = ".env"
# Every setting with a comment fits in a few KB: a larger file is another file named by
# mistake (a corpus, a model), not worth reading whole to say so.
MAX_CONFIG_BYTES = 1 << 20

RetrievalMode = Literal["bm25", "dense", "hybrid"]
# Where the binary pre-filter of dense search starts to pay (docs/measurements.md).
BINARY_PREFILTER_CHUNKS = 50_000
# The LLM judge's passage never shrinks below this (`llm_judge.MIN_PASSAGE_TOKENS`).
MIN_JUDGE_FOCUS_TOKENS = 32
RETRIEVAL_MODES: tuple[RetrievalMode, ...] = get_args(RetrievalMode)
Tier = Literal["signals", "cross_encoder", "llm"]
TIERS: tuple[Tier, ...] = get_args(Tier)  # the cascade's model tiers, cheapest first
ProviderName = Literal["local", "searxng", "tavily"]
PROVIDER_NAMES: tuple[ProviderName, ...] = get_args(ProviderName)
FastPathRule = Literal["read_file", "few_context", "high_vector_score"]
# What the support judge is shown of the context: all of it, or the asked passage's lines
# holding the sentence's words (`answer.support.judged_part`).
JudgeReads = Literal["context", "piece"]

# Older variable names (`KB_AGENT_*`) that still set these settings, winning over `CRAG_EDGE_*`.
OLDER_ENV_NAMES = {
    "vector_score_threshold": "KB_AGENT_VECTOR_SCORE_THRESHOLD",
    "auto_approve_max_items": "KB_AGENT_AUTO_APPROVE_MAX_ITEMS",
    "max_iterations": "KB_AGENT_MAX_ITERATIONS",
}
# What each fallback provider cannot work without.
FALLBACK_NEEDS: dict[ProviderName, str] = {
    "local": "fallback_db",
    "searxng": "searxng_url",
    "tavily": "tavily_api_key",
}


class SettingsError(ValueError):
    """A setting has an invalid value; the message names the setting and where it came from."""


# The TOML path is per call, not state that outlives it: a ContextVar scoped by `Settings.load`.
# Models installed with the environment itself, relative to its prefix (`sys.prefix`).
PREFIX_MODEL_DIR = Path("share") / "crag-edge" / "models"

_CONFIG_PATH: ContextVar[Path | None] = ContextVar("crag_edge_config_path", default=None)


def default_model_dir(package: Path | None = None, prefix: Path | None = None) -> Path:
    """`models/` beside the source checkout when run from one; else the models installed with
    this environment (`<prefix>/share/crag-edge/models`, where the offline bundle's install.sh
    puts them, so that install needs no setting); else a per-user cache folder. `package`
    (this package's folder) and `prefix` (the environment's) are for tests."""
    checkout = (package or Path(__file__).resolve().parent).parent
    if (checkout / "pyproject.toml").is_file():
        return checkout / "models"
    installed = (prefix or Path(sys.prefix)) / PREFIX_MODEL_DIR
    if installed.is_dir():
        return installed
    return Path.home() / ".cache" / "crag-edge" / "models"


class _Section(BaseModel):
    """The fields of one component. Env and `.env` values arrive as text, checked here."""

    model_config = ConfigDict(extra="forbid", validate_default=True, frozen=True)

    @classmethod
    def defaults(cls) -> Self:
        """The section with every default (the settings' default for a section not given)."""
        return cls.model_validate({})

    @field_validator("*", mode="before")
    @classmethod
    def _from_text(cls, value: Any, info: ValidationInfo) -> Any:
        """Bytes that were not UTF-8 are refused (except in paths, which may name such files),
        and list and tuple settings are read as JSON, so that a value that is not JSON is a
        validation error naming the variable, like every other bad value. So are control
        characters (`_check_controls`)."""
        if info.field_name is None:
            return value
        kinds = _kinds(cls.model_fields[info.field_name].annotation)
        if isinstance(value, str):
            _check_controls(value, path=Path in kinds)
            if not is_valid(value) and Path not in kinds:
                raise ValueError("holds bytes that are not UTF-8 text")
            if kinds & {list, tuple, dict}:
                value = _json(value)
        if isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, str):
                    _check_controls(item, path=True)
        return value


def _wait(default: float, description: str | None = None) -> Any:
    """A setting that bounds a wait in seconds: more than nothing, and at most an hour,
    beyond which a caller is better told the service is stuck than kept waiting."""
    return Field(default, gt=0, le=3600, description=description)


def _check_controls(value: str, *, path: bool) -> None:
    """A NUL ends a string at every system call, so no path, host or name holds one; other
    control characters have no place in a name, URL or key either (a line break in a key
    would start a second HTTP header line), though a file name may hold them."""
    if "\x00" in value or not (path or has_no_controls(value)):
        raise ValueError("holds a control character (a NUL, a line break, an escape); remove it")


def _json(value: str) -> Any:
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"is not JSON ({exc.msg}); write it as a JSON list") from None


class ModelSettings(_Section):
    """Which models load and how they run. One section for all of them: the LLM runtime, the
    embedder and the cross-encoder all resolve their files through `model_dir`."""

    model_dir: Path = Field(
        default_factory=default_model_dir, description="Where model files live."
    )
    embedder: str = Field("all-minilm-l6-v2", description="Manifest id of the embedder.")
    # int8: retrieval as good as fp32's and ingest faster, measured in docs/measurements.md
    # ("Ingest speed").
    embedder_precision: Literal["fp32", "int8"] = Field(
        "int8", description="int8 (dynamically quantized ONNX graph) or fp32."
    )
    cross_encoder: str | None = Field(
        None, description="Manifest id of the cross-encoder; None: the first one installed."
    )
    llm: str = Field("qwen2.5-coder-1.5b-instruct", description="Manifest id of the default LLM.")
    llm_small: str = Field("smollm2-135m-instruct", description="Manifest id of the small LLM.")
    llm_threads: int = Field(0, ge=0, le=256, description="llama.cpp threads; 0 = all cores.")
    llm_context: int = Field(
        4096, ge=512, le=131072, description="LLM context window in tokens (prompt + output)."
    )
    llm_max_tokens: int = Field(
        256, ge=1, le=8192, description="Upper bound on tokens one LLM call may generate."
    )
    llm_timeout_s: float = _wait(
        60.0, "Seconds one judge or rewrite LLM call may take, queueing included."
    )
    # Answers are bounded by progress, not by a total: a slow laptop may take minutes for a
    # long answer and should get it, while a stuck machine should not leave the user waiting.
    llm_stall_timeout_s: float = _wait(
        30.0,
        "An answer stops after this many seconds without a new prompt chunk or "
        "token (waiting for the model included); its length is bounded by llm_max_tokens.",
    )
    # An OpenAI-compatible server (llama-server, llama_cpp.server, vLLM, Ollama) in place of
    # the in-process model; llm_context must then match the server's context window.
    llm_url: str | None = Field(
        None,
        pattern=r"^https?://[^\s/]+",
        description="OpenAI-compatible LLM server, e.g. http://host:8080/v1; None = in-process.",
    )
    llm_api_key: SecretStr | None = Field(None, description="Bearer key for llm_url.")
    llm_model_name: str | None = Field(
        None, description="Model name at llm_url; None = the first one it lists."
    )
    llm_retries: int = Field(
        2, ge=0, le=10, description="Retries of a failed llm_url call (connection, 5xx, 429)."
    )
    onnx_threads: int = Field(0, ge=0, le=256, description="ONNX intra-op threads; 0 = all cores.")
    embed_batch_size: int = Field(
        4,
        ge=1,
        le=4096,
        description="Texts per embedder call; small batches ran fastest on 2 cores (measured).",
    )
    embed_max_tokens: int = Field(256, ge=8, le=512, description="Truncation length for embedding.")
    hub_connect_timeout: float = Field(3.0, gt=0, le=120, description="Seconds to reach a hub.")
    hub_read_timeout: float = _wait(60.0)


class StoreSettings(_Section):
    """Where the corpus lives when a command is not given `--db`."""

    db_url: str | None = Field(
        None,
        pattern=r"^postgres(ql)?://",
        description="PostgreSQL corpus (postgresql://user@host/dbname), used when --db is not "
        "given; docs/scale-out.md.",
    )


class IngestSettings(_Section):
    """How documents become chunks."""

    chunk_tokens: int = Field(200, ge=16, le=8192, description="Chunk size in embedder tokens.")
    chunk_overlap: int = Field(40, ge=0, le=4096, description="Tokens shared by neighbour chunks.")
    max_document_bytes: int = Field(
        10_000_000,
        ge=1024,
        le=1 << 40,
        description="Largest document ingest indexes (file, BEIR line or extracted text): "
        "memory and time grow with it, so a larger one is refused with a per-file error.",
    )
    ocr_max_pages: int = Field(
        50,
        ge=0,
        le=1_000_000,
        description="Scanned pages of one PDF read by OCR (each takes seconds); the rest are "
        "named in one report line.",
    )
    ocr_max_page_inches: float = Field(
        50.0,
        gt=0,
        le=10_000,
        description="A scanned page larger than this on a side is not read by OCR (one report "
        "line); a large page is rendered at a lower resolution to stay within memory.",
    )

    @model_validator(mode="after")
    def _overlap_below_chunk(self) -> IngestSettings:
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than "
                f"chunk_tokens ({self.chunk_tokens})"
            )
        return self


class RetrievalSettings(_Section):
    """The hybrid retriever: its default mode and depth, and the fusion of its two lists."""

    retrieval_mode: RetrievalMode = "hybrid"
    top_k: int = Field(10, ge=1, le=1000)
    candidates: int = Field(100, ge=1, le=10000, description="Hits each retriever feeds fusion.")
    rrf_k: int = Field(60, ge=1, le=10000, description="Reciprocal Rank Fusion constant.")
    binary_prefilter_chunks: int = Field(
        BINARY_PREFILTER_CHUNKS,
        ge=0,
        description="Corpus size (chunks) from which dense search pre-filters by sign bits "
        "and rescores exactly (0: always); below it dense search is exact.",
    )


class GradingSettings(_Section):
    """The grading cascade: fast-path rules, tiers, thresholds, calibration, score cache."""

    vector_score_threshold: float = Field(0.8, ge=0.0, le=1.0)
    auto_approve_max_items: int = Field(2, ge=0, le=1000)
    fast_path_rules: list[FastPathRule] = Field(
        default_factory=lambda: list(get_args(FastPathRule)),
        description="Rules that approve evidence without any model call; [] disables all.",
    )
    correct_threshold: float = Field(0.5, ge=0.0, le=1.0, description="Aggregate >= this: CORRECT.")
    incorrect_threshold: float = Field(
        0.3, ge=0.0, le=1.0, description="Aggregate < this: INCORRECT."
    )
    discard_below: float = Field(
        0.3, ge=0.0, le=1.0, description="Items scoring below are dropped."
    )
    aggregation: Literal["mean", "rank_weighted", "max", "min"] = Field(
        "max",
        description="How kept items' scores become one score; `max`: CORRECT when one item "
        "is more likely relevant than not (docs/answer-quality.md, 'Decision rule').",
    )
    confidence_margin: float = Field(
        0.5,
        ge=0.0,
        le=0.5,
        description="An item leaves the cascade once its score is this far past a threshold.",
    )
    escalate_top: int = Field(
        2,
        ge=0,
        le=100,
        description="The N best items by signals reach the cross-encoder unless confidently "
        "CORRECT.",
    )
    judge_share: float = Field(
        0.25,
        gt=0.0,
        le=1.0,
        description="The LLM judge sees this share of a list (rounded down): its best items "
        "not confidently CORRECT; and as many again of the items holding a table row the "
        "question names.",
    )
    judge_focus_tokens: int = Field(
        96,
        ge=0,
        le=4096,
        description="The LLM judge reads a longer passage as its strips that best cover the "
        "question, within this many tokens (0: the whole passage, up to 256 tokens).",
    )
    tier_fusion: Literal["last", "mean", "mean_with_signals"] = Field(
        "mean_with_signals",
        description="An item's score: the mean probability of the tiers that scored it, the "
        "signals included (`mean`: the model tiers only), or the last tier's.",
    )
    judge_floor: bool = Field(
        True,
        description="A passage the LLM judge finds relevant (calibrated score at least 0.5) "
        "is kept at `discard_below` however the cheaper tiers score it (a table row the judge "
        "found relevant is not discarded for the signals' disagreement).",
    )
    grading_tiers: list[Tier] = Field(
        default_factory=lambda: list(TIERS),
        description="Model tiers of the cascade, cheapest first; remove one to skip it.",
    )
    min_chunk_tokens: int = Field(
        40, ge=1, le=8192, description="Length adequacy reaches 1 at this many tokens."
    )
    score_cache: bool = Field(
        True, description="Keep cross-encoder/LLM scores in the corpus file for repeat queries."
    )
    # Platt scaling (a, b) per tier: p = sigmoid(a * raw + b), fitted on SciFact pairs with
    # `crag-edge eval grading --fit-calibration` (see docs/grading.md); None = use as is.
    calibration_signals: tuple[FiniteFloat, FiniteFloat] | None = (17.96, -11.71)
    # The model tiers': fitted on held-out SciFact rationale pairs for the default Qwen judge
    # (`scripts/measure_cascade.py`; its P(yes) runs high) and for the segment evaluator; the
    # query tower's own fits lie around the kept one (docs/training.md, "Calibration").
    # Refit for others.
    calibration_cross_encoder: tuple[FiniteFloat, FiniteFloat] | None = (10.13, -3.23)
    calibration_llm: tuple[FiniteFloat, FiniteFloat] | None = (8.29, -5.79)

    @model_validator(mode="after")
    def _thresholds_ordered(self) -> GradingSettings:
        if self.incorrect_threshold > self.correct_threshold:
            raise ValueError(
                f"incorrect_threshold ({self.incorrect_threshold}) must not exceed "
                f"correct_threshold ({self.correct_threshold})"
            )
        if 0 < self.judge_focus_tokens < MIN_JUDGE_FOCUS_TOKENS:
            raise ValueError(
                f"judge_focus_tokens must be 0 (off) or at least {MIN_JUDGE_FOCUS_TOKENS}; "
                f"got {self.judge_focus_tokens}"
            )
        return self


class CorrectionSettings(_Section):
    """The corrective loop: its rounds, refinement, query rewrite, the fallback providers it
    asks, and the audit log of its decisions."""

    max_iterations: int = Field(3, ge=1, le=100)
    strip_mode: Literal["sentences", "fixed_num", "selection"] = Field(
        "sentences", description="How kept evidence is split into strips for refinement."
    )
    strip_scorer: Literal["coverage", "embedding", "cross_encoder"] = Field(
        "coverage", description="What scores strips; docs/correction.md has the measurements."
    )
    # 0.05: with rarity-weighted coverage, the share of SciFact's rationale sentences kept
    # and of context removed that plain coverage reached at 0.1 (docs/correction.md).
    strip_threshold: float = Field(
        0.05, ge=0.0, le=1.0, description="Strips below are dropped (0.25 suits `embedding`)."
    )
    # 300: the smallest budget at which CRAG answers as many documentation questions right as
    # plain RAG, for a few more prompt tokens before the first word; measured in
    # docs/correction.md ("The budget") and docs/answer-quality.md.
    context_budget_tokens: int = Field(
        300,
        ge=64,
        le=131072,
        description="Token budget of the answer's context (passages and each document's title "
        "once): refined strips, or whole chunks on the fast path, best first; what does not "
        "fit is a `cap` correction.",
    )
    # 2,000 by measurement (docs/answer-quality.md, "Reading again"): the top 10 hits' whole
    # chunks at the default chunk size (200), which plain RAG answers from, well inside the
    # default model's 4,096-token window with its answer.
    reread_budget_tokens: int = Field(
        2000,
        ge=64,
        le=131072,
        description="Token budget of the evidence an unstated answer is written from again "
        "(`support_reread`): the search's top hits, whole, in their order.",
    )
    synonyms_file: Path | None = Field(None, description="TOML table term = [synonyms].")
    synonyms_per_term: int = Field(2, ge=0, le=20)
    rewrite_with_llm: bool = Field(True, description="Let the LLM write keyword queries.")
    fallback_on_ambiguous: bool = Field(
        True,
        description="AMBIGUOUS asks the fallback too, as CRAG's AMBIGUOUS action combines "
        "both sources; false: only when fewer than `min_kept_items` items are kept.",
    )
    min_kept_items: int = Field(
        2,
        ge=0,
        le=100,
        description="Without `fallback_on_ambiguous`: AMBIGUOUS with fewer "
        "kept items asks the fallback.",
    )
    fallback_providers: list[ProviderName] = Field(
        default_factory=list, description="[] = local when fallback_db is set, else none."
    )
    fallback_timeout_s: float = Field(5.0, gt=0, le=300)
    fallback_max_results: int = Field(5, ge=1, le=100)
    fallback_db: Path | str | None = Field(
        None, description="Second crag-edge corpus (air-gapped): a file or postgresql://..."
    )
    searxng_url: str | None = None
    tavily_api_key: SecretStr | None = None
    tavily_url: str = "https://api.tavily.com"
    audit_log: Path | None = Field(None, description="Append audit events here as JSON lines.")

    @field_validator("fallback_db", mode="before")
    @classmethod
    def _fallback_location(cls, value: Any) -> Any:
        """A file path becomes a `Path`; a database URL stays text (as a `Path` it would lose
        a slash)."""
        return parse_location(value) if isinstance(value, str) else value

    @field_validator("audit_log")
    @classmethod
    def _audit_log_writable(cls, path: Path | None) -> Path | None:
        """Checked at start, where the variable can be named; the audit sink appends to the
        file and creates no folder the user did not make."""
        if path is None:
            return None
        if path.is_dir():
            raise ValueError("is a folder; name a file in it (e.g. audit.jsonl)")
        if not path.parent.is_dir():
            raise ValueError(f"the folder {printable_path(path.parent)} does not exist; create it")
        if not os.access(path if path.exists() else path.parent, os.W_OK):
            raise ValueError("is not writable")
        return path

    @model_validator(mode="after")
    def _fallback_configured(self) -> CorrectionSettings:
        for provider in self.fallback_providers:
            needed = FALLBACK_NEEDS[provider]
            if not getattr(self, needed):
                raise ValueError(
                    f"{env_name('fallback_providers')} lists {provider}, which needs "
                    f"{env_name(needed)} ({needed})"
                )
        return self


SupportMode = Literal["remove", "flag", "keep"]


class AnswerSettings(_Section):
    """The answer a reader sees: every sentence checked against its evidence first
    (`answer.checked`); docs/answer-quality.md has the measurements behind the defaults."""

    support_check: SupportMode = Field(
        "remove",
        description="What becomes of an answer sentence the passages do not state: `remove` "
        "(left out, listed in the result), `flag` (shown, marked unsupported) or `keep` "
        "(shown as written; still checked and listed).",
    )
    # 0.77 by measurement on answers' sentences read by hand (docs/answer-quality.md,
    # "Truthful answers"): the stated ones scored 0.79-0.84, the unstated ones 0.42-0.75;
    # the small model's yes-bias puts the cut high.
    support_threshold: float = Field(
        0.77,
        ge=0.0,
        le=1.0,
        description="The LLM's P(yes) that a passage states a sentence, from which it counts "
        "as supported.",
    )
    # 0.65 by measurement on the same sentences scored against every passage of their
    # context (docs/answer-quality.md, "Located sentences").
    support_threshold_located: float = Field(
        0.65,
        ge=0.0,
        le=1.0,
        description="The LLM's P(yes), on any passage asked, from which a sentence counts as "
        "supported once a passage holds every number, name and option it states and most of "
        "its words (it is cited to that passage).",
    )
    # `piece` by measurement (docs/answer-quality.md, "The judge reading where the words
    # are"): on the labelled items it tells stated from unstated sentences better on every
    # corpus, and on the question sets CRAG answered as many right as plain RAG; each check
    # then reads its own short prompt instead of the cached context.
    support_judge_reads: JudgeReads = Field(
        "piece",
        description="What the LLM is shown when it checks a sentence against passage n: "
        "`context` (every passage, as the answer was written from them) or `piece` (passage "
        "n's sentence or row holding most of the sentence's words, with its neighbours).",
    )
    support_terms_accept: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="Share of a sentence's content terms one passage must hold for the "
        "sentence to count as supported when the LLM could not check it within "
        "`support_budget_s` (or failed).",
    )
    # 8 s: the judge reading each passage's lines evaluates them for every check, and the
    # longest check of an answer on the question sets took 6.1 s (docs/answer-quality.md).
    support_budget_s: float = Field(
        8.0,
        ge=0.0,
        le=600.0,
        description="Seconds the LLM may spend checking one answer; sentences left unchecked "
        "are decided by `support_terms_accept` alone.",
    )
    # On by measurement (docs/answer-quality.md, "Reading again"): the refined strips
    # sometimes lack the sentence that answers, and the grading sometimes discards the chunk
    # that holds it; the model then answers from memory and the check empties the answer.
    # Only CORRECT evidence is read again, which no off-corpus question reached.
    support_reread: bool = Field(
        True,
        description="When no sentence of an answer from CORRECT evidence is stated, write it "
        "once more from the search's top hits read whole (`reread_budget_tokens`), checked "
        "the same way, before replying that the evidence is insufficient.",
    )


class ServerSettings(_Section):
    """The HTTP service (`crag-edge serve`): auth, ingest roots, limits and admission."""

    api_token: SecretStr | None = Field(None, description="Bearer token; required off loopback.")
    tokens_file: Path | None = Field(
        None, description="Named, scoped tokens (`crag-edge tokens add`); set: auth required."
    )
    server_ingest_roots: list[Path] | None = None
    server_max_body_bytes: int = Field(65536, ge=1024, le=1 << 30)
    server_max_question_chars: int = Field(2000, ge=1, le=100000)
    server_max_ingest_paths: int = Field(100, ge=1, le=100000)
    server_workers: int = Field(1, ge=1, le=64)
    server_max_waiting: int = Field(8, ge=0, le=10000)
    server_queue_timeout_s: float = _wait(30.0)
    server_read_timeout_s: float = _wait(
        30.0,
        "Longest a request's head, and then its body, may take to arrive (a late "
        "body: 408; a late head: the connection closed): a client that stops sending would "
        "otherwise hold its connection for ever.",
    )
    server_retry_after_s: int = Field(2, ge=1, le=3600)
    server_job_stale_after_s: float = Field(
        60.0,
        ge=2,
        le=86400,
        description="An ingest job whose replica has not updated it for this long reads as "
        "failed (the replica died); replicas refresh their jobs every quarter of it.",
    )


class Settings(BaseSettings):
    """Every tunable number of crag-edge, validated once at start, one section per component.
    Frozen, sections included: `replace` makes a validated copy, where an assignment would
    slip an unchecked value past validation."""

    model_config = SettingsConfigDict(
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        extra="forbid",
        validate_default=True,
        frozen=True,
    )

    models: ModelSettings = Field(default_factory=ModelSettings.defaults)
    store: StoreSettings = Field(default_factory=StoreSettings.defaults)
    ingest: IngestSettings = Field(default_factory=IngestSettings.defaults)
    retrieval: RetrievalSettings = Field(default_factory=RetrievalSettings.defaults)
    grading: GradingSettings = Field(default_factory=GradingSettings.defaults)
    correction: CorrectionSettings = Field(default_factory=CorrectionSettings.defaults)
    answer: AnswerSettings = Field(default_factory=AnswerSettings.defaults)
    server: ServerSettings = Field(default_factory=ServerSettings.defaults)

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        assert isinstance(init_settings, InitSettingsSource)
        assert isinstance(env_settings, EnvSettingsSource)
        assert isinstance(dotenv_settings, DotEnvSettingsSource)
        return (
            _FlatSource(settings_cls, init_settings.init_kwargs, "keyword arguments"),
            _EnvSource(settings_cls, env_settings.env_vars),
            _EnvSource(settings_cls, dotenv_settings.env_vars),
            _TomlSource(settings_cls),
        )

    @classmethod
    def load(cls, config: Path | str | None = None, **overrides: Any) -> Settings:
        """Build the settings from flat names (`top_k=3`) or whole sections, turning
        validation errors into one readable `SettingsError`."""
        token = _CONFIG_PATH.set(Path(config) if config else None)
        try:
            _check_dotenv(Path(ENV_FILE))
            return cls(**overrides)
        except ValidationError as exc:
            raise SettingsError(_describe(exc)) from None
        except UnicodeDecodeError as exc:  # the TOML source reports its own; this is `.env`
            raise SettingsError(
                f"{Path(ENV_FILE).absolute()} is not UTF-8 text ({exc.reason} at byte "
                f"{exc.start}); save it as UTF-8"
            ) from None
        finally:
            _CONFIG_PATH.reset(token)

    def value(self, name: str) -> Any:
        """The setting named `name` (flat, as in the environment), for code that works on
        names: the TUI's form, its TOML file."""
        return getattr(getattr(self, SECTION_OF[name]), name)

    def replace(self, **changes: Any) -> Settings:
        """A copy with these flat settings changed, validated without reading the environment
        again. The fields set explicitly stay marked so: stored corpus calibration yields to
        explicit values only (`corpus_calibration.apply`)."""
        updated: dict[str, _Section] = {}
        for name, values in _nest(changes, "keyword arguments").items():
            section: _Section = getattr(self, name)
            try:
                updated[name] = type(section).model_validate(
                    section.model_dump(exclude_unset=True) | values
                )
            except ValidationError as exc:
                raise SettingsError(_describe(exc)) from None
        return self.model_copy(update=updated)


SECTIONS: dict[str, type[_Section]] = {
    name: field.annotation
    for name, field in Settings.model_fields.items()
    if isinstance(field.annotation, type) and issubclass(field.annotation, _Section)
}
# Field names are unique across sections (tests/test_config.py checks): a flat name is one field.
SECTION_OF: dict[str, str] = {
    field: section for section, model in SECTIONS.items() for field in model.model_fields
}


def _nest(flat: Mapping[str, Any], origin: str) -> dict[str, dict[str, Any]]:
    """Flat names placed into their sections; a section given whole (a TOML `[retrieval]`
    table, a dict or a section object) is merged field by field."""
    nested: dict[str, dict[str, Any]] = {}
    unknown = []
    for name, value in flat.items():
        if isinstance(value, BaseModel) and name in SECTIONS:
            value = value.model_dump(exclude_unset=True)
        if name in SECTIONS and isinstance(value, Mapping):
            unknown += [f"{name}.{key}" for key in value if SECTION_OF.get(key) != name]
            nested.setdefault(name, {}).update(value)
        elif name in SECTION_OF:
            nested.setdefault(SECTION_OF[name], {})[name] = value
        else:
            unknown.append(name)
    if unknown:
        raise SettingsError(f"{origin}: unknown setting(s) {', '.join(sorted(unknown))}")
    return nested


class _FlatSource(PydanticBaseSettingsSource):
    """Values under flat names (keyword arguments, a TOML table), placed into sections."""

    def __init__(
        self, settings_cls: type[BaseSettings], values: Mapping[str, Any], origin: str
    ) -> None:
        super().__init__(settings_cls)
        self._values = values
        self._origin = origin

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # __call__ is overridden; pydantic never asks per field

    def __call__(self) -> dict[str, Any]:
        return _nest(self._values, self._origin)


class _EnvSource(PydanticBaseSettingsSource):
    """Each field's variables (`KB_AGENT_*` first, then `CRAG_EDGE_<FIELD>`) from variables as
    pydantic-settings read them (the environment or `.env`, names in lower case)."""

    def __init__(
        self, settings_cls: type[BaseSettings], variables: Mapping[str, str | None]
    ) -> None:
        super().__init__(settings_cls)
        self._variables = variables

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # __call__ is overridden; pydantic never asks per field

    def __call__(self) -> dict[str, Any]:
        found = {}
        for field in SECTION_OF:
            names = [OLDER_ENV_NAMES.get(field), ENV_PREFIX + field.upper()]
            values = [self._variables.get(name.lower()) for name in names if name]
            value = next((v for v in values if v is not None), None)
            if value is not None:
                found[field] = value
        return _nest(found, "environment")


class _TomlSource(PydanticBaseSettingsSource):
    """Reads a flat TOML table (`chunk_tokens = 200`) or a `[crag_edge]` table of the same;
    either may hold section tables (`[retrieval]` or `[crag_edge.retrieval]`)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # __call__ is overridden; pydantic never asks per field

    def __call__(self) -> dict[str, Any]:
        path = _CONFIG_PATH.get() or _env_config_path()
        if path is None:
            return {}
        if path.is_dir():
            raise SettingsError(f"config file {path} is a folder; name a TOML file")
        if not path.is_file():
            raise SettingsError(f"config file not found: {path}")
        try:
            if path.stat().st_size > MAX_CONFIG_BYTES:
                raise SettingsError(
                    f"config file {path} is {path.stat().st_size:,} B, more than a settings file "
                    f"holds ({MAX_CONFIG_BYTES:,} B at most); name the TOML settings file"
                )
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:  # no permission
            raise SettingsError(f"config file {path} cannot be read: {exc.strerror}") from None
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
        table = data.get("crag_edge", data)
        if not isinstance(table, dict):
            raise SettingsError(
                f"config file {path}: `crag_edge` must be a table ([crag_edge]), not a value"
            )
        return _nest(table, f"config file {path}")


def _check_dotenv(path: Path) -> None:
    """python-dotenv skips a line it cannot read, with a warning that names no file, and reads
    a bare name as unset: a setting written either way would be lost without a word. Both
    stop the program here, naming the file and the line (a bare name of another tool's
    variable is left alone)."""
    if not path.is_file():
        return
    with path.open(encoding="utf-8") as stream:
        for binding in parse_stream(stream):
            bare = binding.value is None and _is_ours(binding.key or "")
            if binding.error or bare:
                said = binding.original.string.strip()
                raise SettingsError(
                    f"{path.absolute()} line {binding.original.line}: {said!r} sets nothing; "
                    "write NAME=value"
                )


def _is_ours(name: str) -> bool:
    """Whether a variable name is a crag-edge setting's (prefixed, or a `KB_AGENT_*` one)."""
    return name.upper().startswith(ENV_PREFIX) or name.upper() in OLDER_ENV_NAMES.values()


def _env_config_path() -> Path | None:
    value = os.environ.get(ENV_PREFIX + "CONFIG")
    return Path(value) if value else None


def _kinds(annotation: Any) -> set[Any]:
    """The types a field accepts, unwrapped: `list[Path] | None` gives {list, NoneType}."""
    members = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else ()
    return {get_origin(member) or member for member in members or (annotation,)}


def setting_fields() -> dict[str, FieldInfo]:
    """Every setting's declaration under its flat name, section by section (docs, the TUI)."""
    return {field: SECTIONS[section].model_fields[field] for field, section in SECTION_OF.items()}


def field_range(field: str) -> tuple[int, int]:
    """The (min, max) an integer setting allows, read from its declaration: a command-line
    option for the same number takes its range from here, so both refuse the same values."""
    constraints = setting_fields()[field].metadata
    low = next(c.ge for c in constraints if isinstance(c, annotated_types.Ge))
    high = next(c.le for c in constraints if isinstance(c, annotated_types.Le))
    if not isinstance(low, int) or not isinstance(high, int):
        raise TypeError(f"{field} is not an integer setting")
    return low, high


def env_name(field: str) -> str:
    """The environment variable that sets `field`: `CRAG_EDGE_<FIELD>`, or the older
    `KB_AGENT_*` name when that one is set (it wins, so a message must name it)."""
    legacy = OLDER_ENV_NAMES.get(field)
    return legacy if legacy is not None and legacy in os.environ else ENV_PREFIX + field.upper()


def _describe(exc: ValidationError) -> str:
    """One line per error, naming the variable and the field (`CRAG_EDGE_TOP_K / top_k`); a
    rule between fields of a section names no single one."""
    lines = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        path = [str(part) for part in error["loc"] if part not in SECTIONS]
        if not path:
            lines.append(f"invalid settings: {message}")
            continue
        field = path[0]
        value = error.get("input")
        where = f"{env_name(field)} / {field}" if field in SECTION_OF else ".".join(path)
        secret = field in SECTION_OF and SecretStr in _kinds(setting_fields()[field].annotation)
        shown = "" if isinstance(value, dict) or secret else f" (got {value!r})"
        lines.append(f"invalid setting {where}{shown}: {message}")
    return "\n".join(lines)


__getattr__ = renamed_names(__name__, {"KB_AGENT_ENV_NAMES": "OLDER_ENV_NAMES"}, globals())
