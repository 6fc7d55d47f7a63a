"""Each document's part of the aggregates — its rows of the documents, fields, approved and repeating-group exports,
its part of the task completion, what the search index and the study grouping need of it — made from its state and
kept between refreshes beside the stamp it was made at (``read_model.document_stamps``). A refresh makes again only
the parts of documents whose stamp changed and assembles the tables from the rest as they were: a knowledge base of
100,000 documents where ten changed reads ten documents' records, not 100,000.

The parts live in 256 shards of the artifact store (``aggregates/documents/<ab>.parquet``, a document's shard by its
key's hash), one row per document, its rows of each table as a list column: a shard is rewritten whole (atomically)
when one of its documents changed, and tables are assembled as columns, never as a Python object per cell. The
columns another document decides — the study a document reports, the work it is a copy of — are left empty in a
part and filled in when the tables are assembled.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

import polars as pl
from pydantic import BaseModel

from atlas_pipeline.core.redaction import redact, redact_value
from atlas_pipeline.core.templates import Template
from atlas_pipeline.outputs.agreement_report import AgreementInputs, agreement_inputs
from atlas_pipeline.outputs.completion import CompletionPart, completion_part
from atlas_pipeline.outputs.exports import (
    AWAITING,
    FIELD_SCHEMA,
    SCHEMA,
    ExportTables,
    approved_rows,
    approved_schema,
    document_field_rows,
    document_row,
    group_rows,
    group_schema,
)
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import AGGREGATES

LOG = logging.getLogger("atlas.aggregates")

PARTS_FOLDER = f"{AGGREGATES}/documents"
DOCUMENTS_TABLE, FIELDS_TABLE, APPROVED_TABLE = "documents", "fields", "approved"
AGREEMENT_TABLE = "agreement"  # not a table of rows: its failures are named like one
CROSS_DOCUMENT = ("study_id", "duplicate_of", "duplicate_evidence")  # decided by other documents: filled on assembly


def shard_path(shard: str) -> str:
    return f"{PARTS_FOLDER}/{shard}.parquet"


class DocumentFacts(BaseModel):
    """What the aggregates need of a document besides its rows."""

    completion: CompletionPart
    indexable: bool = False  # it has a text to search
    search_material: list[str] = []  # its search mark but for its group (``search.entries.mark_material``)
    identifiers: dict[str, list[str]] = {}  # what groups it with the other reports of its study
    extracted: bool = False  # it has an extraction record: it may take part in studies, analysis and agreement
    skip_mode: bool = True  # no model extracted it (skip mode, or not extracted at all)
    failed_tables: dict[str, str] = {}  # a table its rows could not be written to, with why
    agreement: AgreementInputs | None = None  # its part of the agreement report


def group_table(name: str) -> str:
    return f"group__{name}"


def table_schemas(template: Template | None) -> dict[str, dict[str, pl.DataType]]:
    """Each table a part holds rows of, with the columns of those rows."""
    schemas = {
        DOCUMENTS_TABLE: dict(SCHEMA),
        FIELDS_TABLE: dict(FIELD_SCHEMA),
        APPROVED_TABLE: approved_schema(template),
    }
    for group in template.groups if template else []:
        schemas[group_table(group.name)] = group_schema(group)
    return schemas


def part_schema(template: Template | None) -> pl.Schema:
    """A shard's columns (made once per template: a refresh compares 256 shards with it)."""
    key = template.content_hash if template else ""
    if key not in _SCHEMAS:
        schema: dict[str, pl.DataType] = {"key": pl.String, "stamp": pl.String, "facts": pl.String}
        for table, columns in table_schemas(template).items():
            schema[table] = pl.List(pl.Struct(columns))
        _SCHEMAS.clear()
        _SCHEMAS[key] = pl.Schema(schema)
    return _SCHEMAS[key]


_SCHEMAS: dict[str, pl.Schema] = {}


@dataclass
class Part:
    """One document's part, made from its state."""

    key: str
    stamp: str
    facts: DocumentFacts
    rows: dict[str, list[dict]] = field(default_factory=dict)


def make_part(
    state: DocumentState,
    stamp: str,
    template: Template | None,
    secrets: list[str],
    material: list[str],
    indexable: bool,
) -> Part:
    """A document's part from its state (``material``: its search mark's material, ``indexable``: whether it has a
    text to search — both from ``search.entries``). What
    cannot be made of it (a value no writer foresaw) is named in its facts and left out: its table is then not
    written, as when the tables are made from the states at once; nothing else is held back."""
    failed: dict[str, str] = {}

    def made(table: str, rows: Callable[[], list[dict]]) -> list[dict]:
        try:
            return [redact_value(row, secrets) for row in rows()]
        except Exception as error:
            failed[table] = redact(f"{state.key}: {type(error).__name__}: {error}")[:500]
            LOG.error("%s: its rows of %s not made: %s", state.key, table, failed[table])
            return []

    blank = {name: None for name in CROSS_DOCUMENT}
    rows = {
        DOCUMENTS_TABLE: made(DOCUMENTS_TABLE, lambda: [{**document_row(state), **blank}]),
        FIELDS_TABLE: made(FIELDS_TABLE, lambda: [{**row, "study_id": None} for row in document_field_rows(state)]),
        APPROVED_TABLE: made(APPROVED_TABLE, lambda: approved_rows(state, template)),
    }
    for group in template.groups if template else []:
        rows[group_table(group.name)] = made(group_table(group.name), lambda group=group: group_rows(state, group))
    try:
        agreement = agreement_inputs(state, template) if template else None
    except Exception as error:
        failed[AGREEMENT_TABLE] = redact(f"{state.key}: {type(error).__name__}: {error}")[:500]
        agreement = None
    record = state.extraction
    facts = DocumentFacts(
        completion=completion_part(state),
        indexable=indexable,
        search_material=material,
        identifiers=record.identifiers if record else {},
        extracted=record is not None,
        skip_mode=record is None or record.mode == "skip",
        failed_tables=failed,
        agreement=agreement,
    )
    return _fitted(Part(state.key, stamp, facts, rows), template)


def _fitted(part: Part, template: Template | None) -> Part:
    """The part with each table whose columns its rows do not fit emptied and named (checked as a flat table is:
    a nested column would take a wrong value in silently, as null or as other text)."""
    failed = dict(part.facts.failed_tables)
    rows = dict(part.rows)
    for table, columns in table_schemas(template).items():
        try:
            pl.DataFrame(rows.get(table, []), schema=columns, orient="row")
        except Exception as error:
            failed[table] = redact(f"{part.key}: {type(error).__name__}: {error}")[:500]
            rows[table] = []
            LOG.error("%s: its rows of %s not written: %s", part.key, table, failed[table])
    if failed == part.facts.failed_tables:
        return part
    return Part(part.key, part.stamp, part.facts.model_copy(update={"failed_tables": failed}), rows)


def parts_frame(parts: list[Part], template: Template | None) -> pl.DataFrame:
    """The parts as a shard's rows (each fitted to its tables' columns by ``make_part``)."""
    tables = list(table_schemas(template))
    return pl.DataFrame([_row(part, tables) for part in parts], schema=part_schema(template), orient="row")


def _row(part: Part, tables: list[str]) -> dict:
    return {
        "key": part.key,
        "stamp": part.stamp,
        "facts": part.facts.model_dump_json(),
        **{table: part.rows.get(table, []) for table in tables},
    }


def read_shard(store: Store, shard: str, template: Template | None) -> pl.DataFrame | None:
    """A shard's parts, or None when there is none, it cannot be read or its columns are not today's (made before a
    template change: every part in it is then made again)."""
    try:
        frame = pl.read_parquet(io.BytesIO(store.read_bytes(shard_path(shard))))
    except FileNotFoundError:
        return None
    except Exception as error:  # a shard cut short or damaged: its documents are made again
        LOG.warning("aggregates: shard %s unreadable (%s): its documents are made again", shard, error)
        return None
    return frame if frame.schema == part_schema(template) else None


def write_shard(store: Store, shard: str, frame: pl.DataFrame) -> None:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    store.write_bytes(shard_path(shard), buffer.getvalue())


def update_shard(
    store: Store,
    shard: str,
    kept: pl.DataFrame | None,
    made: list[Part],
    known: set[str],
    template: Template | None,
) -> pl.DataFrame:
    """The shard with ``made`` in place of those documents' old parts and parts of documents no longer known
    dropped; written when anything in it changed."""
    if not made and kept is not None and kept.height == len(known):
        return kept  # nothing made and no part of a document gone (a shard holds each key once)
    fresh = parts_frame(made, template)
    replaced = {part.key for part in made}
    old = kept.filter(pl.col("key").is_in(known - replaced)) if kept is not None else None
    frame = pl.concat([old, fresh]) if old is not None else fresh
    if made or kept is None or (old is not None and old.height != kept.height):
        try:
            write_shard(store, shard, frame)
        except Exception as error:  # the parts serve this refresh from memory; the next makes them again
            LOG.error("aggregates: shard %s not written: %s", shard, error)
    return frame


def assemble(
    frames: Iterable[pl.DataFrame],
    order: list[str],
    facts: Mapping[str, DocumentFacts],
    study_of: Mapping[str, str],
    duplicates: Mapping[str, tuple[str, str]],
    template: Template | None,
) -> ExportTables:
    """The tables of every document of ``order``, in that order (fields awaiting a person first), with the
    columns other documents decide filled in."""
    schemas = table_schemas(template)
    positions = pl.DataFrame({"key": order, "_order": range(len(order))}, schema={"key": pl.String, "_order": pl.Int64})
    whole = [frame for frame in frames if frame.height]
    parts = (
        pl.concat(whole).join(positions, on="key", how="inner").sort("_order")
        if whole
        else pl.DataFrame(schema={**part_schema(template), "_order": pl.Int64})
    )
    links = pl.DataFrame(
        {
            "document_key": order,
            "study_id": [study_of.get(key) or key for key in order],
            "duplicate_of": [duplicates[key][0] if key in duplicates else None for key in order],
            "duplicate_evidence": [(duplicates[key][1] or None) if key in duplicates else None for key in order],
        },
        schema={name: pl.String for name in ("document_key", "study_id", "duplicate_of", "duplicate_evidence")},
    )

    def rows_of(table: str) -> pl.DataFrame:
        exploded = parts.select("_order", table).explode(table).filter(pl.col(table).is_not_null())
        if exploded.is_empty():
            return pl.DataFrame(schema=schemas[table])
        return exploded.select(pl.col(table).struct.unnest())

    documents = rows_of(DOCUMENTS_TABLE).drop(CROSS_DOCUMENT)
    documents = documents.join(links, on="document_key", how="left", maintain_order="left").select(list(SCHEMA))
    fields = rows_of(FIELDS_TABLE).drop("study_id")
    fields = fields.join(links.select("document_key", "study_id"), on="document_key", how="left", maintain_order="left")
    fields = fields.with_columns(_waits=~pl.col("provenance").is_in(AWAITING)).sort("_waits", maintain_order=True)
    not_made = {}
    for fact in facts.values():
        for table, reason in fact.failed_tables.items():
            not_made.setdefault(table, reason)
    return ExportTables(
        documents=documents,
        fields=fields.select(list(FIELD_SCHEMA)),
        approved=rows_of(APPROVED_TABLE),
        groups={group.name: rows_of(group_table(group.name)) for group in (template.groups if template else [])},
        skip_mode=bool(order) and all(facts[key].skip_mode for key in order if key in facts),
        not_made=not_made,
    )


def kept_facts(frame: pl.DataFrame, stamps: Mapping[str, str]) -> dict[str, DocumentFacts]:
    """The facts of a shard's parts still current (made at today's stamp) and readable; the others are made again."""
    found = {}
    for key, stamp, facts in frame.select("key", "stamp", "facts").iter_rows():
        if stamp and stamps.get(key) == stamp:
            try:
                found[key] = DocumentFacts.model_validate_json(facts)
            except ValueError as error:  # written by a part that cannot be read back: made again
                LOG.warning("aggregates: %s: its part cannot be read (%s): made again", key, error)
    return found
