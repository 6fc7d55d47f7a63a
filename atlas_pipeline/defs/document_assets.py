"""Per-document assets: snapshot → text and tables (one parse) → extraction. Each is a thin wrapper.

A run materialises one partition (what the sensor requests) or a range of them (a batched run, ``atlas run
--batch N``: one run for many documents, so the per-run cost of Dagster is paid once). Metadata is recorded per
partition either way; a data version only for single-partition runs, since Dagster keeps one per run output.
"""

import warnings
from collections import Counter
from typing import TypeVar

import dagster as dg

from atlas_pipeline.defs.document_batch import DocumentBatch
from atlas_pipeline.defs.document_runs import wait_for_older_runs
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.extraction.document_extraction import extract_document
from atlas_pipeline.extraction.prices import money
from atlas_pipeline.grading.document_checks import (
    DOCUMENT_OUTCOME,
    QUOTE_GROUNDING,
    VALUE_CONSISTENCY,
    CheckResult,
    document_checks,
    fields_needing_review,
)
from atlas_pipeline.knowledge.catalog import load_entries
from atlas_pipeline.knowledge.snapshots import take_snapshot
from atlas_pipeline.parsing import ParsedDocument
from atlas_pipeline.parsing.document_parse import load_markdown, parse_snapshot
from atlas_pipeline.search.backends import instance_postgres_url
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import provenance_path
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, Problem, SnapshotRecord, read_record

GROUP = "documents"
PREVIEW_CHARS = 1500
T = TypeVar("T")


def _require(value: T | None, what: str, key: str) -> T:
    if value is None:
        raise dg.Failure(description=f"{what} of document {key!r} is missing: materialise its upstream asset first")
    return value


def _single_version(results: dict[str, tuple[dict, str]]) -> dg.DataVersion | None:
    return dg.DataVersion(next(iter(results.values()))[1]) if len(results) == 1 else None


def _problem_metadata(problem: Problem | None) -> dict:
    if problem is None:
        return {"status": "ok"}
    return {"status": problem.status, "reason": f"{problem.stage}: {problem.reason}", "stopped_at": str(problem.stage)}


def _artifact(store: Store, relative: str) -> dg.MetadataValue | str:
    """A clickable location of an artifact in the store (records keep store-relative paths)."""
    return dg.MetadataValue.path(store.url(relative)) if relative else "none"


SNAPSHOT, TEXT, TABLES = "document_snapshot", "document_text", "document_tables"


@dg.asset(
    name=SNAPSHOT,
    partitions_def=documents_partitions,
    group_name=GROUP,
    code_version="1",
    kinds={"python"},
    description="Immutable copy of the document's bytes (content-addressed) with sha256, size, media type, pages. "
    "Nothing downstream reads the knowledge base again.",
)
def document_snapshot(context: dg.AssetExecutionContext, atlas: AtlasResource) -> dg.MaterializeResult:
    """Its own step, outside the ``parse`` pool: it waits for older runs of its documents first, and a run waiting
    must not hold a parse slot (the older run may need that very slot to finish)."""
    batch = DocumentBatch(context)
    wait_for_older_runs(context, batch.keys)  # one run per document at a time
    deployment = atlas.deployment
    store, knowledge_base = deployment.store(), deployment.open_knowledge_base()
    catalog = None if batch.single else load_entries(store, batch.keys)  # their shards, not the whole catalog

    def snapshot(key: str) -> tuple[dict, str]:
        record = take_snapshot(knowledge_base, store, atlas.catalog_entry(key, catalog), max_bytes=deployment.max_bytes)
        if record.problem:
            context.log.warning(f"{record.key}: {record.problem.status}: {record.problem.reason}")
        metadata = {
            **_problem_metadata(record.problem),
            "source_path": record.source_path,
            "sha256": record.sha256,
            "size_bytes": record.size,
            "media_type": record.media_type or "unknown",
            "pages": record.pages if record.pages is not None else -1,
            "snapshot": _artifact(store, record.snapshot_path),
        }
        provenance = store.read_json_or(provenance_path(record.sha256), None) if record.sha256 else None
        if provenance:  # brought by a collector (atlas_pipeline.sources)
            metadata["collected_by"] = provenance["source"]
            metadata["collected_from"] = dg.MetadataValue.url(provenance["url"])
            metadata["collected_at"] = dg.MetadataValue.timestamp(provenance["fetched_at"])
        return metadata, record.sha256 or f"missing:{record.taken_at}"

    results = batch.each(snapshot)
    for key, (metadata, _) in results.items():
        batch.add_metadata(key, metadata)
    return dg.MaterializeResult(data_version=_single_version(results))


@dg.multi_asset(
    specs=[
        dg.AssetSpec(
            TEXT,
            deps=[document_snapshot],
            description="Markdown full text: pymupdf4llm for PDF (OCR for image-only pages) or the parsing provider "
            "chosen with ATLAS_PARSER (MinerU, docling-serve), bs4 for HTML and JATS.",
            partitions_def=documents_partitions,
            group_name=GROUP,
            code_version="1",
            kinds={"python"},
        ),
        dg.AssetSpec(
            TABLES,
            deps=[document_snapshot],
            description="Tables as HTML plus plain text, from the same parse as the text, or from ATLAS_TABLES_PARSER "
            "(cached by content hash).",
            partitions_def=documents_partitions,
            group_name=GROUP,
            code_version="1",
            kinds={"python"},
        ),
    ],
    pool="parse",
)
def document_parse(context: dg.AssetExecutionContext, atlas: AtlasResource):
    """Parse each document once; the same parse yields both the text and the tables."""
    deployment = atlas.deployment
    store, choice, batch = deployment.store(), deployment.parser_choice(), DocumentBatch(context)

    def parse(key: str) -> tuple[dict, str]:
        snapshot = _require(read_record(store, key, "snapshot", SnapshotRecord), "the snapshot", key)
        record, parsed = parse_snapshot(store, snapshot, choice)
        if record.problem:
            context.log.warning(f"{key}: {record.problem.status}: {record.problem.reason}")
        common = {
            **_problem_metadata(record.problem),
            "cached": record.cached,
            "parse_seconds": record.seconds,
            "engine": record.engine or "none",
            "parser_fingerprint": record.parser,
            "provider": record.provider or "none",
        }
        if record.provider_task_id or record.timings:
            common["provider_task_id"] = record.provider_task_id or "none"
            common["provider_version"] = record.provider_version or "unknown"
            common["provider_cached"] = record.provider_cached
            common["provider_timings"] = dg.MetadataValue.json(record.timings)
        text = {
            **common,
            "pages": record.pages,
            "characters": record.characters,
            "ocr_pages": str(record.ocr_pages),
            "layout_model_pages": len(record.layout_pages),
            "text_path_pages": len(record.text_pages),
            "warnings": len(record.warnings),
            "text": _artifact(store, record.text_path),
            "preview": dg.MetadataValue.md(_preview_text(parsed, record, store)),
        }
        tables = {
            **common,
            "tables": record.tables,
            "tables_file": _artifact(store, record.tables_path),
            "captions": dg.MetadataValue.md(_captions(parsed)),
        }
        return {TEXT: text, TABLES: tables}, f"{record.sha256}:{record.parser}"

    results = batch.each(parse)
    for key, (metadata, _) in results.items():
        for asset_name, values in metadata.items():
            batch.add_metadata(key, values, asset=asset_name)
    version = _single_version(results)
    yield dg.MaterializeResult(asset_key=TEXT, data_version=version)
    yield dg.MaterializeResult(asset_key=TABLES, data_version=version)


def _preview_text(parsed: ParsedDocument | None, record: ParseRecord, store: Store) -> str:
    """The start of the markdown — from the parse, or from the cached text file when the parse was a cache hit."""
    if record.problem:
        return "—"
    markdown = parsed.markdown if parsed is not None else load_markdown(store, record)
    text = markdown[:PREVIEW_CHARS]
    return text + ("\n\n*…truncated*" if len(markdown) > PREVIEW_CHARS else "")


def _captions(parsed: ParsedDocument | None) -> str:
    if parsed is None or not parsed.tables:
        return "—"
    return "\n".join(f"- p.{t.page or '-'} {t.rows}×{t.columns} {t.caption or '(no caption)'}" for t in parsed.tables)


with warnings.catch_warnings():  # per-partition checks are a Dagster preview feature: used knowingly
    warnings.simplefilter("ignore", dg.PreviewWarning)
    EXTRACTION_CHECKS = [
        dg.AssetCheckSpec(
            QUOTE_GROUNDING,
            asset="document_extraction",
            partitions_def=documents_partitions,
            description="Every extracted value has its quote verified in the document (warns with the fields to "
            "review).",
        ),
        dg.AssetCheckSpec(
            VALUE_CONSISTENCY,
            asset="document_extraction",
            partitions_def=documents_partitions,
            description="The template's consistency checks hold (events ≤ totals, CI bounds, 0 ≤ p ≤ 1, …); "
            "the metadata lists every violation with its values.",
        ),
        dg.AssetCheckSpec(
            DOCUMENT_OUTCOME,
            asset="document_extraction",
            partitions_def=documents_partitions,
            description="The document went through: fails (error) for a document that failed — at its snapshot, "
            "parse or extraction, with the reason — and warns for one that was skipped. Its partitions show which "
            "documents are red; the materialisation keeps the record, so completion and the exports count them.",
        ),
    ]

_SEVERITY = {"warn": dg.AssetCheckSeverity.WARN, "error": dg.AssetCheckSeverity.ERROR}


def _agreement_metadata(record: ExtractionRecord) -> dict:
    """Two extractors: the second's model, the values per agreement state and what each extractor cost."""
    if not record.second_model:
        return {}
    return {
        "second_model": record.second_model,
        **{f"values_{state}": count for state, count in record.agreement.items()},
        "extractors": dg.MetadataValue.json(record.extractors),
    }


def _check_metadata(outcome: CheckResult) -> dict:
    return {
        key: dg.MetadataValue.json(value) if isinstance(value, list | dict) else value
        for key, value in outcome.metadata.items()
    }


def build_document_extraction(code_version: str) -> dg.AssetsDefinition:
    """The extraction asset; ``code_version`` is the extraction version's tag (``extraction.version``), so changing
    the template, rule, mode or model marks existing extractions stale in Dagster instead of silently mixing."""

    @dg.multi_asset(
        specs=[
            dg.AssetSpec(
                "document_extraction",
                partitions_def=documents_partitions,
                group_name=GROUP,
                deps=["document_text", "document_tables"],
                code_version=code_version,
                kinds={"python"},
                description="Template-driven extraction: each value with its verbatim quote, confidence, tier, "
                "evidence location and consistency flags, and the document's status with a reason (skip mode: a "
                "stable JSON wrapper pointing at text and tables).",
            )
        ],
        check_specs=EXTRACTION_CHECKS,
        can_subset=True,  # batched runs (a partition range) leave the checks out and log them per partition
        # no pool: a step holds any number of requests (a batch, chunks) or none (cached); the endpoint's gate
        # (extraction.llm.gate, ATLAS_LLM_CONCURRENCY) counts the requests themselves, across every run and process
        name="document_extraction",
    )
    def document_extraction(context: dg.AssetExecutionContext, atlas: AtlasResource):
        deployment = atlas.deployment
        store = deployment.store()
        setup = deployment.extraction_setup()  # the version computed from the very rule and template used
        template, rule, mode, version = setup.template, setup.rule, setup.mode, setup.version
        shared = instance_postgres_url(context.instance)  # on PostgreSQL: one request cap for every machine
        llm = mode == "llm" and deployment.llm_configured
        client = deployment.llm_client(cache=store, shared_database=shared) if llm else None
        second = deployment.second_llm_client(cache=store, shared_database=shared) if client is not None else None
        checks: dict[str, list[CheckResult]] = {}
        batch = DocumentBatch(context)

        def extract(key: str) -> tuple[dict, str]:
            snapshot = _require(read_record(store, key, "snapshot", SnapshotRecord), "the snapshot", key)
            parse = _require(read_record(store, key, "parse", ParseRecord), "the parse", key)
            record = extract_document(
                store, snapshot, parse, template, rule, mode=mode, llm=client, version=version, second=second
            )
            if batch.single:  # a batch logs one summary: each log line is an event to store
                context.log.info(f"{key}: {record.status.value}: {record.reason}")
            checks[key] = document_checks(record)
            currency = record.cost_currency or "USD"
            metadata = {
                "status": record.status.value,
                "reason": record.reason,
                "retryable": record.retryable,
                "stopped_at": str(record.stopped_at or ""),
                "mode": record.mode,
                "sha256": record.sha256,
                "completeness": record.completeness if record.completeness is not None else -1.0,
                "template": f"{record.template_code}@{record.template_version}",
                "template_hash": record.template_hash,
                "extraction_version": record.extraction_version,
                "identifiers": dg.MetadataValue.json(record.identifiers),
                "llm_calls": record.llm_calls,
                "llm_cache_hits": record.llm_cache_hits,
                "prompt_tokens": record.prompt_tokens,
                "completion_tokens": record.completion_tokens,
                "llm_cost": money(record.cost, currency) if record.mode == "llm" else "none",
                "llm_cost_paid": money(record.cost_paid, currency) if record.mode == "llm" else "none",
                "processing_seconds": record.processing_seconds,
                "extraction": _artifact(store, record.extraction_path),
                "fields_needing_review": ", ".join(fields_needing_review(record)) or "none",
                "consistency_violations": len(record.violations),
                **_agreement_metadata(record),
                "review_page": atlas.review_link(key),
            }
            return metadata, f"{record.sha256}:{record.extraction_version}"

        results = batch.each(extract, parallel=deployment.pace().llm_concurrency if client is not None else 1)
        for key, (metadata, _) in results.items():
            batch.add_metadata(key, metadata, asset="document_extraction")
        if len(results) > 1:
            counts = Counter(metadata["status"] for metadata, _ in results.values())
            context.log.info(f"{len(results)} documents: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
        selected = {key.name for key in context.selected_asset_check_keys}
        if len(results) == 1 and selected:
            outcomes = next(iter(checks.values()))
            yield dg.MaterializeResult(
                asset_key="document_extraction",
                data_version=_single_version(results),
                check_results=[
                    dg.AssetCheckResult(
                        check_name=outcome.name,
                        passed=outcome.passed,
                        severity=_SEVERITY[outcome.severity],
                        description=outcome.description,
                        metadata=_check_metadata(outcome),
                    )
                    for outcome in outcomes
                    if outcome.name in selected
                ],
            )
            return
        for key, outcomes in checks.items():  # one evaluation per document, also in batched runs
            for outcome in outcomes:
                context.log_event(
                    dg.AssetCheckEvaluation(
                        asset_key=dg.AssetKey("document_extraction"),
                        check_name=outcome.name,
                        passed=outcome.passed,
                        severity=_SEVERITY[outcome.severity],
                        description=outcome.description,
                        metadata=_check_metadata(outcome),
                        partition=key,
                    )
                )
        yield dg.MaterializeResult(asset_key="document_extraction", data_version=_single_version(results))

    return document_extraction


def build_document_assets(extraction_code_version: str) -> list[dg.AssetsDefinition]:
    return [document_snapshot, document_parse, build_document_extraction(extraction_code_version)]
