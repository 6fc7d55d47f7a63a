"""Every knob of the pipeline, read once from ``ATLAS_*`` environment variables and validated at start-up.

The settings are grouped into typed models — ``settings.llm.concurrency`` is ``ATLAS_LLM_CONCURRENCY``,
``settings.review.inbox`` is ``ATLAS_REVIEW_INBOX`` — and the variables keep their flat names: a group's fields are
read under the group's prefix (an alias names the few that do not have it). Where a library value object has the same
knob (``LLMConfig``, ``ParseOptions``, ``ParseLimits``, ``ProviderLimits``, ``Politeness``) the setting takes its
default from it: defined once, in the library that uses it. This module sits above the library for that reason, and
only the composition root (``atlas_pipeline.deployment``) and the CLI's ``atlas settings`` read it.

Relative local paths are resolved against the working directory, so ``atlas run`` from the repository root uses
``seeds/knowledge_base`` and writes under ``var/``. URLs (``s3://…``) are kept as they are.
"""

from __future__ import annotations

import difflib
import functools
import inspect
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, SecretStr, ValidationError, model_validator
from pydantic.fields import FieldInfo

from atlas_pipeline.config.review_folder import ReviewFolderError, find_review
from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.core.locations import resolve_location
from atlas_pipeline.extraction.llm.config import LLMConfig, StructuredOutput
from atlas_pipeline.parsing import ParseOptions, PdfEngine
from atlas_pipeline.parsing.bounded import ParseLimits
from atlas_pipeline.parsing.providers.base import ProviderLimits
from atlas_pipeline.sources.politeness import Politeness

ENV_PREFIX = "ATLAS_"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class SettingsError(AtlasError, ValueError):
    """A setting is invalid; the message names the environment variable and what is wrong with it."""


def _default_seeds_dir() -> str:
    bundled = PROJECT_ROOT / "seeds"
    return str(bundled if bundled.is_dir() else Path.cwd() / "seeds")


def default_of(owner: type, name: str) -> Any:
    """The default of parameter ``name`` of the value class ``owner``: a setting's default, defined by the library
    class that takes the same knob."""
    default = inspect.signature(owner).parameters[name].default
    if default is inspect.Parameter.empty:
        raise TypeError(f"{owner.__name__}.{name} has no default")
    return default


@functools.cache
def tesseract_languages() -> frozenset[str] | None:
    """The languages tesseract has data for (``tesseract --list-langs``); None when tesseract is not installed
    (OCR then reports itself unavailable per document)."""
    program = shutil.which("tesseract")
    if program is None:
        return None
    try:
        listing = subprocess.run([program, "--list-langs"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = (listing.stdout + listing.stderr).splitlines()
    return frozenset(line.strip() for line in lines if line.strip() and not line.startswith("List of"))


# the kinds of value a setting holds, each validated where it is declared


def _location(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return resolve_location(value.strip())


def _optional_location(value: str) -> str:
    return resolve_location(value.strip()) if value.strip() else ""


def _absolute_file(value: str) -> str:
    """Config files are found from where the command started, also by the processes Dagster starts elsewhere."""
    return str(Path(value.strip()).expanduser().resolve()) if value.strip() else ""


def _http_url(value: str) -> str:
    value = value.strip().rstrip("/")
    if value and not value.startswith(("http://", "https://")):
        raise ValueError(f"{value!r} is not an http(s) URL")
    return value


def _ocr_languages(value: str) -> str:
    installed = tesseract_languages()
    missing = [code for code in value.split("+") if installed is not None and code not in installed]
    if missing:
        packages = ", ".join(f"tesseract-ocr-{code}" for code in missing)
        raise ValueError(
            f"tesseract has no language {', '.join(map(repr, missing))} (installed: "
            f"{', '.join(sorted(installed or [])) or 'none'}; install {packages})"
        )
    return value


def _tiers(value: str) -> str:
    tiers = [tier.strip() for tier in value.split(",") if tier.strip()]
    unknown = [tier for tier in tiers if tier not in ("verified", "not_reported", "derived")]
    if unknown:
        raise ValueError(
            f"unknown tier(s) {', '.join(unknown)}: only verified, not_reported and derived may be accepted"
        )
    return ",".join(tiers)


Location = Annotated[str, AfterValidator(_location)]  # a folder or an s3:// prefix, made absolute
OptionalLocation = Annotated[str, AfterValidator(_optional_location)]
AbsoluteFile = Annotated[str, AfterValidator(_absolute_file)]
HttpUrl = Annotated[str, AfterValidator(_http_url)]
OcrLanguage = Annotated[str, AfterValidator(_ocr_languages)]
Tiers = Annotated[str, AfterValidator(_tiers)]

PostprocessMode = Literal["auto", "skip", "llm"]
SearchBackend = Literal["auto", "sqlite", "postgres"]
ExecutorName = Literal["in_process", "multiprocess", "k8s", "celery"]
ParserName = Literal["pymupdf4llm", "mineru", "docling"]
TablesParserName = Literal["", "pymupdf4llm", "mineru", "docling"]
MinerUApi = Literal["local", "hosted"]
DoclingTableMode = Literal["fast", "accurate"]


def _group(prefix: str) -> ConfigDict:
    """A group's fields are read under ``prefix`` (``ATLAS_`` + prefix + field), unless an alias names them."""
    return ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        validate_default=True,
        alias_generator=lambda name: prefix + name,
    )


class SettingGroup(BaseModel):
    """One group of settings; ``title`` is what ``atlas settings`` and docs/configuration.md say it is for."""

    title: ClassVar[str]


class ProjectSettings(SettingGroup):
    """Where the documents, artifacts and exports are, and what is extracted from them."""

    model_config = _group("")
    title: ClassVar[str] = "Where the documents, artifacts and exports are, and what is extracted from them"

    knowledge_base: Location = Field(
        "seeds/knowledge_base", description="Folder or s3:// prefix holding the documents."
    )
    artifacts: Location = Field(
        "var/artifacts", description="Folder or s3:// prefix for snapshots, text, tables, records."
    )
    exports: Location = Field(
        "var/exports", description="Folder or s3:// prefix for the xlsx/csv/parquet/jsonl exports."
    )
    seeds_dir: Location = Field(default_factory=_default_seeds_dir, description="Folder with templates/ and rules/.")
    rule: str = Field("default", description="Name of the rule file in seeds/rules (without .json).")
    postprocess_mode: PostprocessMode = Field(
        "auto", description="'auto': llm when ATLAS_LLM_BASE_URL is set, else the rule's mode; or force skip/llm."
    )


class ParsingSettings(SettingGroup):
    """Parsing here, on the CPU: OCR, the PDF engine, limits per document."""

    model_config = _group("")
    title: ClassVar[str] = "Parsing here, on the CPU: OCR, the PDF engine, limits per document"

    ocr: bool = Field(
        default_of(ParseOptions, "ocr"), description="OCR image-only PDF pages with tesseract when it is installed."
    )
    ocr_language: OcrLanguage = Field(
        default_of(ParseOptions, "ocr_language"), min_length=1, description="Tesseract language(s), e.g. 'eng+fra'."
    )
    ocr_max_text_chars: int = Field(
        default_of(ParseOptions, "ocr_max_text_chars"),
        ge=-1,
        description=(
            "Pages whose own text layer has more characters than this are not OCR'd (-1: always let pymupdf4llm "
            "decide, which also OCRs figures)."
        ),
    )
    pdf_engine: PdfEngine = Field(
        default_of(ParseOptions, "engine"),
        description=(
            "pymupdf4llm engine: 'auto' (the layout model on the pages that need it: tables, unusual layout; "
            "PyMuPDF's own blocks on running text), 'layout' (the layout model on every page) or 'legacy' (no layout "
            "model, no tables)."
        ),
    )
    max_document_mb: float = Field(200.0, gt=0, description="Larger documents are skipped with a reason.")
    parse_timeout_seconds: float = Field(
        default_of(ParseLimits, "seconds"),
        gt=0,
        description="Time limit of one document's parse; past it the document fails with that reason.",
    )
    parse_memory_mb: float = Field(
        default_of(ParseLimits, "memory_mb"),
        ge=128,
        description=(
            "Memory limit (resident MB) of the process parsing one document; past it the document fails with that "
            "reason."
        ),
    )


class ProviderSettings(SettingGroup):
    """Parsing providers (MinerU, docling-serve) and who parses what."""

    model_config = _group("")
    title: ClassVar[str] = "Parsing providers (MinerU, docling-serve) and who parses what"

    parser: ParserName = Field(
        "pymupdf4llm",
        description=(
            "Who parses PDFs and images (text and tables): pymupdf4llm (here, on the CPU), mineru (ATLAS_MINERU_URL) "
            "or docling (ATLAS_DOCLING_URL). HTML, JATS and text are always parsed here."
        ),
    )
    tables_parser: TablesParserName = Field(
        "",
        description=(
            "Who supplies the tables of PDFs and images when not the parser (empty: the parser), e.g. "
            "ATLAS_PARSER=pymupdf4llm with ATLAS_TABLES_PARSER=mineru: pymupdf4llm's text, MinerU's tables."
        ),
    )
    mineru_url: HttpUrl = Field(
        "", description="MinerU: the mineru-api server (http://host:8000) or the hosted API (https://mineru.net)."
    )
    mineru_api: MinerUApi = Field(
        "local",
        description=(
            "MinerU API kind: local (mineru-api's POST /file_parse) or hosted (mineru.net's v4 task API: upload, "
            "poll, fetch the result zip; needs ATLAS_MINERU_TOKEN)."
        ),
    )
    mineru_token: SecretStr = Field(SecretStr(""), description="MinerU hosted API token (never logged or stored).")
    mineru_backend: str = Field(
        "pipeline",
        min_length=1,
        description="MinerU backend / model version: pipeline, vlm-… (local), pipeline or vlm (hosted).",
    )
    mineru_language: str = Field("en", min_length=1, description="MinerU OCR language (en, ch, latin, …).")
    docling_url: HttpUrl = Field(
        "", description="docling-serve base URL, e.g. http://host:5001 (version 1.0 or later)."
    )
    docling_api_key: SecretStr = Field(
        SecretStr(""), description="docling-serve API key, sent as X-Api-Key (never logged or stored)."
    )
    docling_table_mode: DoclingTableMode = Field("accurate", description="docling-serve table structure mode.")
    docling_ocr: bool = Field(True, description="Let docling-serve OCR bitmap content.")
    provider_timeout_seconds: float = Field(
        default_of(ProviderLimits, "timeout_seconds"),
        gt=0,
        le=7200,
        description="Timeout of one request to a parsing provider.",
    )
    provider_max_seconds: float = Field(
        default_of(ProviderLimits, "max_seconds"),
        gt=0,
        le=86400,
        description=(
            "Time one document may take at a parsing provider (upload, queue, parse, download); past it the document "
            "fails with that reason."
        ),
    )
    provider_max_retries: int = Field(
        default_of(ProviderLimits, "max_retries"),
        ge=0,
        le=20,
        description="Retries of transient provider errors (429, 5xx, timeouts, connection).",
    )
    provider_backoff_seconds: float = Field(
        default_of(ProviderLimits, "backoff_seconds"),
        ge=0,
        le=300,
        description="First provider retry delay; doubles each retry, plus random jitter.",
    )
    provider_poll_seconds: float = Field(
        default_of(ProviderLimits, "poll_seconds"),
        gt=0,
        le=600,
        description="Seconds between two status checks of a provider task.",
    )
    provider_max_mb: float = Field(
        default_of(ProviderLimits, "max_bytes") / 1_000_000,
        gt=0,
        description="Larger documents are not sent to a parsing provider (MinerU's hosted limit).",
    )
    provider_version: str = Field(
        "",
        description=(
            "A label for the provider deployment's version (its model, its release): part of the parse cache key, so "
            "changing it parses again; what a provider reports is recorded either way."
        ),
    )

    @model_validator(mode="after")
    def _providers_configured(self) -> ProviderSettings:
        for chosen in {self.parser, self.tables_parser}:
            if chosen == "mineru" and not self.mineru_url:
                raise ValueError("ATLAS_PARSER/ATLAS_TABLES_PARSER is mineru but ATLAS_MINERU_URL is not set")
            if chosen == "mineru" and self.mineru_api == "hosted" and not self.mineru_token.get_secret_value():
                raise ValueError("the hosted MinerU API needs ATLAS_MINERU_TOKEN")
            if chosen == "docling" and not self.docling_url:
                raise ValueError("ATLAS_PARSER/ATLAS_TABLES_PARSER is docling but ATLAS_DOCLING_URL is not set")
        return self


class LLMSettings(SettingGroup):
    """The OpenAI-compatible endpoint: model, limits, requests in flight, the Batch API, prices."""

    model_config = _group("llm_")
    title: ClassVar[str] = "The OpenAI-compatible endpoint: model, limits, requests in flight, the Batch API, prices"

    base_url: str = Field("", description="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1.")
    model: str = Field(default_of(LLMConfig, "model"), min_length=1, description="Model name sent to the endpoint.")
    api_key: SecretStr = Field(
        SecretStr(""), description="API key (never logged or stored; local servers accept any value)."
    )
    second_model: str = Field(
        "",
        description=(
            "A second, independent extractor: this model extracts every document too, with the fields in another "
            "order and no sight of the first answer; a value the two do not agree on goes to a person (empty: one "
            "extractor). May be the same model as ATLAS_LLM_MODEL."
        ),
    )
    second_base_url: HttpUrl = Field("", description="Endpoint of the second extractor (empty: ATLAS_LLM_BASE_URL).")
    second_api_key: SecretStr = Field(
        SecretStr(""),
        description=(
            "API key of the second extractor's endpoint (never logged or stored; empty: ATLAS_LLM_API_KEY when the "
            "endpoint is the first's)."
        ),
    )
    timeout_seconds: float = Field(
        default_of(LLMConfig, "timeout_seconds"),
        gt=0,
        le=3600,
        description="Timeout of one read of an LLM request (connecting, the first byte, each later read).",
    )
    deadline_seconds: float = Field(
        default_of(LLMConfig, "deadline_seconds"),
        gt=0,
        le=86400,
        description=(
            "The whole answer of one LLM request (headers and body) within this time, or it is cut off and the "
            "request fails with the reason (an endpoint that trickles its answer never holds a run)."
        ),
    )
    max_answer_bytes: int = Field(
        default_of(LLMConfig, "max_answer_bytes"),
        ge=10000,
        le=1000000000,
        description=(
            "The largest answer body read from the LLM endpoint; beyond it the answer is cut off, the request fails "
            "with the reason and nothing is cached."
        ),
    )
    max_retries: int = Field(
        default_of(LLMConfig, "max_retries"),
        ge=0,
        le=20,
        description="Retries of transient LLM errors (429, 5xx, timeouts).",
    )
    backoff_seconds: float = Field(
        default_of(LLMConfig, "backoff_seconds"),
        ge=0,
        le=300,
        description="First retry delay; doubles each retry, plus random jitter.",
    )
    structured_output: StructuredOutput = Field(
        default_of(LLMConfig, "structured_output"),
        description=(
            "First output mode to ask for: json_schema (OpenAI-style), json_object_schema (llama.cpp), json_object; a"
            " server that rejects one gets the next."
        ),
    )
    max_tokens: int = Field(
        default_of(LLMConfig, "max_tokens"), ge=64, le=200000, description="Maximum tokens of one LLM answer."
    )
    concurrency: int = Field(
        default_of(LLMConfig, "concurrency"),
        ge=1,
        le=512,
        description=(
            "LLM requests in flight at most, across every run, process and machine of the deployment (on this machine "
            "only with ATLAS_LLM_GATE=host or a SQLite instance; a hosted endpoint: 8–64; a"
            " local llama.cpp/Ollama: its parallel slots; vLLM: 16–64). A 429 halves it for a while."
        ),
    )
    requests_per_minute: int = Field(
        default_of(LLMConfig, "requests_per_minute"),
        ge=0,
        le=1000000,
        description="Requests per minute at most (0: no budget; the endpoint's 429s still slow).",
    )
    tokens_per_minute: int = Field(
        default_of(LLMConfig, "tokens_per_minute"),
        ge=0,
        le=1000000000,
        description="Tokens (prompt + answer) per minute at most (0: no budget).",
    )
    batch: bool = Field(
        False,
        description=(
            "Send extraction requests through the endpoint's Batch API (OpenAI: half price, answers within 24 h): "
            "documents wait at the endpoint and are graded when their answers arrive."
        ),
    )
    batch_deadline_hours: float = Field(
        26.0,
        gt=0,
        le=720,
        description=(
            "A Batch API batch still open this long after it was sent is cancelled and given up: its requests are "
            "sent directly at their documents' next run (an endpoint that never ends a batch never holds a document)."
        ),
    )
    batch_poll_seconds: int = Field(
        60,
        ge=5,
        le=86400,
        description="Seconds between two looks at the Batch API (submit queued requests, fetch answers).",
    )
    gate_dir: str = Field(
        default_of(LLMConfig, "gate_dir"),
        description=(
            "Folder of the lock files that keep ATLAS_LLM_CONCURRENCY across processes (empty: one in the system's "
            "temp folder, shared by every deployment of this user on this machine)."
        ),
    )
    gate: Literal["auto", "host", "postgres"] = Field(
        "auto",
        description=(
            "Where ATLAS_LLM_CONCURRENCY is counted: postgres (the Dagster instance's PostgreSQL database: every run, "
            "process and machine of the deployment — Celery workers on several hosts — shares one cap), host (lock "
            "files on this machine: each machine has the whole cap), or auto (postgres when the instance is on "
            "PostgreSQL, else host)."
        ),
    )
    prices: AbsoluteFile = Field(
        "",
        description=(
            "TOML price table (per model: input, cached_input, output in currency per million tokens, batch_discount)"
            " turning tokens into cost (empty: seeds/llm_prices.toml)."
        ),
    )

    @model_validator(mode="after")
    def _one_way_of_sending(self) -> LLMSettings:
        if self.second_model and self.batch:
            raise ValueError(
                "ATLAS_LLM_SECOND_MODEL with ATLAS_LLM_BATCH: a second extractor through the Batch API is not "
                "supported yet (unset one of them)"
            )
        return self


class ReviewSettings(SettingGroup):
    """People: the review page, the workbook inbox, the acceptance policy, the gold file."""

    model_config = _group("review_")
    title: ClassVar[str] = "People: the review page, the workbook inbox, the acceptance policy, the gold file"

    reviewer: str = Field(
        "",
        alias="reviewer",
        description="Name recorded with review decisions when none is entered (page) or given (spreadsheet row).",
    )
    port: int = Field(3001, ge=1, le=65535, description="Port of the review page (`atlas review`, 127.0.0.1).")
    users: AbsoluteFile = Field(
        "var/review_users.json",
        description=(
            "The review page's accounts file (names, roles, password hashes), managed by `atlas users`; once it holds"
            " an account, everyone logs in and decisions are recorded under the login."
        ),
    )
    auth_header: str = Field(
        "",
        description=(
            "Request header in which a reverse proxy that authenticates people passes the user name (e.g. "
            "X-Forwarded-User; empty: none). Trusted as is: set it only when every request comes through that proxy."
        ),
    )
    session_hours: float = Field(12, gt=0, le=720, description="How long a login to the review page lasts (hours).")
    login_free_failures: int = Field(
        5,
        ge=1,
        le=100,
        description=(
            "Failed logins to the review page an account, or a client address, has before it must wait: then 1 s "
            "before the next attempt, doubling after each further failure (the password is not checked while it "
            "waits); a successful login clears the count."
        ),
    )
    login_max_lockout_seconds: int = Field(
        900,
        ge=1,
        le=86400,
        description=(
            "The longest wait after failed logins to the review page (seconds); a count is also forgotten once this "
            "long has passed after its wait without another failure."
        ),
    )
    extractors: int = Field(
        2,
        ge=1,
        le=5,
        description=(
            "How many people extract each document independently when reviewers log in: the ones assigned (`atlas "
            "users assign`, the Team page) or else the first to start; each sees no one else's values until all have "
            "marked their extraction complete, then the differences go to an adjudicator."
        ),
    )
    hide_model_values: bool = Field(
        False,
        description=(
            "Whether extractors also work blind to the models' values (and quotes) until their extraction of a "
            "document is compared (true: extraction by hand even where a model extracted)."
        ),
    )
    inbox: OptionalLocation = Field(
        "", description="Folder or s3:// prefix where reviewed workbooks are dropped to be imported (empty: none)."
    )
    workbook_max_rows: int = Field(
        300000,
        ge=1000,
        le=5000000,
        description=(
            "The most rows (over every sheet) a reviewed workbook may hold; one with more is refused with the reason "
            "before any reader opens it (a spreadsheet reader holds a whole sheet in memory)."
        ),
    )
    workbook_sheet_rows: int = Field(
        100000,
        ge=100,
        le=10000000,
        description=(
            "The most rows the exported workbook writes in one sheet (the fields sheet: those awaiting a person "
            "first); a longer table's sheet says how many rows are left out — the parquet, csv and jsonl exports hold "
            "every one. Past Excel's 1,048,575 rows a sheet goes on in sheets 'fields (2)', 'fields (3)'…"
        ),
    )
    accept_tiers: Tiers = Field(
        "verified",
        description=(
            "Tiers accepted without a person (comma-separated: verified, not_reported, derived — a value derived from"
            " accepted ones by a named formula; empty: a person decides every field). Flagged fields always need a "
            "person."
        ),
    )
    derive_opt_in: str = Field(
        "",
        alias="derive_opt_in",
        description=(
            "Conversions the Cochrane Handbook warns against that the team accepts for derived values (comma-"
            "separated: sd_from_iqr, sd_from_range; empty: they are only flagged)."
        ),
    )
    interval_seconds: int = Field(
        5, ge=1, le=86400, description="Seconds between checks for new review decisions and inbox workbooks."
    )
    gold: OptionalLocation = Field(
        "",
        alias="gold",
        description=(
            "Gold-standard JSON-lines file (or s3:// object) the extractions are measured against by the "
            "extraction_evaluation asset (empty: no evaluation asset; `atlas evaluate --gold` works without it)."
        ),
    )
    gold_tolerance: float = Field(
        0.005,
        ge=0,
        le=1,
        alias="gold_tolerance",
        description="Relative tolerance within which a number counts as equal to the gold.",
    )

    @property
    def accepted_tiers(self) -> frozenset[str]:
        return frozenset(filter(None, self.accept_tiers.split(",")))

    @property
    def derivations_opted_in(self) -> frozenset[str]:
        return frozenset(name.strip() for name in self.derive_opt_in.split(",") if name.strip())


class SourcesSettings(SettingGroup):
    """Collectors that fill the knowledge base from feeds and sites."""

    model_config = _group("sources_")
    title: ClassVar[str] = "Collectors that fill the knowledge base from feeds and sites"

    file: AbsoluteFile = Field(
        "",
        alias="sources",
        description=(
            "TOML file declaring collectors (feeds, URL lists) that bring documents into the knowledge base (empty: "
            "seeds/sources.toml when it exists; see seeds/sources.example.toml)."
        ),
    )
    user_agent: str = Field(
        default_of(Politeness, "user_agent"),
        min_length=8,
        description="User-Agent of every collector request (say who you are and how to reach you).",
    )
    interval_seconds: int = Field(
        60, ge=1, le=86400, description="Seconds between two ticks of a source's sensor (its own pace decides more)."
    )
    backlog_threshold: int = Field(
        default_of(Politeness, "backlog_threshold"),
        ge=1,
        le=1000000,
        description=(
            "Runs waiting or in progress above which collection slows down (up to 8x; an empty backlog reads feeds "
            "twice as often)."
        ),
    )


class SearchSettings(SettingGroup):
    """The full-text index."""

    model_config = _group("search_")
    title: ClassVar[str] = "The full-text index"

    backend: SearchBackend = Field(
        "auto",
        description=(
            "Search index: sqlite (a file, ATLAS_SEARCH_SQLITE), postgres (the instance's PostgreSQL database), or "
            "auto (postgres when the Dagster instance is PostgreSQL, else sqlite)."
        ),
    )
    sqlite: AbsoluteFile = Field(
        "", description="The SQLite FTS5 search index file (empty: atlas_search.sqlite in the instance's storage)."
    )


class RuntimeSettings(SettingGroup):
    """Dagster: the instance, sensors, the executor, the local web servers."""

    model_config = _group("")
    title: ClassVar[str] = "Dagster: the instance, sensors, the executor, the local web servers"

    instance_config: AbsoluteFile = Field(
        "",
        description=(
            "Dagster instance config copied into an empty DAGSTER_HOME (default: the project's dagster.yaml; "
            "deploy/postgres/dagster.yaml for PostgreSQL)."
        ),
    )
    sensor_interval_seconds: int = Field(30, ge=1, le=86400, description="Seconds between knowledge-base scans.")
    sensor_max_runs_per_tick: int = Field(
        200,
        ge=1,
        le=10000,
        description="Documents requested per sensor tick (in runs of ATLAS_DOCUMENTS_PER_RUN); the rest wait a tick.",
    )
    documents_per_run: int = Field(
        0,
        ge=0,
        le=1000,
        description=(
            "Documents one run takes on, in the sensor's runs as in `atlas run` (0: ATLAS_LLM_CONCURRENCY when a model "
            "extracts, so that one run keeps the endpoint's requests in flight; else 1). Each document keeps its own "
            "materialisations and status, one that fails fails alone, and a lone new document starts at once."
        ),
    )
    sensor_scan_budget_seconds: float = Field(
        5.0,
        gt=0,
        le=600,
        description=(
            "Time one tick's scan may take: listing, reading the catalog and fingerprinting new files (at least a "
            "fifth of it for these); new files left over wait a tick (a tick stays well inside Dagster's 60 s even "
            "at 100,000 documents)."
        ),
    )
    automation_interval_seconds: int = Field(30, ge=1, le=86400, description="Seconds between automation checks.")
    executor: ExecutorName = Field(
        "in_process",
        description=(
            "Dagster executor of the jobs: in_process (one process per run), multiprocess, or a scale-out executor "
            "(k8s, celery: needs the `scale-out` extra); see docs/operations.md."
        ),
    )
    executor_config: AbsoluteFile = Field(
        "", description="YAML file with the executor's config, e.g. deploy/k8s/executor.yaml (empty: defaults)."
    )
    trusted_hosts: str = Field(
        "",
        description=(
            "Host names the review page and the Dagster UI of `atlas dev` answer besides 127.0.0.1, localhost and "
            "[::1] (comma-separated; for serving them on a network: any other Host is refused, no DNS rebinding)."
        ),
    )


class AtlasSettings(BaseModel):
    """Settings of one Atlas deployment, group by group; every field of every group is one ``ATLAS_*`` variable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: ProjectSettings = Field(default_factory=ProjectSettings)
    parsing: ParsingSettings = Field(default_factory=ParsingSettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    llm: LLMSettings = Field(default_factory=LLMSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    sources: SourcesSettings = Field(default_factory=SourcesSettings)
    search: SearchSettings = Field(default_factory=SearchSettings)
    runtime: RuntimeSettings = Field(default_factory=RuntimeSettings)

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> AtlasSettings:
        """The settings from flat values keyed by setting name (``llm_concurrency``), validated; unknown names
        raise ``KeyError``."""
        grouped: dict[str, dict[str, Any]] = {group: {} for group in cls.model_fields}
        for name, value in values.items():
            grouped[SETTINGS[name].group][name] = value
        return cls.model_validate(grouped)

    def value(self, name: str) -> Any:
        """The value of setting ``name`` (``llm_concurrency``)."""
        setting = SETTINGS[name]
        return getattr(getattr(self, setting.group), setting.attribute)

    def values(self) -> dict[str, Any]:
        """Every setting by name, flat (what ``from_values`` takes back)."""
        return {name: self.value(name) for name in SETTINGS}

    def updated(self, **values: Any) -> AtlasSettings:
        """These settings with ``values`` (by setting name) changed, validated again."""
        return AtlasSettings.from_values(self.values() | values)


class Setting(NamedTuple):
    """One setting: its name (the variable without ``ATLAS_``), where it sits in ``AtlasSettings``, its field."""

    name: str
    group: str
    attribute: str
    field: FieldInfo

    @property
    def variable(self) -> str:
        return ENV_PREFIX + self.name.upper()


def _every_setting() -> dict[str, Setting]:
    settings = {}
    for group, holder in AtlasSettings.model_fields.items():
        for attribute, field in holder.annotation.model_fields.items():
            settings[field.alias] = Setting(field.alias, group, attribute, field)
    return settings


SETTINGS: dict[str, Setting] = _every_setting()  # by name, group by group in declaration order
SETTING_GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    group: (holder.annotation.title, tuple(s.name for s in SETTINGS.values() if s.group == group))
    for group, holder in AtlasSettings.model_fields.items()
}
SETTING_GROUP = {name: setting.group for name, setting in SETTINGS.items()}


# ATLAS_* variables that are not settings of this model but are read elsewhere
OTHER_VARIABLES = {
    "ATLAS_S3_ENDPOINT_URL",
    "ATLAS_TEST_CORPUS",
    "ATLAS_TEST_SCREENSHOTS",
    "ATLAS_CELERY_BROKER",  # read by deploy/celery/executor.yaml
    "ATLAS_CELERY_BACKEND",
    "ATLAS_REVIEW",  # the review folder (config.review_folder)
}


class SettingsWarning(UserWarning):
    """An ``ATLAS_*`` variable that no setting reads (a misspelling, most likely)."""


def unknown_variables(env: dict[str, str]) -> list[str]:
    """A message per ``ATLAS_*`` variable no setting reads, naming the closest one."""
    known = {setting.variable for setting in SETTINGS.values()} | OTHER_VARIABLES
    messages = []
    for name in sorted(variable for variable in env if variable.startswith(ENV_PREFIX) and variable not in known):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        messages.append(f"{name} is not an Atlas setting and is ignored{hint}; `atlas settings` lists them all")
    return messages


SECRET_SETTINGS = frozenset(name for name, setting in SETTINGS.items() if setting.field.annotation is SecretStr)


def settings_environment(settings: AtlasSettings) -> dict[str, str]:
    """The settings as the ``ATLAS_*`` variables that make them again, secrets left out."""
    values = {name: value for name, value in settings.values().items() if name not in SECRET_SETTINGS}
    return {
        ENV_PREFIX + name.upper(): str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in values.items()
    }


def load_settings(environ: dict[str, str] | None = None) -> AtlasSettings:
    """Read and validate the settings — ``ATLAS_*`` variables over the review folder's ``atlas.toml``
    (``config.review_folder``) over the defaults; raise ``SettingsError`` naming the offending ``ATLAS_*`` variable,
    and warn (``SettingsWarning``) about ``ATLAS_*`` variables that no setting reads."""
    env = dict(os.environ if environ is None else environ)
    for message in unknown_variables(env):
        warnings.warn(message, SettingsWarning, stacklevel=2)
    try:
        review = find_review(env, known=frozenset(SETTINGS))
    except ReviewFolderError as error:
        raise SettingsError(str(error)) from None
    values = review.setting_values() if review is not None else {}
    values |= {name: env[setting.variable] for name, setting in SETTINGS.items() if setting.variable in env}
    try:
        return AtlasSettings.from_values(values)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            if len(item["loc"]) < 2:  # a rule between settings (a provider chosen without its URL)
                problems.append(item["msg"].removeprefix("Value error, "))
                continue
            field = str(item["loc"][1])
            given = "***" if field.endswith(("_key", "_token")) else values.get(field, item.get("input"))
            named = f"{ENV_PREFIX}{field.upper()}"
            if review is not None and field in review.settings and named not in env:
                named = f"{review.file} [settings] {field}"
            problems.append(f"{named}={given!r}: {item['msg']}")
        raise SettingsError("invalid Atlas settings: " + "; ".join(problems)) from None


class SettingRow(NamedTuple):
    group: str
    variable: str
    default: str
    description: str


def describe_settings() -> list[SettingRow]:
    """Every setting, group by group: ``atlas settings`` and the check of docs/configuration.md."""
    rows = []
    for setting in SETTINGS.values():
        default = "(project seeds/)" if setting.name == "seeds_dir" else setting.field.default
        if isinstance(default, SecretStr):
            default = "(empty)"
        rows.append(SettingRow(setting.group, setting.variable, str(default), setting.field.description or ""))
    return rows
