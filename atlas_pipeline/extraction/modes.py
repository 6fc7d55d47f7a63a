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

from atlas_pipeline.core.statuses import DocumentStatus, Stage
from atlas_pipeline.core.templates import Template
from atlas_pipeline.extraction.dual import (
    SECOND,
    extract_twice,
    omissions,
    second_look,
    set_beside,
    take_second_look,
)
from atlas_pipeline.extraction.extractor import extract_with_llm
from atlas_pipeline.extraction.llm.client import LLMClient
from atlas_pipeline.extraction.llm.errors import LLMError, LLMQueuedError
from atlas_pipeline.extraction.llm.usage import Usage
from atlas_pipeline.extraction.prompt import PromptSources
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.skip import skip_wrapper
from atlas_pipeline.extraction.version import ExtractionVersion
from atlas_pipeline.grading.agreement import AGREEMENT_STATES
from atlas_pipeline.knowledge.identifiers import find_identifiers
from atlas_pipeline.parsing import Table
from atlas_pipeline.store.records import NOT_EXTRACTED, ExtractionRecord, ParseRecord, SnapshotRecord


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
        modules = {field.name: module.name for module in inputs.template.modules for field in module.fields}
        # every field empty, for a person to extract by hand on the review page (``ExtractionRecord.values``)
        record.fields = {
            name: {"module": modules.get(name, ""), "value": None, "tier": NOT_EXTRACTED} for name in wrapper["fields"]
        }
        record.reason = "skip mode: text and tables ready for review, no LLM extraction configured"
        return wrapper


class LLMMode(ExtractionMode):
    """Template-driven extraction by an LLM, every value graded against its verbatim quote."""

    mode = "llm"

    def __init__(self, llm: LLMClient | None, second: LLMClient | None = None) -> None:
        self.llm = llm
        self.second = second  # a second, independent extractor (``extraction.dual``), or None

    def _account(self, record: ExtractionRecord, usage: Usage, second: Usage | None = None) -> None:
        """Requests, tokens and money onto the record, both extractors' together and each on its own in
        ``record.extractors`` (no price for a model: the cost stays unknown)."""
        total = Usage()
        total.add(usage)
        if second is not None:
            total.add(second)
        record.llm_calls, record.llm_cache_hits = total.calls, total.cache_hits
        record.prompt_tokens, record.completion_tokens = total.prompt_tokens, total.completion_tokens
        record.cached_tokens = total.cached_tokens
        priced = [client for client in (self.llm, self.second if second is not None else None) if client is not None]
        if priced and all(client.price is not None for client in priced):
            record.cost = round(total.cost + total.reused_cost, 6)
            record.cost_paid = round(total.cost, 6)
            record.cost_currency = priced[0].currency
        if second is not None and self.llm is not None and self.second is not None:
            record.extractors = {
                "A": _usage_of(self.llm, usage),
                SECOND: _usage_of(self.second, second),
            }

    def run(self, inputs: ExtractionInput, record: ExtractionRecord) -> dict[str, Any] | None:
        if self.llm is None:
            record.status, record.reason = DocumentStatus.FAILED, "extract: llm mode but no LLM endpoint configured"
            # the deployment's, not the document's: it runs again once one is set
            record.retryable, record.stopped_at = True, Stage.EXTRACT
            return None
        markdown = inputs.markdown()
        record.identifiers = find_identifiers(markdown)
        record.llm_model = self.llm.config.model
        sources = PromptSources.of_parse(inputs.parse.provider)
        llm = self.llm.for_document(record.key)
        if self.second is not None:
            record.second_model = self.second.config.model
            second = self.second.for_document(record.key)
            first, other = extract_twice(llm, second, inputs.template, inputs.rule, markdown, inputs.tables(), sources)
            if isinstance(first, LLMError) or isinstance(other, LLMError):
                failed = [
                    f"{name}: {answer.reason}"
                    for name, answer in (("model A", first), ("model B", other))
                    if isinstance(answer, LLMError)
                ]
                record.status, record.reason = DocumentStatus.FAILED, "extract: " + "; ".join(failed)
                record.retryable, record.stopped_at = True, Stage.EXTRACT  # the endpoint's failure, not the document's
                self._account(record, first.usage, other.usage)
                return None
            outcome = first
            fields, counts = set_beside(first.fields, other.fields, inputs.template, record.second_model)
            record.agreement = {state: counts.get(state, 0) for state in AGREEMENT_STATES}
            missing = omissions(fields, inputs.template)
            if missing is not None:  # what neither found: one follow-up request names just that
                try:
                    found = second_look(llm, missing, inputs.rule, markdown, inputs.tables(), sources)
                    first.usage.add(found.usage)
                    record.second_look = take_second_look(fields, found.fields)
                except LLMError as error:
                    first.usage.add(error.usage)
                    record.second_look_error = error.reason
            outcome.fields = fields
            self._account(record, first.usage, other.usage)
        else:
            try:
                outcome = extract_with_llm(llm, inputs.template, inputs.rule, markdown, inputs.tables(), sources)
            except LLMQueuedError as error:  # batch mode: graded when the answers arrive
                record.status, record.reason, record.retryable = DocumentStatus.WAITING, error.reason, True
                self._account(record, error.usage)
                return None
            except LLMError as error:  # the endpoint's failure, not the document's: another run may succeed
                record.status, record.reason = DocumentStatus.FAILED, f"extract: {error.reason}"
                record.retryable, record.stopped_at = True, Stage.EXTRACT
                self._account(record, error.usage)
                return None
            self._account(record, outcome.usage)
        record.fields = {name: result.to_dict() for name, result in outcome.fields.items()}
        record.status, record.completeness = outcome.status, outcome.completeness
        record.violations = [violation.model_dump() for violation in outcome.violations]
        record.strategy, record.chunks = outcome.strategy, outcome.chunks
        record.answer_parts = outcome.answer_parts
        record.unverified_fields = sum(1 for result in outcome.fields.values() if result.needs_review)
        record.reason = outcome.reason
        if record.second_model:
            record.reason += "; " + agreement_summary(record.agreement, record.second_model)
            if record.second_look:
                record.reason += f"; {len(record.second_look)} value(s) found on the second look"
            if record.second_look_error:
                record.reason += f"; the second look failed: {record.second_look_error}"
        snapshot, template = inputs.snapshot, inputs.template
        return {
            "schema": "atlas.llm_extraction/1",
            "document": {"key": snapshot.key, "source_path": snapshot.source_path, "sha256": snapshot.sha256},
            "template": {"code": template.code, "version": template.version, "hash": template.content_hash},
            "model": self.llm.config.model,
            "second_model": record.second_model or None,
            "agreement": record.agreement or None,
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


def _usage_of(client: LLMClient, usage: Usage) -> dict[str, Any]:
    """One extractor's requests, tokens and money (None: no price for its model)."""
    cost = round(usage.cost + usage.reused_cost, 6) if client.price is not None else None
    return {
        "model": client.config.model,
        "calls": usage.calls,
        "cache_hits": usage.cache_hits,
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cost": cost,
        "cost_paid": round(usage.cost, 6) if client.price is not None else None,
    }


def agreement_summary(counts: dict[str, int], model: str) -> str:
    """``"with model B (m): 25 agreed, 2 disagreed, 1 found by one only, 4 found by neither"``."""
    words = {"agreed": "agreed", "disagreed": "disagreed", "only_one": "found by one only", "neither": "by neither"}
    return f"with model {SECOND} ({model}): " + ", ".join(f"{counts.get(s, 0)} {words[s]}" for s in AGREEMENT_STATES)


MODES: dict[str, Callable[[LLMClient | None, LLMClient | None], ExtractionMode]] = {
    SkipMode.mode: lambda llm, second: SkipMode(),
    LLMMode.mode: LLMMode,
}


def mode_for(mode: str, llm: LLMClient | None = None, second: LLMClient | None = None) -> ExtractionMode:
    """The extraction mode by name; ``second``: the second, independent extractor of llm mode, if declared."""
    try:
        return MODES[mode](llm, second)
    except KeyError:
        raise ValueError(f"no extraction mode for mode {mode!r} (known: {', '.join(MODES)})") from None
