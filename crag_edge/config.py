"""One validated settings object, read from env vars, an optional `.env` and an optional TOML file.

Precedence, highest first: explicit keyword arguments, environment variables, `.env`,
the TOML file given with `--config` (or `CRAG_EDGE_CONFIG`), then the defaults below.
Every setting is `CRAG_EDGE_<NAME>` in the environment, except three names kept for
compatibility (`KB_AGENT_*`), which are honoured exactly as they are spelled.
"""

from __future__ import annotations

import json
import os
import tomllib
import types
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import annotated_types
from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from crag_edge.text_boundary import is_valid, printable_path

ENV_PREFIX = "CRAG_EDGE_"
ENV_FILE = ".env"
FastPathRule = Literal["read_file", "few_context", "high_vector_score"]
Tier = Literal["signals", "cross_encoder", "llm"]
KB_AGENT_ENV_NAMES = {
    "vector_score_threshold": "KB_AGENT_VECTOR_SCORE_THRESHOLD",
    "auto_approve_max_items": "KB_AGENT_AUTO_APPROVE_MAX_ITEMS",
    "max_iterations": "KB_AGENT_MAX_ITERATIONS",
}
# What each fallback provider cannot work without.
FALLBACK_NEEDS = {"local": "fallback_db", "searxng": "searxng_url", "tavily": "tavily_api_key"}


class SettingsError(ValueError):
    """A setting has an invalid value; the message names the setting and where it came from."""


# The TOML path is per call, not state that outlives it: a ContextVar scoped by `Settings.load`.
_CONFIG_PATH: ContextVar[Path | None] = ContextVar("crag_edge_config_path", default=None)


def default_model_dir() -> Path:
    """`models/` beside the source checkout when run from one, else a per-user cache folder."""
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "pyproject.toml").is_file():
        return checkout / "models"
    return Path.home() / ".cache" / "crag-edge" / "models"


def _kb_agent_alias(field: str) -> AliasChoices:
    return AliasChoices(KB_AGENT_ENV_NAMES[field], ENV_PREFIX + field.upper(), field)


class Settings(BaseSettings):
    """Every tunable number of crag-edge, validated once at start."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_file=ENV_FILE,
        env_file_encoding="utf-8",
        # Lists and tuples in env vars are JSON, read by `_from_text` so that a value that is
        # not JSON is a validation error naming the variable, like every other bad value.
        enable_decoding=False,
        extra="ignore",
        populate_by_name=True,
        validate_default=True,
    )

    # -- models -------------------------------------------------------------------------
    model_dir: Path = Field(
        default_factory=default_model_dir, description="Where model files live."
    )
    embedder: str = Field("all-minilm-l6-v2", description="Manifest id of the embedder.")
    embedder_precision: Literal["fp32", "int8"] = Field(
        "fp32", description="fp32 or the int8 dynamically quantized ONNX graph."
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
    llm_timeout_s: float = Field(
        60.0,
        gt=0,
        le=3600,
        description="Seconds one judge or rewrite LLM call may take, queueing included.",
    )
    # Answers are bounded by progress, not by a total: a slow laptop may take minutes for a
    # long answer and should get it, while a stuck machine should not leave the user waiting.
    llm_stall_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="An answer stops after this many seconds without a new prompt chunk or "
        "token (waiting for the model included); its length is bounded by llm_max_tokens.",
    )
    onnx_threads: int = Field(0, ge=0, le=256, description="ONNX intra-op threads; 0 = all cores.")
    embed_batch_size: int = Field(32, ge=1, le=4096)
    embed_max_tokens: int = Field(256, ge=8, le=512, description="Truncation length for embedding.")
    hub_connect_timeout: float = Field(3.0, gt=0, le=120, description="Seconds to reach a hub.")
    hub_read_timeout: float = Field(60.0, gt=0, le=3600)

    # -- ingest -------------------------------------------------------------------------
    chunk_tokens: int = Field(200, ge=16, le=8192, description="Chunk size in embedder tokens.")
    chunk_overlap: int = Field(40, ge=0, le=4096, description="Tokens shared by neighbour chunks.")
    max_document_bytes: int = Field(
        10_000_000,
        ge=1024,
        le=1 << 40,
        description="Largest document ingest indexes (file, BEIR line or extracted text): "
        "memory and time grow with it, so a larger one is refused with a per-file error.",
    )

    # -- retrieval ----------------------------------------------------------------------
    retrieval_mode: Literal["bm25", "dense", "hybrid"] = "hybrid"
    top_k: int = Field(10, ge=1, le=1000)
    candidates: int = Field(100, ge=1, le=10000, description="Hits each retriever feeds fusion.")
    rrf_k: int = Field(60, ge=1, le=10000, description="Reciprocal Rank Fusion constant.")

    # -- grading (KB_AGENT_* names honoured as-is) ---------------------------------------
    vector_score_threshold: float = Field(
        0.8, ge=0.0, le=1.0, validation_alias=_kb_agent_alias("vector_score_threshold")
    )
    auto_approve_max_items: int = Field(
        2, ge=0, le=1000, validation_alias=_kb_agent_alias("auto_approve_max_items")
    )
    max_iterations: int = Field(3, ge=1, le=100, validation_alias=_kb_agent_alias("max_iterations"))
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
        "not confidently CORRECT.",
    )
    tier_fusion: Literal["last", "mean"] = Field(
        "mean",
        description="An item's score: the mean probability of the model tiers that scored it, "
        "or the last tier's.",
    )
    grading_tiers: list[Tier] = Field(
        default_factory=lambda: list(get_args(Tier)),
        description="Model tiers of the cascade, cheapest first; remove one to skip it.",
    )
    min_chunk_tokens: int = Field(
        40, ge=1, le=8192, description="Length adequacy reaches 1 at this many tokens."
    )
    audit_log: Path | None = Field(None, description="Append audit events here as JSON lines.")
    score_cache: bool = Field(
        True, description="Keep cross-encoder/LLM scores in the corpus file for repeat queries."
    )
    # -- correction ------------------------------------------------------------------------
    strip_mode: Literal["sentences", "fixed_num", "selection"] = Field(
        "sentences", description="How kept evidence is split into strips for refinement."
    )
    strip_scorer: Literal["coverage", "embedding", "cross_encoder"] = Field(
        "coverage", description="What scores strips; docs/correction.md has the measurements."
    )
    strip_threshold: float = Field(
        0.1, ge=0.0, le=1.0, description="Strips below are dropped (0.25 suits `embedding`)."
    )
    context_budget_tokens: int = Field(
        4096, ge=64, le=131072, description="Token budget of the recomposed context."
    )
    synonyms_file: Path | None = Field(None, description="TOML table term = [synonyms].")
    synonyms_per_term: int = Field(2, ge=0, le=20)
    rewrite_with_llm: bool = Field(True, description="Let the LLM write keyword queries.")
    min_kept_items: int = Field(
        2, ge=0, le=100, description="AMBIGUOUS with fewer kept items also asks the fallback."
    )
    fallback_providers: list[Literal["local", "searxng", "tavily"]] = Field(
        default_factory=list, description="[] = local when fallback_db is set, else none."
    )
    fallback_timeout_s: float = Field(5.0, gt=0, le=300)
    fallback_max_results: int = Field(5, ge=1, le=100)
    fallback_db: Path | None = Field(None, description="Second crag-edge corpus (air-gapped).")
    searxng_url: str | None = None
    tavily_api_key: SecretStr | None = None
    tavily_url: str = "https://api.tavily.com"

    # -- HTTP service (crag-edge serve) -----------------------------------------------------
    api_token: SecretStr | None = Field(None, description="Bearer token; required off loopback.")
    server_ingest_roots: list[Path] | None = None
    server_max_body_bytes: int = Field(65536, ge=1024, le=1 << 30)
    server_max_question_chars: int = Field(2000, ge=1, le=100000)
    server_workers: int = Field(1, ge=1, le=64)
    server_max_waiting: int = Field(8, ge=0, le=10000)
    server_queue_timeout_s: float = Field(30.0, gt=0, le=3600)
    server_retry_after_s: int = Field(2, ge=1, le=3600)

    # Platt scaling (a, b) per tier: p = sigmoid(a * raw + b), fitted on SciFact pairs with
    # `crag-edge eval grading --fit-calibration` (see docs/grading.md); None = use as is.
    calibration_signals: tuple[float, float] | None = (17.96, -11.71)
    # The model tiers': fitted on held-out SciFact rationale pairs for the shipped evaluator
    # and the default Qwen judge (`scripts/measure_cascade.py`). The evaluator's raw scores
    # run low (0.5 at raw 0.32); Qwen's P(yes) runs high (0.5 at raw 0.70). Refit for others.
    calibration_cross_encoder: tuple[float, float] | None = (10.13, -3.23)
    calibration_llm: tuple[float, float] | None = (8.29, -5.79)

    @field_validator("*", mode="before")
    @classmethod
    def _from_text(cls, value: Any, info: ValidationInfo) -> Any:
        """Env and `.env` values arrive as text: bytes that were not UTF-8 are refused (except
        in paths, which may name such files), and list and tuple settings are read as JSON."""
        if not isinstance(value, str) or info.field_name is None:
            return value
        kinds = _kinds(cls.model_fields[info.field_name].annotation)
        if not is_valid(value) and Path not in kinds:
            raise ValueError("holds bytes that are not UTF-8 text")
        if not kinds & {list, tuple, dict}:
            return value
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValueError(f"is not JSON ({exc.msg}); write it as a JSON list") from None

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
    def _fallback_configured(self) -> Settings:
        for provider in self.fallback_providers:
            needed = FALLBACK_NEEDS[provider]
            if not getattr(self, needed):
                raise ValueError(
                    f"{env_name('fallback_providers')} lists {provider}, which needs "
                    f"{env_name(needed)} ({needed})"
                )
        return self

    @model_validator(mode="after")
    def _consistent(self) -> Settings:
        if self.incorrect_threshold > self.correct_threshold:
            raise ValueError(
                f"incorrect_threshold ({self.incorrect_threshold}) must not exceed "
                f"correct_threshold ({self.correct_threshold})"
            )
        if self.chunk_overlap >= self.chunk_tokens:
            raise ValueError(
                f"chunk_overlap ({self.chunk_overlap}) must be smaller than "
                f"chunk_tokens ({self.chunk_tokens})"
            )
        return self

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings, dotenv_settings, _TomlSource(settings_cls)

    @classmethod
    def load(cls, config: Path | str | None = None, **overrides: Any) -> Settings:
        """Build the settings, turning validation errors into one readable `SettingsError`."""
        token = _CONFIG_PATH.set(Path(config) if config else None)
        try:
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


class _TomlSource(PydanticBaseSettingsSource):
    """Reads a flat TOML table (`chunk_tokens = 200`) or a `[crag_edge]` table of the same."""

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        raise NotImplementedError  # __call__ is overridden; pydantic never asks per field

    def __call__(self) -> dict[str, Any]:
        path = _CONFIG_PATH.get() or _env_config_path()
        if path is None:
            return {}
        if not path.is_file():
            raise SettingsError(f"config file not found: {path}")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise SettingsError(f"config file {path} is not valid TOML: {exc}") from None
        table = data.get("crag_edge", data)
        known = set(Settings.model_fields)
        unknown = sorted(set(table) - known)
        if unknown:
            raise SettingsError(f"config file {path}: unknown setting(s) {', '.join(unknown)}")
        return dict(table)


def _env_config_path() -> Path | None:
    value = os.environ.get(ENV_PREFIX + "CONFIG")
    return Path(value) if value else None


def _kinds(annotation: Any) -> set[Any]:
    """The types a field accepts, unwrapped: `list[Path] | None` gives {list, NoneType}."""
    members = get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else ()
    return {get_origin(member) or member for member in members or (annotation,)}


def field_range(field: str) -> tuple[int, int]:
    """The (min, max) an integer setting allows, read from its declaration: a command-line
    option for the same number takes its range from here, so both refuse the same values."""
    constraints = Settings.model_fields[field].metadata
    low = next(c.ge for c in constraints if isinstance(c, annotated_types.Ge))
    high = next(c.le for c in constraints if isinstance(c, annotated_types.Le))
    if not isinstance(low, int) or not isinstance(high, int):
        raise TypeError(f"{field} is not an integer setting")
    return low, high


def env_name(field: str) -> str:
    """The environment variable that sets `field`."""
    return KB_AGENT_ENV_NAMES.get(field, ENV_PREFIX + field.upper())


def _describe(exc: ValidationError) -> str:
    lines = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        if not error["loc"]:
            lines.append(f"invalid settings: {message}")
            continue
        field = str(error["loc"][0])
        field = next((f for f, alias in KB_AGENT_ENV_NAMES.items() if alias == field), field)
        field = field.removeprefix(ENV_PREFIX.lower())
        value = error.get("input")
        where = f"{env_name(field)} / {field}" if field in Settings.model_fields else field
        shown = "" if isinstance(value, dict) else f" (got {value!r})"
        lines.append(f"invalid setting {where}{shown}: {message}")
    return "\n".join(lines)
