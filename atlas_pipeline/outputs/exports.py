"""Exports for reviewers and analysts, at stable paths: one row per document, one per field (the final value and
its provenance beside the model's value and evidence), approved values only (one typed column per field) and what
the review decisions teach."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

import polars as pl

from atlas_pipeline.core.redaction import redact, redact_value, secret_values
from atlas_pipeline.core.templates import Template, TemplateField, TemplateModule, entry_field_parts, entry_in_range
from atlas_pipeline.outputs.agreement_report import AGREEMENT_SCHEMA, agreement_rows_of
from atlas_pipeline.outputs.analysis_files import (
    ARMS_SCHEMA,
    arm_rows,
    escalc_frames,
    escalc_rows,
    excluded_frame,
)
from atlas_pipeline.outputs.completion import TaskCompletion
from atlas_pipeline.outputs.export_files import (
    AGREEMENT_STEM,
    APPROVED_STEM,
    ARMS_STEM,
    ESCALC_STEMS,
    EXCLUDED_STEM,
    EXPORT_STEM,
    FIELDS_STEM,
    FOREST_FOLDER,
    FORMATS,
    OUTCOMES_STEM,
    QUALITY_STEM,
    REVMAN_STEMS,
    ROB2,
    STUDIES_STEM,
)
from atlas_pipeline.outputs.forest_plots import forest_plots, forest_svg, risk_of_bias_by_result
from atlas_pipeline.outputs.revman_files import csv_bytes, revman_files
from atlas_pipeline.outputs.rob2_files import REVMAN_COLUMNS as REVMAN_ROB2_COLUMNS
from atlas_pipeline.outputs.rob2_files import ROBVIS_COLUMNS, robvis_rows, summary_svg, traffic_light_svg
from atlas_pipeline.outputs.rob2_files import atlas_frame as atlas_rob2_frame
from atlas_pipeline.outputs.rob2_files import revman_rows as rob2_revman_rows
from atlas_pipeline.outputs.study_labels import study_labels
from atlas_pipeline.outputs.study_parts import Analysis
from atlas_pipeline.outputs.study_report import STUDY_SCHEMA
from atlas_pipeline.outputs.workbook import neutralise_formulas, truncate_for_cells, workbook_bytes
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import ACTIONS, REJECT_REASONS, DecisionRefused, coerce_value
from atlas_pipeline.review.derivations import DERIVED_TIER
from atlas_pipeline.review.final_values import DocumentReview, FinalField
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import export_path
from atlas_pipeline.store.records import ExtractionRecord

LOG = logging.getLogger("atlas.exports")

SCHEMA = {
    "document_key": pl.String,
    "status": pl.String,
    "reason": pl.String,
    "completeness": pl.Float64,
    "source_path": pl.String,
    "source_removed": pl.Boolean,
    "duplicate_of": pl.String,
    "study_id": pl.String,
    "title": pl.String,
    "authors": pl.String,
    "year": pl.Int64,
    "duplicate_evidence": pl.String,
    "media_type": pl.String,
    "pages": pl.Int64,
    "characters": pl.Int64,
    "tables": pl.Int64,
    "ocr_pages": pl.Int64,
    "sha256": pl.String,
    "size_bytes": pl.Int64,
    "mode": pl.String,
    "template": pl.String,
    "template_hash": pl.String,
    "identifiers": pl.String,
    "text_path": pl.String,
    "tables_path": pl.String,
    "extraction_path": pl.String,
    "parser": pl.String,
    "processing_seconds": pl.Float64,
    "llm_model": pl.String,
    "llm_calls": pl.Int64,
    "llm_cache_hits": pl.Int64,
    "prompt_tokens": pl.Int64,
    "completion_tokens": pl.Int64,
    "cached_tokens": pl.Int64,
    "cost": pl.Float64,
    "cost_paid": pl.Float64,
    "cost_currency": pl.String,
    "extracted_at": pl.String,
}


def document_row(state: DocumentState) -> dict:
    snap, parse, ext = state.snapshot, state.parse, state.extraction
    return {
        "document_key": state.key,
        "status": state.status.value,
        "reason": state.reason,
        "completeness": ext.completeness if ext else None,
        "source_path": state.source_path,
        "source_removed": state.source_removed,
        "duplicate_of": state.duplicate_of or None,
        "study_id": state.study_id or state.key,
        "title": parse.title or None if parse else None,
        "authors": "; ".join(parse.authors) or None if parse else None,
        "year": parse.year if parse else None,
        "duplicate_evidence": state.duplicate_evidence or None,
        "media_type": (parse.media_type if parse else None) or (snap.media_type if snap else None),
        "pages": parse.pages if parse and not parse.problem else (snap.pages if snap else None),
        "characters": parse.characters if parse else None,
        "tables": parse.tables if parse else None,
        "ocr_pages": len(parse.ocr_pages) if parse else None,
        "sha256": snap.sha256 if snap else None,
        "size_bytes": snap.size if snap else None,
        "mode": ext.mode if ext else None,
        "template": f"{ext.template_code}@{ext.template_version}" if ext else None,
        "template_hash": ext.template_hash if ext else None,
        "identifiers": "; ".join(f"{k}: {', '.join(v)}" for k, v in ext.identifiers.items()) if ext else None,
        "text_path": parse.text_path or None if parse else None,
        "tables_path": parse.tables_path or None if parse else None,
        "extraction_path": ext.extraction_path or None if ext else None,
        "parser": parse.engine or None if parse else None,
        "processing_seconds": ext.processing_seconds if ext else None,
        "llm_model": ext.llm_model or None if ext else None,
        "llm_calls": ext.llm_calls if ext else None,
        "llm_cache_hits": ext.llm_cache_hits if ext else None,
        "prompt_tokens": ext.prompt_tokens if ext else None,
        "completion_tokens": ext.completion_tokens if ext else None,
        "cached_tokens": ext.cached_tokens if ext else None,
        "cost": ext.cost if ext else None,  # empty: no price for the model (not free)
        "cost_paid": ext.cost_paid if ext else None,
        "cost_currency": ext.cost_currency or None if ext else None,
        "extracted_at": ext.extracted_at if ext else None,
    }


def documents_frame(states: list[DocumentState]) -> pl.DataFrame:
    secrets = secret_values()
    return pl.DataFrame([redact_value(document_row(s), secrets) for s in states], schema=SCHEMA, orient="row")


FIELD_SCHEMA = {
    "document_key": pl.String,
    "study_id": pl.String,
    "status": pl.String,
    "module": pl.String,
    "field": pl.String,
    "final_value": pl.String,  # only what the team's process made final (``review.finality``)
    "decided_value": pl.String,  # what the decision that counts gives, final or not (a person's value so far)
    "provenance": pl.String,
    "final_state": pl.String,  # final | extracting | disputed | awaiting_review | recheck
    "waiting_for": pl.String,  # not final: what it waits for and who can settle it
    "derivation": pl.String,  # a derivation refused or flagged in this field: why
    "decided_by": pl.String,
    "decided_at": pl.String,
    "decision_note": pl.String,
    "corrected_quote": pl.String,
    "corrected_quote_tier": pl.String,
    "corrected_quote_page": pl.Int64,
    "previous_model_value": pl.String,
    "disagreement": pl.String,
    "model_value": pl.String,
    "quote": pl.String,
    "confidence": pl.Float64,
    "tier": pl.String,
    "needs_review": pl.Boolean,
    "page": pl.Int64,
    "start": pl.Int64,
    "end": pl.Int64,
    "table": pl.Int64,
    "table_row": pl.Int64,
    "method": pl.String,
    "note": pl.String,
    "flags": pl.String,
    "agreement": pl.String,  # two extractors: agreed | disagreed | only_one | neither (``extraction.dual``)
    "second_value": pl.String,  # the second extractor's value where the two differ
    "chunk": pl.Int64,
    "sha256": pl.String,
    "extraction_version": pl.String,
    # filled in by a reviewer in the workbook and imported from the review inbox (review.workbook_import)
    "decision": pl.String,
    "reject_reason": pl.String,
    "corrected_value": pl.String,
    "review_note": pl.String,
    "reviewer": pl.String,
}
DECISION_CHOICES = {"decision": list(ACTIONS), "reject_reason": list(REJECT_REASONS)}


def _text(value: object) -> str | None:
    if value is None:
        return None
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def with_added(record: ExtractionRecord, review: DocumentReview | None) -> list[tuple[str, object]]:
    """The extracted fields, then the values a person added (entries of a group the model missed)."""
    extracted = record.values()  # skip mode: every field, empty until a person extracts it
    added = [(name, {"module": final.module}) for name, final in (review.fields.items() if review else [])]
    return [*extracted.items(), *((name, field) for name, field in added if name not in extracted)]


def _second_value(field: dict) -> str | None:
    others = [c for c in field.get("candidates") or [] if c.get("extractor")]
    return _text(others[-1].get("value")) if others else None


def field_rows(states: list[DocumentState]) -> list[dict]:
    """One row per field to review (extracted by the model, or by hand in skip mode), the ones that need a person
    first."""
    rows = [row for state in states for row in document_field_rows(state)]
    return sort_field_rows(rows)


def sort_field_rows(rows: list[dict]) -> list[dict]:
    """Those awaiting a person first, each part in the order it came."""
    return sorted(rows, key=lambda row: row["provenance"] not in AWAITING)


AWAITING = ("awaiting_review", "recheck")


def document_field_rows(state: DocumentState) -> list[dict]:
    """One document's rows of the fields export, in its fields' order."""
    rows: list[dict] = []
    record = state.extraction
    if record is not None and not state.stale:
        review = state.current_review
        for name, field in with_added(record, review):
            final = review.fields.get(name) if review else None
            if final is not None and final.tier == DERIVED_TIER and field.get("value") is None:
                # a derived value stands where the model gave none: decided on as the model's would be
                field = {**field, "value": final.model_value, "quote": final.quote, "tier": DERIVED_TIER}
                field["note"] = f"derived: {(final.derivation or {}).get('formula', '')}"
            rows.append(
                {
                    "document_key": state.key,
                    "study_id": state.study_id or state.key,
                    "status": state.status.value,
                    "module": field.get("module"),
                    "field": name,
                    "final_value": _text(final.final_or_none) if final else None,
                    "decided_value": _text(final.final_value) if final and final.decided else None,
                    "provenance": final.provenance if final else "awaiting_review",
                    "final_state": final.final_state if final else "awaiting_review",
                    "waiting_for": final.waiting or None if final else None,
                    "derivation": _derivation_said(final),
                    "decided_by": final.reviewer or None if final else None,
                    "decided_at": final.decided_at or None if final else None,
                    "decision_note": "; ".join(filter(None, [final.reject_reason, final.note])) or None
                    if final
                    else None,
                    "corrected_quote": final.corrected_quote if final else None,
                    "corrected_quote_tier": final.quote_check.tier if final and final.quote_check else None,
                    "corrected_quote_page": final.quote_check.page if final and final.quote_check else None,
                    "previous_model_value": _text(final.previous_model_value) if final else None,
                    "disagreement": "; ".join(f"{who}: {what}" for who, what in final.disagreement.items()) or None
                    if final
                    else None,
                    "model_value": _text(field.get("value")),
                    "quote": field.get("quote"),
                    "confidence": field.get("confidence"),
                    "tier": field.get("tier"),
                    # waits for a person: the count of the summary, the review page and the Team page
                    "needs_review": final.waits_for_person or not final.is_final if final else True,
                    "page": field.get("page"),
                    "start": field.get("start"),
                    "end": field.get("end"),
                    "table": field.get("table"),
                    "table_row": field.get("row"),
                    "method": field.get("method"),
                    "note": field.get("note") or None,
                    "flags": "; ".join(field.get("flags") or []) or None,
                    "agreement": field.get("agreement") or None,
                    "second_value": _second_value(field),
                    "chunk": field.get("chunk"),
                    "sha256": record.sha256,
                    "extraction_version": record.extraction_version,
                    "decision": None,
                    "reject_reason": None,
                    "corrected_value": None,
                    "review_note": None,
                    "reviewer": None,
                }
            )
        rows += _unmade_rows(state, record, review)
    return rows


def _unmade_rows(state: DocumentState, record: ExtractionRecord, review: DocumentReview | None) -> list[dict]:
    """A row for each derivation refused or flagged in a field the document does not have (an entry a person added
    without it): no value, and why none was derived."""
    rows = []
    for name, derivation in (review.unmade_derivations if review else {}).items():
        row: dict[str, object] = dict.fromkeys(FIELD_SCHEMA)
        row |= {
            "document_key": state.key,
            "study_id": state.study_id or state.key,
            "status": state.status.value,
            "module": derivation.get("module"),
            "field": name,
            "provenance": "not_derived",  # no value: nothing to decide but what the derivation waits for
            "final_state": "awaiting_review",
            "derivation": _derivation_said(derivation),
            "needs_review": False,
            "sha256": record.sha256,
            "extraction_version": record.extraction_version,
        }
        rows.append(row)
    return rows


def _derivation_said(final: FinalField | dict | None) -> str | None:
    """A derivation refused or flagged in the field: ``refused (sd_from_p): p_value_comparison: a threshold …``."""
    derivation = (final if isinstance(final, dict) else final.derivation if final is not None else None) or {}
    if derivation.get("state") not in ("refused", "flagged"):
        return None
    return f"{derivation['state']} ({derivation.get('formula', '')}): {derivation.get('reason', '')}"


def fields_frame(states: list[DocumentState]) -> pl.DataFrame:
    secrets = secret_values()
    rows = [redact_value(row, secrets) for row in field_rows(states)]
    return pl.DataFrame(rows, schema=FIELD_SCHEMA, orient="row")


def template_order(names: list[str], template: Template | None) -> list[str]:
    """Field names in the template's order: its single fields, then each repeating group's entries, entry by entry,
    each entry's fields in the group's order (names the template does not know last, as they came)."""
    if template is None:
        return list(dict.fromkeys(names))
    single = {field.name: index for index, field in enumerate(template.fields)}
    groups = {group.name: (index, [f.name for f in group.fields]) for index, group in enumerate(template.groups)}

    def key(name: str) -> tuple:
        group, entry, bare = entry_field_parts(name)
        if entry is None:
            return (0, single.get(name, len(single)), 0, 0)
        index, members = groups.get(group, (len(groups), []))
        return (1, index, entry, members.index(bare) if bare in members else len(members))

    return sorted(dict.fromkeys(names), key=key)


def extractions_frame(fields: pl.DataFrame, template: Template | None = None) -> pl.DataFrame:
    """Wide: one row per document and, per field (template order), its final value — accepted by the team's policy,
    approved, corrected or added; empty while nobody accepted it —, the model's value (``__model``) and its tier."""
    if fields.is_empty():
        return pl.DataFrame(schema={"document_key": pl.String})
    order = template_order(fields["field"].to_list(), template)
    wide = None
    for source, suffix in (("final_value", ""), ("model_value", "__model"), ("tier", "__tier")):
        part = fields.pivot(on="field", index="document_key", values=source, aggregate_function="first")
        part = part.rename({name: f"{name}{suffix}" for name in order if name in part.columns})
        wide = part if wide is None else wide.join(part, on="document_key", how="left")
    columns = ["document_key"] + [f"{name}{suffix}" for name in order for suffix in ("", "__model", "__tier")]
    return wide.select(columns)


_POLARS_TYPES = {"integer": pl.Int64, "number": pl.Float64, "boolean": pl.Boolean}


def approved_frame(states: list[DocumentState], template: Template | None) -> pl.DataFrame:
    """Analysis-ready: one row per approved document, one column per template field holding its final value, typed
    as the template says (integer, number, boolean; lists as JSON text; a rejected field is empty)."""
    rows = [row for state in states for row in approved_rows(state, template)]
    return pl.DataFrame(rows, schema=approved_schema(template), orient="row")


def approved_schema(template: Template | None) -> dict[str, pl.DataType]:
    schema: dict[str, pl.DataType] = {"document_key": pl.String, "sha256": pl.String, "approved_at": pl.String}
    for field in template.fields if template else []:
        schema[field.name] = _POLARS_TYPES.get(field.type, pl.String)
    return schema


def approved_rows(state: DocumentState, template: Template | None) -> list[dict]:
    """One document's row of the approved export (none unless it is approved)."""
    review = state.current_review
    if review is None or not review.approved:
        return []
    row: dict = {"document_key": state.key, "sha256": review.sha256, "approved_at": review.reviewed_at}
    for field in template.fields if template else []:
        final = review.fields.get(field.name)
        row[field.name] = _typed(final.final_or_none if final else None, field)
    return [row]


def _typed(value: object, field: TemplateField) -> object:
    """A final value in its column's type; one that does not fit (a model's "yes" in a boolean field, say) is
    written as text in a typed column's place would be wrong, so it is left empty there — the fields export keeps
    it as it is."""
    if value is None:
        return None
    if field.type not in _POLARS_TYPES:
        return _text(value)
    try:
        typed = coerce_value(value, field)
    except DecisionRefused:
        return None
    return None if field.type in ("integer", "number") and isinstance(typed, str) else typed  # "<0.001": text


def group_frame(states: list[DocumentState], group: TemplateModule) -> pl.DataFrame:
    """One row per document × entry of a repeating group (``outcomes``: one per outcome × comparison × time point),
    columns named as a meta-analyst expects (``events_intervention``, ``mean_comparator``, …). Each field's column
    holds only a *final* value — the model's, when the team's policy accepts its tier or a reviewer approved it, a
    reviewer's correction or addition —, and nothing while nobody has accepted it or after a reviewer rejected it: a
    meta-analysis reading these columns never meets a number nobody stands behind. Beside it ``<field>__model`` (the
    model's value, accepted or not), ``__provenance`` (who stands behind the final value), ``__tier``, ``__quote``
    and ``__page``. An entry a reviewer rejected field by field (deleted) is left out; one a reviewer added is in."""
    rows = [row for state in states for row in group_rows(state, group)]
    return pl.DataFrame(rows, schema=group_schema(group), orient="row")


def group_schema(group: TemplateModule) -> dict[str, pl.DataType]:
    schema: dict[str, pl.DataType] = {"document_key": pl.String, "status": pl.String, "entry": pl.Int64}
    for field in group.fields:
        schema[field.name] = _POLARS_TYPES.get(field.type, pl.String)
        schema[f"{field.name}__model"] = _POLARS_TYPES.get(field.type, pl.String)
        for suffix in ("provenance", "tier", "quote"):
            schema[f"{field.name}__{suffix}"] = pl.String
        schema[f"{field.name}__page"] = pl.Int64
    return schema


def group_rows(state: DocumentState, group: TemplateModule) -> list[dict]:
    """One document's rows of a repeating group's export (``group_frame``), entry by entry."""
    record = state.extraction
    if record is None or state.stale:
        return []
    rows: dict[int, dict] = {}
    review = state.current_review
    for name, extracted in with_added(record, review):
        group_name, entry, bare = entry_field_parts(name)
        field = group.field_definition(bare) if group_name == group.name else None
        if field is None or not entry_in_range(entry, group.max_entries) or not isinstance(extracted, dict):
            continue  # (an entry number no group holds came in by hand: no decision path lets one in)
        row = rows.setdefault(entry, {"document_key": state.key, "status": state.status.value, "entry": entry})
        final = review.fields.get(name) if review else None
        row[bare] = _typed(final.final_or_none, field) if final is not None else None
        row[f"{bare}__model"] = _typed(extracted.get("value"), field)
        row[f"{bare}__provenance"] = final.provenance if final else "awaiting_review"
        row[f"{bare}__tier"] = extracted.get("tier")
        row[f"{bare}__quote"] = (final.corrected_quote if final else None) or extracted.get("quote")
        row[f"{bare}__page"] = extracted.get("page")
    return [row for row in rows.values() if not _deleted(row, group)]  # an entry a person rejected as a whole


def _deleted(row: dict, group: TemplateModule) -> bool:
    provenances = [row.get(f"{field.name}__provenance") for field in group.fields]
    return all(provenance == "rejected" for provenance in provenances if provenance is not None)


QUALITY_SCHEMA = {
    "field": pl.String,
    "tier": pl.String,
    "reviewed": pl.Int64,
    "approved": pl.Int64,
    "corrected": pl.Int64,
    "rejected": pl.Int64,
    "kept_rate": pl.Float64,
}


def quality_frame(completion: TaskCompletion) -> pl.DataFrame:
    return pl.DataFrame([row.model_dump() for row in completion.review_quality], schema=QUALITY_SCHEMA, orient="row")


def completion_frame(completion: TaskCompletion) -> pl.DataFrame:
    """Task completion as figure rows: counts as whole numbers, rates as shares, times in seconds."""
    rows: list[dict] = [{"figure": f"count_{status}", "count": count} for status, count in completion.counts.items()]
    rows += [{"figure": name, "count": getattr(completion, name)} for name in ("total", "terminal", "open")]
    rows += [
        {"figure": name, "rate": getattr(completion, name)}
        for name in ("completion_rate", "partial_rate", "failure_rate", "skipped_rate")
    ]
    rows += [
        {"figure": name, "count": getattr(completion, name)}
        for name in (
            "llm_calls",
            "llm_cache_hits",
            "prompt_tokens",
            "completion_tokens",
            "fields_needing_review",
            "documents_approved",
            "documents_awaiting_review",
            "decisions",
            "disagreements",
        )
    ]
    rows += [{"figure": f"fields_{name}", "count": count} for name, count in completion.fields_by_provenance.items()]
    if completion.average_processing_seconds is not None:
        rows.append({"figure": "average_processing_seconds", "seconds": completion.average_processing_seconds})
    currency = completion.llm_cost_currency or None
    rows.append({"figure": "llm_cost", "amount": completion.llm_cost, "currency": currency})
    if completion.llm_cost_per_value is not None:
        rows.append({"figure": "llm_cost_per_value", "amount": completion.llm_cost_per_value, "currency": currency})
    rows.append({"figure": "documents_without_price", "count": completion.documents_without_price})
    schema = {
        "figure": pl.String,
        "count": pl.Int64,
        "rate": pl.Float64,
        "seconds": pl.Float64,
        "amount": pl.Float64,
        "currency": pl.String,
    }
    return pl.DataFrame(rows, schema=schema)


def _encode(frame: pl.DataFrame, fmt: str, full_in: str = "") -> bytes:
    buffer = io.BytesIO()
    if fmt == "csv":  # long values cut visibly (csv readers have field limits), formulas opened as text
        neutralise_formulas(truncate_for_cells(frame, full_in)).write_csv(buffer)
    elif fmt == "parquet":
        frame.write_parquet(buffer)
    elif fmt == "jsonl":
        frame.write_ndjson(buffer)
    else:
        raise ValueError(f"unknown export format {fmt!r}")
    return buffer.getvalue()


def _no_missing_sheet(problems: list[str]) -> bytes:
    """The workbook is written whole or not at all: one whose sheet is missing would replace the team's good one."""
    if problems:
        raise ValueError(f"a sheet could not be made ({problems[0]})")
    return b""


class ExportsWritten(dict):
    """What ``write_exports`` wrote (name → location), and ``not_written``: each file that could not be, with why —
    every other file was written all the same."""

    def __init__(self) -> None:
        super().__init__()
        self.not_written: dict[str, str] = {}
        self.cut: dict[str, tuple[int, int]] = {}  # a workbook sheet cut at the team's cap: (rows written, rows)


@dataclass
class ExportTables:
    """The per-document tables of the exports (``export_tables``, or assembled from each document's part kept
    between refreshes: ``outputs.document_products``), and what they could not hold."""

    documents: pl.DataFrame
    fields: pl.DataFrame
    approved: pl.DataFrame
    groups: dict[str, pl.DataFrame]
    skip_mode: bool
    not_made: dict[str, str] = dc_field(default_factory=dict)  # table → why it could not be made whole


def export_tables(states: list[DocumentState], template: Template | None) -> ExportTables:
    """The per-document tables made from the states at once."""
    secrets = secret_values()
    not_made: dict[str, str] = {}

    def made(table: str, build: Callable[[], pl.DataFrame], empty: Mapping[str, Any]) -> pl.DataFrame:
        try:
            return build()
        except Exception as error:
            not_made[table] = redact(f"{type(error).__name__}: {error}")[:500]
            return pl.DataFrame(schema=dict(empty))

    def clean(frame: pl.DataFrame) -> pl.DataFrame:
        return pl.DataFrame([redact_value(r, secrets) for r in frame.rows(named=True)], schema=frame.schema)

    return ExportTables(
        documents=made("documents", lambda: documents_frame(states), SCHEMA),
        fields=made("fields", lambda: fields_frame(states), FIELD_SCHEMA),
        approved=made("approved", lambda: clean(approved_frame(states, template)), {"document_key": pl.String}),
        groups={
            group.name: made(f"group__{group.name}", lambda group=group: clean(group_frame(states, group)), {})
            for group in (template.groups if template else [])
        },
        skip_mode=bool(states) and all(s.extraction is None or s.extraction.mode == "skip" for s in states),
        not_made=not_made,
    )


def write_exports(
    store: Store,
    tables: ExportTables,
    analysis: Analysis,
    completion: TaskCompletion,
    template: Template | None = None,
    sheet_rows: int | None = None,
) -> ExportsWritten:
    """Write every export under stable names in ``store``; returns name → location (and the files not written).
    ``tables``: the per-document tables; ``analysis``: the studies, their entries and the agreement report, which the
    studies export, the analysis files and the agreement report are written from (``outputs.study_parts``);
    ``sheet_rows``: the most rows the
    workbook writes in a sheet (``written.cut`` names each sheet cut; the other formats hold every row).

    ``atlas_documents.*``: one row per document; ``atlas_fields.*``: one row per extracted field — the final value,
    its provenance, who decided and when, beside the model's value, quote, confidence, tier, evidence location (page,
    span in document.md or table and row) and consistency flags; fields awaiting a person first. ``atlas_approved.*``:
    approved documents only, one typed column per field. ``atlas_review_quality.csv``: how often reviewers kept the
    model's value, per field and tier. The xlsx holds them all (its ``fields`` sheet with decision columns to fill
    in and drop into the review inbox) plus a wide ``extractions`` sheet. ``atlas_studies.*``: per study (the
    reports of one trial) and field, the value reconciled across its reports (given each study's choices
    between its reports' values). ``atlas_arms.*``, ``atlas_escalc_*.csv`` and ``forest_plots/``: the
    meta-analysis files (``outputs.analysis_files``); ``atlas_revman_*.csv``: RevMan Web's study-centric import
    (``outputs.revman_files``). A document removed from the knowledge base stays, marked ``source_removed``, in the
    document and field exports, and leaves the studies and every analysis file.

    Each file is made and written on its own: one that cannot be (a value no writer holds, a failing store) is named
    in ``not_written`` with the reason, and every other file is still written. A typed column leaves out a value that
    does not fit it (the fields export keeps it as text).
    """
    secrets = secret_values()
    written = ExportsWritten()

    def put(name: str, path: str, make: Callable[[], bytes]) -> None:
        try:
            written[name] = store.write_bytes(path, make())
        except Exception as error:  # one file that cannot be written never stops the others
            written.not_written[path] = redact(f"{type(error).__name__}: {error}")[:500]
            LOG.error("export %s not written: %s", path, written.not_written[path])

    def clean(frame: pl.DataFrame) -> pl.DataFrame:
        return pl.DataFrame([redact_value(r, secrets) for r in frame.rows(named=True)], schema=frame.schema)

    def made(stem: str, build: Callable[[], pl.DataFrame], empty: Mapping[str, Any]) -> pl.DataFrame:
        """A table, or — when it cannot be made — an empty one, its files named as not written with the reason."""
        try:
            return build()
        except Exception as error:
            reason = redact(f"{type(error).__name__}: {error}")[:500]
            LOG.error("export %s not made: %s", stem, reason)
            for fmt in FORMATS[1:]:
                written.not_written[export_path(stem, fmt)] = reason
            return pl.DataFrame(schema=dict(empty))

    def lenient(paths: list[str], build: Callable[[], Any], default: Any) -> Any:
        """What ``build`` makes, or — when it fails — ``default``, every file in ``paths`` named as not written."""
        try:
            return build()
        except Exception as error:
            reason = redact(f"{type(error).__name__}: {error}")[:500]
            LOG.error("exports %s not made: %s", ", ".join(paths), reason)
            written.not_written.update(dict.fromkeys(paths, reason))
            return default

    analysed = [export_path(stem, "csv") for stem in (*ESCALC_STEMS.values(), *REVMAN_STEMS.values(), EXCLUDED_STEM)]
    analysed += [export_path(ARMS_STEM, fmt) for fmt in FORMATS[1:]]

    def table(stem: str, name: str, frame: pl.DataFrame) -> pl.DataFrame:
        """A per-document table, or — when a document's rows could not go in it — its files named as not written."""
        if name in tables.not_made:
            LOG.error("export %s not made: %s", stem, tables.not_made[name])
            for fmt in FORMATS[1:]:
                written.not_written[export_path(stem, fmt)] = tables.not_made[name]
        return frame

    not_made = tables.not_made
    documents = table(EXPORT_STEM, "documents", tables.documents)
    fields = table(FIELDS_STEM, "fields", tables.fields)
    approved = table(APPROVED_STEM, "approved", tables.approved)
    quality = made(QUALITY_STEM, lambda: quality_frame(completion), QUALITY_SCHEMA)
    groups = {name: table(f"atlas_{name}", f"group__{name}", frame) for name, frame in tables.groups.items()}
    skip_mode = tables.skip_mode
    studied = [export_path(STUDIES_STEM, fmt) for fmt in FORMATS[1:]]
    if analysis.error:  # the studies could not be made: none of the files made from them is written
        LOG.error("exports %s not made: %s", ", ".join(studied + analysed), analysis.error)
        written.not_written.update(dict.fromkeys(studied + analysed, analysis.error[:500]))
    found = analysis.studies
    study_table = made(STUDIES_STEM, lambda: clean(pl.DataFrame(analysis.study_rows, schema=STUDY_SCHEMA)), {})
    sheets_missing = sorted({reason for path, reason in written.not_written.items() if not path.startswith("forest")})
    put(
        "xlsx",
        export_path(EXPORT_STEM, "xlsx"),
        lambda: (
            _no_missing_sheet(sheets_missing)
            or workbook_bytes(
                documents,
                extractions_frame(fields, template),
                fields,
                completion_frame(completion),
                approved=approved,
                quality=quality,
                groups=groups,
                choices=DECISION_CHOICES,
                skip_mode=skip_mode,
                studies=study_table,
                max_rows=sheet_rows,
                cut=written.cut,
            )
        ),
    )
    outcomes = groups.get("outcomes", pl.DataFrame(schema={"document_key": pl.String, "entry": pl.Int64}))
    if analysis.entries_error and not analysis.error:  # the studies' entries could not be made: the files made
        LOG.error("exports %s not made: %s", ", ".join(analysed), analysis.entries_error)  # from them are not written
        written.not_written.update(dict.fromkeys(analysed, analysis.entries_error[:500]))
    entries, excluded = analysis.entries, analysis.excluded
    arms_table = made(ARMS_STEM, lambda: clean(pl.DataFrame(arm_rows(entries), schema=ARMS_SCHEMA)), ARMS_SCHEMA)
    tables = (
        ("", EXPORT_STEM, documents),
        ("fields_", FIELDS_STEM, fields),
        ("approved_", APPROVED_STEM, approved),
        ("outcomes_", OUTCOMES_STEM, outcomes),
        ("studies_", STUDIES_STEM, study_table),
        ("arms_", ARMS_STEM, arms_table),
    )
    for label, stem, frame in tables:
        for fmt in FORMATS[1:]:
            if export_path(stem, fmt) in written.not_written:
                continue
            full = export_path(stem, "parquet")
            put(
                f"{label}{fmt}",
                export_path(stem, fmt),
                lambda frame=frame, fmt=fmt, full=full: _encode(frame, fmt, full),
            )
    escalc = lenient(analysed, lambda: escalc_rows(entries), {})
    for kind, frame in lenient(analysed, lambda: escalc_frames(escalc), {}).items():
        put(
            f"escalc_{kind}_csv",
            export_path(ESCALC_STEMS[kind], "csv"),
            lambda frame=frame: _encode(clean(frame), "csv"),
        )
    put(
        "analysis_excluded_csv",
        export_path(EXCLUDED_STEM, "csv"),
        lambda: _encode(clean(excluded_frame(excluded)), "csv"),
    )
    plots = lenient([FOREST_FOLDER], lambda: forest_plots(escalc, study_labels(found)), None)
    judged = risk_of_bias_by_result(analysis.rob2)
    for plot in plots or []:
        put(
            f"forest_{plot.slug}",
            f"{FOREST_FOLDER}/{plot.slug}.svg",
            lambda plot=plot: forest_svg(plot, rob2=judged).encode(),
        )
    try:
        revman = revman_files(found, template, entries, escalc, secrets)
    except Exception as error:  # RevMan's files are one piece: named as not written, the others still are
        revman = {}
        for stem in REVMAN_STEMS.values():
            written.not_written[export_path(stem, "csv")] = redact(f"{type(error).__name__}: {error}")[:500]
    for stem, content in revman.items():
        put(stem.removeprefix("atlas_"), export_path(stem, "csv"), lambda content=content: content)
    if template is not None and template.rob2 is not None:
        _write_rob2(analysis, study_labels(found), secrets, put, lenient, written)
    for stale in set(store.files(FOREST_FOLDER)) - {f"{FOREST_FOLDER}/{plot.slug}.svg" for plot in plots or []}:
        if plots is not None:  # plots that could not be made this time: the last ones stay, named as stale above
            store.delete(stale)  # an outcome no longer in the final values has no plot
    if export_path(QUALITY_STEM, "csv") not in written.not_written:
        put("review_quality_csv", export_path(QUALITY_STEM, "csv"), lambda: _encode(quality, "csv"))

    def agreement() -> bytes:
        rows = agreement_rows_of(analysis.agreement, template) if template else []
        return _encode(pl.DataFrame(rows, schema=AGREEMENT_SCHEMA), "csv")

    if "agreement" in not_made:
        written.not_written[export_path(AGREEMENT_STEM, "csv")] = not_made["agreement"]
    else:
        put("agreement_csv", export_path(AGREEMENT_STEM, "csv"), agreement)
    return written


def _write_rob2(
    analysis: Analysis,
    labels: Mapping[str, str],
    secrets: list[str],
    put: Callable[[str, str, Callable[[], bytes]], None],
    lenient: Callable[[list[str], Callable[[], Any], Any], Any],
    written: ExportsWritten,
) -> None:
    """The RoB 2 files (``outputs.rob2_files``), from every study's assessments — none when one study's could not be
    made (named as not written, with the reason: a partial file would read as the whole review)."""
    paths = [file.path() for file in ROB2.values()]
    why = analysis.error or analysis.rob2_error
    if why:
        LOG.error("exports %s not made: %s", ", ".join(paths), why)
        written.not_written.update(dict.fromkeys(paths, why[:500]))
        return
    assessments = analysis.rob2
    table = lenient([ROB2["table"].path()], lambda: atlas_rob2_frame(assessments, labels), None)
    if table is not None:
        clean = pl.DataFrame([redact_value(r, secrets) for r in table.rows(named=True)], schema=table.schema)
        put("rob2_csv", ROB2["table"].path(), lambda: _encode(clean, "csv"))
    put(
        "revman_rob2_csv",
        ROB2["revman"].path(),
        lambda: csv_bytes(REVMAN_ROB2_COLUMNS, rob2_revman_rows(assessments, labels), secrets),
    )
    put(
        "robvis_rob2_csv",
        ROB2["robvis"].path(),
        lambda: csv_bytes(ROBVIS_COLUMNS, robvis_rows(assessments, labels), secrets),
    )
    put("rob2_traffic_light", ROB2["traffic_light"].path(), lambda: traffic_light_svg(assessments, labels).encode())
    put("rob2_summary", ROB2["summary"].path(), lambda: summary_svg(assessments).encode())
