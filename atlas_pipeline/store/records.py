"""The small per-document records the assets write next to their artifacts, and where everything is stored.

Snapshots are content-addressed and never overwritten; parses are cached by (bytes, parser fingerprint); the
records under ``documents/<key>/`` describe the latest state of each partition and are what aggregates read.
Artifact paths in records (``*_path``) are relative to the artifact store, so a store can move (local folder →
``s3://``, see ``atlas migrate``) without rewriting a record; ``Store.url`` turns them into locations to open.
"""

from __future__ import annotations

from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from atlas_pipeline.core.redaction import redact
from atlas_pipeline.core.statuses import DocumentStatus, Stage
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import record_path

RecordT = TypeVar("RecordT", bound=BaseModel)


def legacy_stage(reason: str) -> Stage | None:
    """The stage named at the start of a reason (``"parse: …"``), as records and materialisations made before the
    stage was written on its own said it; None for any other reason."""
    prefix = reason.split(":", 1)[0] if ":" in reason else ""
    return Stage(prefix) if prefix in Stage.__members__.values() else None


class Problem(BaseModel):
    """Why a document cannot go further: the terminal status it gets, the reason, and the stage that found it."""

    status: Literal["failed", "skipped"]
    reason: str
    stage: Stage
    retryable: bool = False  # outside the document (a parsing provider down): another run may succeed

    model_config = ConfigDict(validate_assignment=True)

    @field_validator("reason")
    @classmethod
    def _mask_secrets(cls, value: str) -> str:
        return redact(value)


class SnapshotRecord(BaseModel):
    key: str
    source_path: str
    source_url: str
    sha256: str = ""
    size: int = 0
    media_type: str | None = None
    pages: int | None = None
    snapshot_path: str = ""
    taken_at: str
    seconds: float = 0.0
    problem: Problem | None = None


class ParseRecord(BaseModel):
    key: str
    sha256: str
    parser: str  # parser fingerprint (cache key part)
    engine: str = ""
    media_type: str | None = None
    pages: int = 0
    characters: int = 0
    tables: int = 0
    ocr_pages: list[int] = Field(default_factory=list)
    layout_pages: list[int] = Field(default_factory=list)  # PDF pages parsed with the layout model
    text_pages: list[int] = Field(default_factory=list)  # PDF pages on the fast text path (engine auto)
    warnings: list[str] = Field(default_factory=list)
    lost: list[str] = Field(default_factory=list)  # parts of the document that could not be read, with why
    title: str = ""  # what the document says it is (``parsing.citation``), for people to recognise it by
    authors: list[str] = Field(default_factory=list)
    year: int | None = None
    text_path: str = ""
    tables_path: str = ""
    seconds: float = 0.0  # time the parse took when it was made (also reported on cache hits)
    cached: bool = False
    provider: str = ""  # who parsed it: local (pymupdf4llm, bs4), mineru, docling, "local + tables: mineru"
    provider_task_id: str = ""
    provider_version: str = ""
    provider_cached: bool = False  # the provider's answer came from the store: it was not asked again
    timings: dict[str, float] = Field(default_factory=dict)
    problem: Problem | None = None


class ExtractionRecord(BaseModel):
    key: str
    sha256: str
    status: DocumentStatus
    reason: str

    model_config = ConfigDict(validate_assignment=True)

    @model_validator(mode="before")
    @classmethod
    def _stage_of_older_records(cls, data: Any) -> Any:
        """A record written before the stage was kept beside the reason: the stage is taken from the reason's
        prefix, here and only here, when it is read (``legacy_stage``)."""
        if isinstance(data, dict) and "stopped_at" not in data and data.get("status") in ("failed", "skipped"):
            return {**data, "stopped_at": legacy_stage(str(data.get("reason", "")))}
        return data

    @field_validator("reason")
    @classmethod
    def _mask_secrets(cls, value: str) -> str:
        return redact(value)

    completeness: float | None = None
    mode: str
    rule: str
    template_code: str
    template_version: str
    template_hash: str
    extraction_version: str = ""  # the version tag (extraction.version); another tag makes the record stale
    version_parts: dict[str, str] = Field(default_factory=dict)
    parser: str = ""  # the fingerprint of the parse it was made from (parsing.providers)
    retryable: bool = False  # failed for a reason outside the document: `atlas run` tries it again
    stopped_at: Stage | None = None  # the stage whose problem ended the document, written by that stage
    text_path: str = ""
    tables_path: str = ""
    extraction_path: str = ""
    identifiers: dict[str, list[str]] = Field(default_factory=dict)
    fields: dict[str, Any] = Field(default_factory=dict)
    strategy: str = ""
    chunks: int = 0
    answer_parts: list[str] = Field(default_factory=list)  # an answer too long for one request: what was asked how
    llm_model: str = ""
    second_model: str = ""  # the second, independent extractor (``extraction.dual``), when one is declared
    agreement: dict[str, int] = Field(default_factory=dict)  # values per agreement state of the two extractors
    extractors: dict[str, dict[str, Any]] = Field(default_factory=dict)  # each extractor's requests, tokens, cost
    second_look: list[str] = Field(default_factory=list)  # fields the follow-up request for omissions found
    second_look_error: str = ""  # why that follow-up request failed (the values found at first are kept)
    llm_calls: int = 0
    llm_cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # prompt tokens the endpoint read from its prompt cache
    cost: float | None = None  # of every answer this extraction used (None: the model has no price)
    cost_paid: float | None = None  # of the requests sent to make this record (answers from the cache are free)
    cost_currency: str = ""
    unverified_fields: int = 0  # fields that need review: approximate or unverified tier, or flagged
    violations: list[dict[str, Any]] = Field(default_factory=list)  # consistency checks that do not hold
    extracted_at: str
    seconds: float = 0.0  # extraction step alone
    processing_seconds: float = 0.0  # snapshot + parse + extraction

    def values(self) -> dict[str, dict[str, Any]]:
        """The fields a person reviews: the model's graded values — or, in skip mode (no LLM), every template field
        empty (tier ``not_extracted``), for a person to extract by hand. Failed and skipped documents have none."""
        if self.mode == "skip":
            if self.status.value in ("failed", "skipped"):
                return {}
            return {
                name: field if isinstance(field, dict) else {"value": None, "tier": NOT_EXTRACTED}
                for name, field in self.fields.items()
            }
        return {name: field for name, field in self.fields.items() if isinstance(field, dict)}


NOT_EXTRACTED = "not_extracted"  # the tier of a field no model extracted (skip mode): a person's to fill


def write_record(store: Store, key: str, stage: str, record: BaseModel) -> str:
    return store.write_json(record_path(key, stage), record.model_dump(mode="json"))


def read_record(store: Store, key: str, stage: str, model: type[RecordT]) -> RecordT | None:
    data = store.read_json_or(record_path(key, stage), None)
    return None if data is None else model.model_validate(data)
