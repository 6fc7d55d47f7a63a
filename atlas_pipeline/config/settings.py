"""Every knob of the pipeline, read once from ``ATLAS_*`` environment variables and validated at start-up.

Relative local paths are resolved against the working directory, so ``atlas run`` from the repository root uses
``seeds/knowledge_base`` and writes under ``var/``. URLs (``s3://…``) are kept as they are.
"""

from __future__ import annotations

import difflib
import functools
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any, Literal, NamedTuple

from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from atlas_pipeline.config.review_folder import ReviewFolderError, find_review
from atlas_pipeline.core.errors import AtlasError

ENV_PREFIX = "ATLAS_"
PROJECT_ROOT = Path(__file__).resolve().parents[2]


class SettingsError(AtlasError, ValueError):
    """A setting is invalid; the message names the environment variable and what is wrong with it."""


def _default_seeds_dir() -> str:
    bundled = PROJECT_ROOT / "seeds"
    return str(bundled if bundled.is_dir() else Path.cwd() / "seeds")


def is_url(location: str) -> bool:
    """True for fsspec URLs such as ``s3://bucket/prefix`` (a Windows drive letter is not a URL)."""
    return "://" in location


def resolve_location(location: str) -> str:
    """An absolute path for local locations, the URL unchanged otherwise."""
    if is_url(location) and not location.startswith("file://"):
        return location.rstrip("/")
    local = location.removeprefix("file://")
    return str(Path(local).expanduser().resolve())


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


PdfEngine = Literal["auto", "layout", "legacy"]
PostprocessMode = Literal["auto", "skip", "llm"]
StructuredOutput = Literal["json_schema", "json_object_schema", "json_object"]
SearchBackend = Literal["auto", "sqlite", "postgres"]
ExecutorName = Literal["in_process", "multiprocess", "k8s", "celery"]
ParserName = Literal["pymupdf4llm", "mineru", "docling"]
TablesParserName = Literal["", "pymupdf4llm", "mineru", "docling"]
MinerUApi = Literal["local", "hosted"]
DoclingTableMode = Literal["fast", "accurate"]


class AtlasSettings(BaseSettings):
    """Settings of one Atlas deployment. Field ``foo`` is read from ``ATLAS_FOO``."""

    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, extra="ignore", frozen=True)

    knowledge_base: str = Field("seeds/knowledge_base", description="Folder or s3:// prefix holding the documents.")
    artifacts: str = Field("var/artifacts", description="Folder or s3:// prefix for snapshots, text, tables, records.")
    exports: str = Field("var/exports", description="Folder or s3:// prefix for the xlsx/csv/parquet/jsonl exports.")
    seeds_dir: str = Field(default_factory=_default_seeds_dir, description="Folder with templates/ and rules/.")
    instance_config: str = Field(
        "",
        description="Dagster instance config copied into an empty DAGSTER_HOME (default: the project's dagster.yaml; "
        "deploy/postgres/dagster.yaml for PostgreSQL).",
    )
    rule: str = Field("default", description="Name of the rule file in seeds/rules (without .json).")
    sensor_interval_seconds: int = Field(30, ge=1, le=86_400, description="Seconds between knowledge-base scans.")
    sensor_max_runs_per_tick: int = Field(200, ge=1, le=10_000, description="Run requests per sensor tick.")
    sensor_scan_budget_seconds: float = Field(
        20.0,
        gt=0,
        le=600,
        description="Time one tick may spend fingerprinting new files; the rest waits a tick.",
    )
    automation_interval_seconds: int = Field(30, ge=1, le=86_400, description="Seconds between automation checks.")
    ocr: bool = Field(True, description="OCR image-only PDF pages with tesseract when it is installed.")
    ocr_language: str = Field("eng", min_length=1, description="Tesseract language(s), e.g. 'eng+fra'.")
    ocr_max_text_chars: int = Field(
        200,
        ge=-1,
        description="Pages whose own text layer has more characters than this are not OCR'd (-1: always let "
        "pymupdf4llm decide, which also OCRs figures).",
    )
    pdf_engine: PdfEngine = Field(
        "auto",
        description="pymupdf4llm engine: 'auto' (the layout model on the pages that need it: tables, unusual layout; "
        "PyMuPDF's own blocks on running text), 'layout' (the layout model on every page) or 'legacy' (no layout "
        "model, no tables).",
    )
    max_document_mb: float = Field(200.0, gt=0, description="Larger documents are skipped with a reason.")
    parse_timeout_seconds: float = Field(
        600.0, gt=0, description="Time limit of one document's parse; past it the document fails with that reason."
    )
    parse_memory_mb: float = Field(
        4096.0,
        ge=128,
        description="Memory limit (resident MB) of the process parsing one document; past it the "
        "document fails with that reason.",
    )
    parser: ParserName = Field(
        "pymupdf4llm",
        description="Who parses PDFs and images (text and tables): pymupdf4llm (here, on the CPU), mineru "
        "(ATLAS_MINERU_URL) or docling (ATLAS_DOCLING_URL). HTML, JATS and text are always parsed here.",
    )
    tables_parser: TablesParserName = Field(
        "",
        description="Who supplies the tables of PDFs and images when not the parser (empty: the parser), e.g. "
        "ATLAS_PARSER=pymupdf4llm with ATLAS_TABLES_PARSER=mineru: pymupdf4llm's text, MinerU's tables.",
    )
    mineru_url: str = Field(
        "", description="MinerU: the mineru-api server (http://host:8000) or the hosted API (https://mineru.net)."
    )
    mineru_api: MinerUApi = Field(
        "local",
        description="MinerU API kind: local (mineru-api's POST /file_parse) or hosted (mineru.net's v4 task API: "
        "upload, poll, fetch the result zip; needs ATLAS_MINERU_TOKEN).",
    )
    mineru_token: SecretStr = Field(SecretStr(""), description="MinerU hosted API token (never logged or stored).")
    mineru_backend: str = Field(
        "pipeline",
        min_length=1,
        description="MinerU backend / model version: pipeline, vlm-… (local), pipeline or vlm (hosted).",
    )
    mineru_language: str = Field("en", min_length=1, description="MinerU OCR language (en, ch, latin, …).")
    docling_url: str = Field("", description="docling-serve base URL, e.g. http://host:5001 (version 1.0 or later).")
    docling_api_key: SecretStr = Field(
        SecretStr(""), description="docling-serve API key, sent as X-Api-Key (never logged or stored)."
    )
    docling_table_mode: DoclingTableMode = Field("accurate", description="docling-serve table structure mode.")
    docling_ocr: bool = Field(True, description="Let docling-serve OCR bitmap content.")
    provider_timeout_seconds: float = Field(
        300.0, gt=0, le=7200, description="Timeout of one request to a parsing provider."
    )
    provider_max_seconds: float = Field(
        1800.0,
        gt=0,
        le=86_400,
        description="Time one document may take at a parsing provider (upload, queue, parse, download); past it the "
        "document fails with that reason.",
    )
    provider_max_retries: int = Field(
        3, ge=0, le=20, description="Retries of transient provider errors (429, 5xx, timeouts, connection)."
    )
    provider_backoff_seconds: float = Field(
        2.0, ge=0, le=300, description="First provider retry delay; doubles each retry, plus random jitter."
    )
    provider_poll_seconds: float = Field(
        2.0, gt=0, le=600, description="Seconds between two status checks of a provider task."
    )
    provider_max_mb: float = Field(
        200.0, gt=0, description="Larger documents are not sent to a parsing provider (MinerU's hosted limit)."
    )
    provider_version: str = Field(
        "",
        description="A label for the provider deployment's version (its model, its release): part of the parse "
        "cache key, so changing it parses again; what a provider reports is recorded either way.",
    )
    postprocess_mode: PostprocessMode = Field(
        "auto", description="'auto': llm when ATLAS_LLM_BASE_URL is set, else the rule's mode; or force skip/llm."
    )
    llm_base_url: str = Field("", description="OpenAI-compatible endpoint, e.g. https://api.openai.com/v1.")
    llm_model: str = Field("gpt-4o-mini", min_length=1, description="Model name sent to the endpoint.")
    llm_api_key: SecretStr = Field(
        SecretStr(""), description="API key (never logged or stored; local servers accept any value)."
    )
    llm_second_model: str = Field(
        "",
        description="A second, independent extractor: this model extracts every document too, with the fields in "
        "another order and no sight of the first answer; a value the two do not agree on goes to a person (empty: "
        "one extractor). May be the same model as ATLAS_LLM_MODEL.",
    )
    llm_second_base_url: str = Field("", description="Endpoint of the second extractor (empty: ATLAS_LLM_BASE_URL).")
    llm_second_api_key: SecretStr = Field(
        SecretStr(""),
        description="API key of the second extractor's endpoint (never logged or stored; empty: ATLAS_LLM_API_KEY "
        "when the endpoint is the first's).",
    )
    llm_timeout_seconds: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="Timeout of one read of an LLM request (connecting, the first byte, each later read).",
    )
    llm_deadline_seconds: float = Field(
        600.0,
        gt=0,
        le=86_400,
        description="The whole answer of one LLM request (headers and body) within this time, or it is cut off and "
        "the request fails with the reason (an endpoint that trickles its answer never holds a run).",
    )
    llm_max_answer_bytes: int = Field(
        16_000_000,
        ge=10_000,
        le=1_000_000_000,
        description="The largest answer body read from the LLM endpoint; beyond it the answer is cut off, the request "
        "fails with the reason and nothing is cached.",
    )
    llm_max_retries: int = Field(4, ge=0, le=20, description="Retries of transient LLM errors (429, 5xx, timeouts).")
    llm_backoff_seconds: float = Field(
        2.0, ge=0, le=300, description="First retry delay; doubles each retry, plus random jitter."
    )
    llm_structured_output: StructuredOutput = Field(
        "json_schema",
        description="First output mode to ask for: json_schema (OpenAI-style), json_object_schema (llama.cpp), "
        "json_object; a server that rejects one gets the next.",
    )
    llm_max_tokens: int = Field(4096, ge=64, le=200_000, description="Maximum tokens of one LLM answer.")
    llm_concurrency: int = Field(
        8,
        ge=1,
        le=512,
        description="LLM requests in flight at most, across every run and process on this machine (a hosted "
        "endpoint: 8–64; a local llama.cpp/Ollama: its parallel slots; vLLM: 16–64). A 429 halves it for a while.",
    )
    llm_requests_per_minute: int = Field(
        0, ge=0, le=1_000_000, description="Requests per minute at most (0: no budget; the endpoint's 429s still slow)."
    )
    llm_tokens_per_minute: int = Field(
        0, ge=0, le=1_000_000_000, description="Tokens (prompt + answer) per minute at most (0: no budget)."
    )
    llm_batch: bool = Field(
        False,
        description="Send extraction requests through the endpoint's Batch API (OpenAI: half price, answers within "
        "24 h): documents wait at the endpoint and are graded when their answers arrive.",
    )
    llm_batch_deadline_hours: float = Field(
        26.0,
        gt=0,
        le=24 * 30,
        description="A Batch API batch still open this long after it was sent is cancelled and given up: its "
        "requests are sent directly at their documents' next run (an endpoint that never ends a batch never holds "
        "a document).",
    )
    llm_batch_poll_seconds: int = Field(
        60,
        ge=5,
        le=86_400,
        description="Seconds between two looks at the Batch API (submit queued requests, fetch answers).",
    )
    llm_gate_dir: str = Field(
        "",
        description="Folder of the lock files that keep ATLAS_LLM_CONCURRENCY across processes (empty: one in the "
        "system's temp folder, shared by every deployment of this user on this machine).",
    )
    llm_prices: str = Field(
        "",
        description="TOML price table (per model: input, cached_input, output in currency per million tokens, "
        "batch_discount) turning tokens into cost (empty: seeds/llm_prices.toml).",
    )
    reviewer: str = Field(
        "", description="Name recorded with review decisions when none is entered (page) or given (spreadsheet row)."
    )
    review_port: int = Field(3001, ge=1, le=65_535, description="Port of the review page (`atlas review`, 127.0.0.1).")
    trusted_hosts: str = Field(
        "",
        description="Host names the review page and the Dagster UI of `atlas dev` answer besides 127.0.0.1, localhost "
        "and [::1] (comma-separated; for serving them on a network: any other Host is refused, no DNS rebinding).",
    )
    review_users: str = Field(
        "var/review_users.json",
        description="The review page's accounts file (names, roles, password hashes), managed by `atlas users`; once "
        "it holds an account, everyone logs in and decisions are recorded under the login.",
    )
    review_auth_header: str = Field(
        "",
        description="Request header in which a reverse proxy that authenticates people passes the user name (e.g. "
        "X-Forwarded-User; empty: none). Trusted as is: set it only when every request comes through that proxy.",
    )
    review_session_hours: float = Field(
        12, gt=0, le=24 * 30, description="How long a login to the review page lasts (hours)."
    )
    review_login_free_failures: int = Field(
        5,
        ge=1,
        le=100,
        description="Failed logins to the review page an account, or a client address, has before it must wait: "
        "then 1 s before the next attempt, doubling after each further failure (the password is not checked while "
        "it waits); a successful login clears the count.",
    )
    review_login_max_lockout_seconds: int = Field(
        900,
        ge=1,
        le=86_400,
        description="The longest wait after failed logins to the review page (seconds); a count is also forgotten "
        "once this long has passed after its wait without another failure.",
    )
    review_extractors: int = Field(
        2,
        ge=1,
        le=5,
        description="How many people extract each document independently when reviewers log in: the ones assigned "
        "(`atlas users assign`, the Team page) or else the first to start; each sees no one else's values until all "
        "have marked their extraction complete, then the differences go to an adjudicator.",
    )
    review_hide_model_values: bool = Field(
        False,
        description="Whether extractors also work blind to the models' values (and quotes) until their extraction of "
        "a document is compared (true: extraction by hand even where a model extracted).",
    )
    review_inbox: str = Field(
        "", description="Folder or s3:// prefix where reviewed workbooks are dropped to be imported (empty: none)."
    )
    review_workbook_max_rows: int = Field(
        300_000,
        ge=1_000,
        le=5_000_000,
        description="The most rows (over every sheet) a reviewed workbook may hold; one with more is refused with the "
        "reason before any reader opens it (a spreadsheet reader holds a whole sheet in memory).",
    )
    review_accept_tiers: str = Field(
        "verified",
        description="Tiers accepted without a person (comma-separated: verified, not_reported, derived — a value "
        "derived from accepted ones by a named formula; empty: a person decides every field). Flagged fields always "
        "need a person.",
    )
    derive_opt_in: str = Field(
        "",
        description="Conversions the Cochrane Handbook warns against that the team accepts for derived values "
        "(comma-separated: sd_from_iqr, sd_from_range; empty: they are only flagged).",
    )
    review_interval_seconds: int = Field(
        5, ge=1, le=86_400, description="Seconds between checks for new review decisions and inbox workbooks."
    )
    gold: str = Field(
        "",
        description="Gold-standard JSON-lines file (or s3:// object) the extractions are measured against by the "
        "extraction_evaluation asset (empty: no evaluation asset; `atlas evaluate --gold` works without it).",
    )
    gold_tolerance: float = Field(
        0.005, ge=0, le=1, description="Relative tolerance within which a number counts as equal to the gold."
    )
    sources: str = Field(
        "",
        description="TOML file declaring collectors (feeds, URL lists) that bring documents into the knowledge base "
        "(empty: seeds/sources.toml when it exists; see seeds/sources.example.toml).",
    )
    sources_user_agent: str = Field(
        "AtlasPipeline/0.1 (document collector for living systematic reviews; +https://github.com/atlas-pipeline)",
        min_length=8,
        description="User-Agent of every collector request (say who you are and how to reach you).",
    )
    sources_interval_seconds: int = Field(
        60, ge=1, le=86_400, description="Seconds between two ticks of a source's sensor (its own pace decides more)."
    )
    sources_backlog_threshold: int = Field(
        50,
        ge=1,
        le=1_000_000,
        description="Runs waiting or in progress above which collection slows down (up to 8x; an empty backlog "
        "reads feeds twice as often).",
    )
    search_backend: SearchBackend = Field(
        "auto",
        description="Search index: sqlite (a file, ATLAS_SEARCH_SQLITE), postgres (the instance's PostgreSQL "
        "database), or auto (postgres when the Dagster instance is PostgreSQL, else sqlite).",
    )
    search_sqlite: str = Field(
        "", description="The SQLite FTS5 search index file (empty: atlas_search.sqlite in the instance's storage)."
    )
    executor: ExecutorName = Field(
        "in_process",
        description="Dagster executor of the jobs: in_process (one process per run), multiprocess, or a scale-out "
        "executor (k8s, celery: needs the `scale-out` extra); see docs/operations.md.",
    )
    executor_config: str = Field(
        "", description="YAML file with the executor's config, e.g. deploy/k8s/executor.yaml (empty: defaults)."
    )

    @field_validator("ocr_language")
    @classmethod
    def _known_ocr_languages(cls, value: str) -> str:
        installed = tesseract_languages()
        missing = [code for code in value.split("+") if installed is not None and code not in installed]
        if missing:
            packages = ", ".join(f"tesseract-ocr-{code}" for code in missing)
            raise ValueError(
                f"tesseract has no language {', '.join(map(repr, missing))} (installed: "
                f"{', '.join(sorted(installed or [])) or 'none'}; install {packages})"
            )
        return value

    @field_validator("instance_config", "executor_config", "sources", "search_sqlite", "llm_prices", "review_users")
    @classmethod
    def _absolute_file(cls, value: str) -> str:
        """Config files are found from where the command started, also by the processes Dagster starts elsewhere."""
        return str(Path(value.strip()).expanduser().resolve()) if value.strip() else ""

    @field_validator("knowledge_base", "artifacts", "exports", "seeds_dir")
    @classmethod
    def _resolve(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        return resolve_location(value.strip())

    @field_validator("review_inbox", "gold")
    @classmethod
    def _resolve_optional(cls, value: str) -> str:
        return resolve_location(value.strip()) if value.strip() else ""

    @field_validator("review_accept_tiers")
    @classmethod
    def _known_tiers(cls, value: str) -> str:
        tiers = [tier.strip() for tier in value.split(",") if tier.strip()]
        unknown = [tier for tier in tiers if tier not in ("verified", "not_reported", "derived")]
        if unknown:
            raise ValueError(
                f"unknown tier(s) {', '.join(unknown)}: only verified, not_reported and derived may be accepted"
            )
        return ",".join(tiers)

    @field_validator("mineru_url", "docling_url", "llm_second_base_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not value.startswith(("http://", "https://")):
            raise ValueError(f"{value!r} is not an http(s) URL")
        return value

    @model_validator(mode="after")
    def _providers_configured(self) -> AtlasSettings:
        for chosen in {self.parser, self.tables_parser}:
            if chosen == "mineru" and not self.mineru_url:
                raise ValueError("ATLAS_PARSER/ATLAS_TABLES_PARSER is mineru but ATLAS_MINERU_URL is not set")
            if chosen == "mineru" and self.mineru_api == "hosted" and not self.mineru_token.get_secret_value():
                raise ValueError("the hosted MinerU API needs ATLAS_MINERU_TOKEN")
            if chosen == "docling" and not self.docling_url:
                raise ValueError("ATLAS_PARSER/ATLAS_TABLES_PARSER is docling but ATLAS_DOCLING_URL is not set")
        if self.llm_second_model and self.llm_batch:
            raise ValueError(
                "ATLAS_LLM_SECOND_MODEL with ATLAS_LLM_BATCH: a second extractor through the Batch API is not "
                "supported yet (unset one of them)"
            )
        return self

    @property
    def accepted_tiers(self) -> frozenset[str]:
        return frozenset(filter(None, self.review_accept_tiers.split(",")))

    @property
    def derivations_opted_in(self) -> frozenset[str]:
        return frozenset(name.strip() for name in self.derive_opt_in.split(",") if name.strip())


# The settings by group: what each part of a deployment is built from (``atlas_pipeline.deployment`` turns a group
# into the value objects its library package owns). Every setting is in exactly one group (``test_settings``).
SETTING_GROUPS: dict[str, tuple[str, tuple[str, ...]]] = {
    "deployment": (
        "Where the documents, artifacts and exports are, and what is extracted from them",
        ("knowledge_base", "artifacts", "exports", "seeds_dir", "rule", "postprocess_mode"),
    ),
    "parsing": (
        "Parsing here, on the CPU: OCR, the PDF engine, limits per document",
        (
            "ocr",
            "ocr_language",
            "ocr_max_text_chars",
            "pdf_engine",
            "max_document_mb",
            "parse_timeout_seconds",
            "parse_memory_mb",
        ),
    ),
    "providers": (
        "Parsing providers (MinerU, docling-serve) and who parses what",
        (
            "parser",
            "tables_parser",
            "mineru_url",
            "mineru_api",
            "mineru_token",
            "mineru_backend",
            "mineru_language",
            "docling_url",
            "docling_api_key",
            "docling_table_mode",
            "docling_ocr",
            "provider_timeout_seconds",
            "provider_max_seconds",
            "provider_max_retries",
            "provider_backoff_seconds",
            "provider_poll_seconds",
            "provider_max_mb",
            "provider_version",
        ),
    ),
    "llm": (
        "The OpenAI-compatible endpoint: model, limits, requests in flight, the Batch API, prices",
        (
            "llm_base_url",
            "llm_model",
            "llm_api_key",
            "llm_second_model",
            "llm_second_base_url",
            "llm_second_api_key",
            "llm_timeout_seconds",
            "llm_deadline_seconds",
            "llm_max_answer_bytes",
            "llm_max_retries",
            "llm_backoff_seconds",
            "llm_structured_output",
            "llm_max_tokens",
            "llm_concurrency",
            "llm_requests_per_minute",
            "llm_tokens_per_minute",
            "llm_batch",
            "llm_batch_deadline_hours",
            "llm_batch_poll_seconds",
            "llm_gate_dir",
            "llm_prices",
        ),
    ),
    "review": (
        "People: the review page, the workbook inbox, the acceptance policy, the gold file",
        (
            "reviewer",
            "review_port",
            "review_users",
            "review_auth_header",
            "review_session_hours",
            "review_login_free_failures",
            "review_login_max_lockout_seconds",
            "review_extractors",
            "review_hide_model_values",
            "review_inbox",
            "review_workbook_max_rows",
            "review_accept_tiers",
            "derive_opt_in",
            "review_interval_seconds",
            "gold",
            "gold_tolerance",
        ),
    ),
    "sources": (
        "Collectors that fill the knowledge base from feeds and sites",
        ("sources", "sources_user_agent", "sources_interval_seconds", "sources_backlog_threshold"),
    ),
    "search": ("The full-text index", ("search_backend", "search_sqlite")),
    "runtime": (
        "Dagster: the instance, sensors, the executor, the local web servers",
        (
            "instance_config",
            "sensor_interval_seconds",
            "sensor_max_runs_per_tick",
            "sensor_scan_budget_seconds",
            "automation_interval_seconds",
            "executor",
            "executor_config",
            "trusted_hosts",
        ),
    ),
}
SETTING_GROUP = {name: group for group, (_, names) in SETTING_GROUPS.items() for name in names}


def setting_default(name: str) -> Any:
    """The default of setting ``name``, for library classes that take the same knob (one definition of it)."""
    return AtlasSettings.model_fields[name].get_default(call_default_factory=True)


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
    known = {ENV_PREFIX + name.upper() for name in AtlasSettings.model_fields} | OTHER_VARIABLES
    messages = []
    for name in sorted(variable for variable in env if variable.startswith(ENV_PREFIX) and variable not in known):
        close = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]}?)" if close else ""
        messages.append(f"{name} is not an Atlas setting and is ignored{hint}; `atlas settings` lists them all")
    return messages


SECRET_SETTINGS = frozenset(name for name, field in AtlasSettings.model_fields.items() if field.annotation is SecretStr)


def settings_environment(settings: AtlasSettings) -> dict[str, str]:
    """The settings as the ``ATLAS_*`` variables that make them again, secrets left out."""
    values = settings.model_dump(exclude=set(SECRET_SETTINGS))
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
        review = find_review(env, known=frozenset(AtlasSettings.model_fields))
    except ReviewFolderError as error:
        raise SettingsError(str(error)) from None
    values = review.setting_values() if review is not None else {}
    values |= {
        name: env[ENV_PREFIX + name.upper()] for name in AtlasSettings.model_fields if ENV_PREFIX + name.upper() in env
    }
    try:
        return AtlasSettings.model_validate(values)
    except ValidationError as error:
        problems = []
        for item in error.errors():
            if not item["loc"]:  # a rule between settings (a provider chosen without its URL)
                problems.append(item["msg"].removeprefix("Value error, "))
                continue
            field = str(item["loc"][0])
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
    for group, (_, names) in SETTING_GROUPS.items():
        for name in names:
            field = AtlasSettings.model_fields[name]
            default = "(project seeds/)" if name == "seeds_dir" else field.default
            if isinstance(default, SecretStr):
                default = "(empty)"
            rows.append(SettingRow(group, ENV_PREFIX + name.upper(), str(default), field.description or ""))
    return rows
