"""Extraction modes: what turns a parsed document into an extraction record, one class per ``ATLAS_POSTPROCESS_MODE``.

``skip`` writes the stable JSON wrapper (no LLM); ``llm`` extracts every field with its quote through an
OpenAI-compatible endpoint and grades it against the document. Another one (a rules-only extractor, another kind of
model) is a new ``ExtractionMode`` subclass added to ``MODES`` and its name to the ``ATLAS_POSTPROCESS_MODE``
choices; the assets and the extraction step (``document_extraction``) do not change. A mode fills the record
(status, reason, fields, usage) and returns the output document to store, or None.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import Template
from atlas_pipeline.extraction.extractor import extract_with_llm
from atlas_pipeline.extraction.llm import LLMClient
from atlas_pipeline.extraction.llm_results import LLMError, LLMQueuedError, Usage
from atlas_pipeline.extraction.prompt import PromptSources
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.skip import skip_wrapper
from atlas_pipeline.extraction.version import ExtractionVersion
from atlas_pipeline.knowledge.identifiers import find_identifiers
from atlas_pipeline.parsing import Table
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, SnapshotRecord


@dataclass(frozen=True)
class ExtractionInput:
    """What an extraction mode works from: the document's records, its text and tables (read lazily), the template
    and rule, and the extraction version being made."""

    snapshot: SnapshotRecord
    parse: ParseRecord
    template: Template
    rule: Rule
    version: ExtractionVersion
    markdown: Callable[[], str]
    tables: Callable[[], list[Table]]


class ExtractionMode(ABC):
    mode: ClassVar[str]

    @abstractmethod
    def run(self, inputs: ExtractionInput, record: ExtractionRecord) -> dict[str, Any] | None:
        """Fill ``record``; return the extraction output to store (or None when there is none)."""


class SkipMode(ExtractionMode):
    """No LLM: the wrapper pointing at the text and tables, with the identifiers found in the text."""

    mode = "skip"

    def run(self, inputs: ExtractionInput, record: ExtractionRecord) -> dict[str, Any] | None:
        record.identifiers = find_identifiers(inputs.markdown())
        wrapper = skip_wrapper(inputs.snapshot, inputs.parse, inputs.template, inputs.rule, record.identifiers)
        record.fields = wrapper["fields"]
        record.reason = "skip mode: text and tables ready for review, no LLM extraction configured"
        return wrapper


class LLMMode(ExtractionMode):
    """Template-driven extraction by an LLM, every value graded against its verbatim quote."""

    mode = "llm"

    def __init__(self, llm: LLMClient | None) -> None:
        self.llm = llm

    def _account(self, record: ExtractionRecord, usage: Usage) -> None:
        """Requests, tokens and money onto the record (no price for the model: the cost stays unknown)."""
        record.llm_calls, record.llm_cache_hits = usage.calls, usage.cache_hits
        record.prompt_tokens, record.completion_tokens = usage.prompt_tokens, usage.completion_tokens
        record.cached_tokens = usage.cached_tokens
        if self.llm is not None and self.llm.price is not None:
            record.cost = round(usage.cost + usage.reused_cost, 6)
            record.cost_paid = round(usage.cost, 6)
            record.cost_currency = self.llm.currency

    def run(self, inputs: ExtractionInput, record: ExtractionRecord) -> dict[str, Any] | None:
        if self.llm is None:
            record.status, record.reason = DocumentStatus.FAILED, "extract: llm mode but no LLM endpoint configured"
            return None
        markdown = inputs.markdown()
        record.identifiers = find_identifiers(markdown)
        record.llm_model = self.llm.config.model
        try:
            sources = PromptSources.of_parse(inputs.parse.provider)
            llm = self.llm.for_document(record.key)
            outcome = extract_with_llm(llm, inputs.template, inputs.rule, markdown, inputs.tables(), sources)
        except LLMQueuedError as error:  # batch mode: graded when the answers arrive
            record.status, record.reason, record.retryable = DocumentStatus.WAITING, error.reason, True
            self._account(record, error.usage)
            return None
        except LLMError as error:
            record.status, record.reason = DocumentStatus.FAILED, f"extract: {error.reason}"
            self._account(record, error.usage)
            return None
        record.fields = {name: result.to_dict() for name, result in outcome.fields.items()}
        record.status, record.completeness = outcome.status, outcome.completeness
        record.violations = [violation.model_dump() for violation in outcome.violations]
        record.strategy, record.chunks = outcome.strategy, outcome.chunks
        record.answer_parts = outcome.answer_parts
        self._account(record, outcome.usage)
        record.unverified_fields = sum(1 for result in outcome.fields.values() if result.needs_review)
        record.reason = outcome.reason
        snapshot, template = inputs.snapshot, inputs.template
        return {
            "schema": "atlas.llm_extraction/1",
            "document": {"key": snapshot.key, "source_path": snapshot.source_path, "sha256": snapshot.sha256},
            "template": {"code": template.code, "version": template.version, "hash": template.content_hash},
            "model": self.llm.config.model,
            "parser": {"fingerprint": inputs.parse.parser, "provider": inputs.parse.provider or "local"},
            "strategy": outcome.strategy,
            "chunks": outcome.chunks,
            "answer_parts": outcome.answer_parts,
            "extraction_version": inputs.version.tag,
            "status": record.status.value,
            "completeness": outcome.completeness,
            "violations": record.violations,
            "fields": record.fields,
        }


MODES: dict[str, Callable[[LLMClient | None], ExtractionMode]] = {
    SkipMode.mode: lambda llm: SkipMode(),
    LLMMode.mode: LLMMode,
}


def mode_for(mode: str, llm: LLMClient | None = None) -> ExtractionMode:
    try:
        return MODES[mode](llm)
    except KeyError:
        raise ValueError(f"no extraction mode for mode {mode!r} (known: {', '.join(MODES)})") from None
