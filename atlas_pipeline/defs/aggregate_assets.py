"""Aggregates over every known document: task completion and the exports. They keep themselves current."""

import time

import dagster as dg

from atlas_pipeline.core.redaction import redact
from atlas_pipeline.core.templates import Template
from atlas_pipeline.defs.aggregate_inputs import inputs_of_run
from atlas_pipeline.defs.asset_names import (
    EVALUATION_ASSET_NAME,
    FILES_NOT_WRITTEN,
    FINAL_VALUES_POLICY,
    STATES_READ_AT,
)
from atlas_pipeline.defs.document_states import known_keys
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.knowledge.catalog import load_catalog
from atlas_pipeline.knowledge.duplicate_records import compute_groups, load_fingerprint
from atlas_pipeline.knowledge.duplicates import Member
from atlas_pipeline.outputs.agreement_report import agreement_markdown, agreement_rows_of
from atlas_pipeline.outputs.analysis_files import excluded_markdown, read_excluded
from atlas_pipeline.outputs.completion import quality_table
from atlas_pipeline.outputs.evaluation import evaluate_gold
from atlas_pipeline.outputs.export_files import EVALUATION_STEM, EXCLUDED
from atlas_pipeline.outputs.exports import write_exports
from atlas_pipeline.outputs.study_parts import Analysis
from atlas_pipeline.review.study_values import load_choices
from atlas_pipeline.search.refresh import refresh_candidates
from atlas_pipeline.store.layout import COMPLETION_PATH, export_path
from atlas_pipeline.store.records import ParseRecord, read_record

GROUP = "aggregates"

# Eager automation never fires while any upstream partition is missing or failed; this one fires after any
# document lands (or fails after its snapshot) once nothing upstream is still running.
AGGREGATE_CONDITION = (
    dg.AutomationCondition.any_deps_updated().since_last_handled()
    & ~dg.AutomationCondition.any_deps_in_progress()
    & ~dg.AutomationCondition.in_progress()
).with_label("refresh after documents land")


@dg.asset(
    group_name=GROUP,
    deps=["document_text"],
    automation_condition=AGGREGATE_CONDITION,
    kinds={"python"},
    description="Documents that are one work under different bytes (the PDF and the JATS XML of an article, a "
    "re-downloaded PDF, a preprint and its publication), from their identifiers and text (MinHash over shingles): "
    "one canonical document per group, the others marked duplicate_of with the evidence. Fingerprints are cached "
    "per text, so a new document costs one fingerprint. `atlas duplicates split KEY` undoes a wrong grouping.",
)
def duplicate_groups(context: dg.AssetExecutionContext, atlas: AtlasResource) -> dg.MaterializeResult:
    read_at = time.time()
    store = atlas.deployment.store()
    catalog = load_catalog(store)
    members = []
    for key in known_keys(context.instance, catalog):  # the parses alone: no document's status is needed here
        entry = catalog.entries.get(key)
        parse = read_record(store, key, "parse", ParseRecord)
        if (entry and entry.removed) or parse is None or parse.problem or not parse.text_path:
            continue
        fingerprint = load_fingerprint(store, parse.sha256, parse.parser, parse.text_path)
        if fingerprint is not None:
            members.append(Member(key, fingerprint, parse.media_type or "", entry.first_seen if entry else ""))
    result = compute_groups(store, members)
    for group in result.groups:
        context.log.info(
            f"one work: {group['canonical']} (canonical) + "
            + ", ".join(f"{key} ({why})" for key, why in group["evidence"].items())
        )
    table = "\n".join(
        f"| {key} | {canonical} | {why} |" for key, (canonical, why) in sorted(result.duplicate_of.items())
    )
    return dg.MaterializeResult(
        metadata={
            STATES_READ_AT: read_at,
            "documents": result.documents,
            "groups": len(result.groups),
            "duplicates": len(result.duplicate_of),
            "duplicate_of": dg.MetadataValue.md(
                "| document | duplicate of | evidence |\n|---|---|---|\n" + table if table else "no duplicates"
            ),
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=["document_snapshot", "document_extraction", "document_review", duplicate_groups],
    automation_condition=AGGREGATE_CONDITION,
    kinds={"python"},
    description="Status counts over ALL known documents (pending and failed included), rates, average time; "
    "documents approved and awaiting review, fields by provenance, and how often reviewers kept the model's value "
    "per field and tier.",
)
def task_completion(context: dg.AssetExecutionContext, atlas: AtlasResource) -> dg.MaterializeResult:
    inputs = inputs_of_run(context, atlas.deployment)
    read_at = inputs.read_at
    store = atlas.deployment.store()
    completion = inputs.completion()
    store.write_json(COMPLETION_PATH, completion.model_dump(mode="json"))
    for line in completion.lines():
        context.log.info(line)
    return dg.MaterializeResult(
        metadata={
            STATES_READ_AT: read_at,
            FINAL_VALUES_POLICY: atlas.deployment.final_values_policy(),
            "total": completion.total,
            **{f"count_{status}": count for status, count in completion.counts.items()},
            "completion_rate": completion.completion_rate,
            "failure_rate": completion.failure_rate,
            "average_processing_seconds": completion.average_processing_seconds or 0.0,
            "removed_sources": completion.removed_sources,
            "llm_calls": completion.llm_calls,
            "prompt_tokens": completion.prompt_tokens,
            "completion_tokens": completion.completion_tokens,
            "llm_cost": completion.cost_line(),
            "documents_approved": completion.documents_approved,
            "documents_awaiting_review": completion.documents_awaiting_review,
            "decisions": completion.decisions,
            **{f"fields_{name}": count for name, count in completion.fields_by_provenance.items()},
            "review_quality": dg.MetadataValue.md(quality_table(completion.review_quality)),
            "summary": dg.MetadataValue.md("\n".join(f"- {line.strip()}" for line in completion.lines())),
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=["document_extraction", "document_review", task_completion, duplicate_groups],
    automation_condition=AGGREGATE_CONDITION,
    kinds={"xlsx", "csv", "parquet"},
    description="xlsx / csv / parquet / jsonl exports at stable paths: one row per document, one per field (final "
    "value and provenance beside the model's value, quote, tier and evidence location), approved values only (one "
    "typed column per field), what the decisions teach, and the meta-analysis files from final values: the arm "
    "table, metafor's escalc input, RevMan Web's study-centric import and a forest plot per outcome.",
)
def extraction_exports(context: dg.AssetExecutionContext, atlas: AtlasResource) -> dg.MaterializeResult:
    inputs = inputs_of_run(context, atlas.deployment)
    read_at = inputs.read_at
    template = atlas.deployment.load_template()
    store = atlas.deployment.store()
    policy = atlas.deployment.final_values_policy()
    analysis = inputs.analysis(template, load_choices(store))
    exports = atlas.deployment.exports_store()
    sheet_rows = atlas.deployment.review_policy().workbook_sheet_rows
    paths = write_exports(exports, inputs.tables, analysis, inputs.completion(), template, sheet_rows)
    excluded = read_excluded(atlas.deployment.exports_store())
    if excluded:
        context.log.warning(f"{len(excluded)} value(s) left out of the analysis files: see {EXCLUDED.path()}")
    for path, reason in paths.not_written.items():
        context.log.error(f"{path} not written: {reason}")
    for sheet, (shown, rows) in paths.cut.items():
        context.log.warning(
            f"workbook sheet {sheet}: its first {shown:,} of {rows:,} rows (ATLAS_REVIEW_WORKBOOK_SHEET_ROWS); "
            "the parquet, csv and jsonl exports hold every row"
        )
    return dg.MaterializeResult(
        metadata={
            STATES_READ_AT: read_at,
            FINAL_VALUES_POLICY: policy,
            "documents": len(inputs.order),
            "documents_read_again": inputs.made,
            "studies_made_again": inputs.studies_made,
            "analysis_values_left_out": len(excluded),
            FILES_NOT_WRITTEN: dg.MetadataValue.json(paths.not_written),
            "workbook_sheets_cut": dg.MetadataValue.json({sheet: list(cut) for sheet, cut in paths.cut.items()}),
            "left_out": dg.MetadataValue.md(excluded_markdown(excluded)),
            "agreement": dg.MetadataValue.md(_agreement(analysis, template)),
            **{fmt: dg.MetadataValue.path(path) for fmt, path in paths.items()},
        }
    )


@dg.asset(
    group_name=GROUP,
    deps=["document_text", "document_extraction", "document_review", duplicate_groups],
    automation_condition=AGGREGATE_CONDITION,
    kinds={"sqlite", "postgres"},
    description="Full-text index of every document's text, tables and extracted values (final values where people "
    "decided), with status, source and title: SQLite FTS5 on the embedded default, PostgreSQL full-text search "
    "with a PostgreSQL instance (ATLAS_SEARCH_BACKEND). Incremental: only documents whose text, extraction, review "
    "or status changed are re-indexed; removed sources are dropped. `atlas search QUERY`, or the review page.",
)
def search_index(context: dg.AssetExecutionContext, atlas: AtlasResource) -> dg.MaterializeResult:
    inputs = inputs_of_run(context, atlas.deployment)
    read_at = inputs.read_at
    with atlas.deployment.search_index(context.instance) as index:
        report = refresh_candidates(index, atlas.deployment.store(), inputs.search_candidates(), inputs.states)
    context.log.info(report.summary())
    return dg.MaterializeResult(
        metadata={
            STATES_READ_AT: read_at,
            "backend": index.backend,
            "location": index.location,
            "documents": report.indexed,
            "updated": report.updated,
            "removed": report.removed,
            "unchanged": report.unchanged,
        }
    )


def _agreement(analysis: Analysis, template: Template) -> str:
    try:
        return agreement_markdown(agreement_rows_of(analysis.agreement, template))
    except Exception as error:  # named in the exports' files not written too
        return f"the agreement report could not be made: {redact(f'{type(error).__name__}: {error}')}"


AGGREGATE_ASSETS = [duplicate_groups, task_completion, extraction_exports, search_index]


def build_evaluation_asset(gold: str, tolerance: float) -> dg.AssetsDefinition:
    """The extraction's accuracy against the team's gold file (``ATLAS_GOLD``), refreshed with the aggregates."""

    @dg.asset(
        name=EVALUATION_ASSET_NAME,
        group_name=GROUP,
        deps=["document_extraction", "document_review"],
        automation_condition=AGGREGATE_CONDITION,
        kinds={"python"},
        description="Accuracy, recall and precision of `verified` per field against the gold file (ATLAS_GOLD): a "
        "report a team can cite (atlas_evaluation.md in the exports) and the same table here.",
    )
    def extraction_evaluation(context: dg.AssetExecutionContext, atlas: AtlasResource) -> dg.MaterializeResult:
        deployment = atlas.deployment
        report = evaluate_gold(
            deployment.store(),
            deployment.load_template(),
            gold,
            tolerance,
            accepted_tiers=deployment.accepted_tiers(),
            derivations=deployment.derivations(),
        )
        path = atlas.deployment.exports_store().write_text(export_path(EVALUATION_STEM, "md"), report.markdown())
        rows = report.rows()
        return dg.MaterializeResult(
            metadata={
                "documents": report.documents,
                "fields": len(rows),
                "unmatched_entries": report.unmatched_entries,
                "report": dg.MetadataValue.path(path),
                "accuracy_table": dg.MetadataValue.md(report.markdown()),
            }
        )

    return extraction_evaluation
