"""The aggregates refreshed from what changed: each document's part of them is kept between refreshes and made again
only when what its state is built from changes (its records, decisions, run, source, the settings) — and the tables
assembled from the parts are exactly those made from every document's state at once."""

import io
import shutil

import polars as pl
from polars.testing import assert_frame_equal

from atlas_pipeline.defs.aggregate_inputs import aggregate_inputs
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.outputs.completion import summarise
from atlas_pipeline.outputs.exports import export_tables, write_exports
from atlas_pipeline.outputs.study_parts import analysis_from_states
from atlas_pipeline.review.decisions import DecisionRequest, decide
from atlas_pipeline.review.study_values import load_choices
from atlas_pipeline.search.entries import document_mark, indexable
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.juice_trial import DURATION, FECAL, KEY, answer

JATS = "PMC1216327.nxml"  # the juice trial's JATS article: one work with the PDF (a duplicate group, one study)
OTHERS = ["html/plos_one_article.html", "awkward/malformed/ocrmypdf_invalid.pdf", f"rct_jats/{JATS}"]


def _same_as_from_every_state(instance, atlas: Deployment):
    """The refresh's inputs, checked against what the states of every document give at once."""
    inputs = aggregate_inputs(instance, atlas)
    states = document_states(instance, atlas)
    whole = export_tables(states, atlas.load_template())
    assert inputs.order == [state.key for state in states]
    for name in ("documents", "fields", "approved"):
        assert_frame_equal(getattr(inputs.tables, name), getattr(whole, name))
    assert inputs.tables.groups.keys() == whole.groups.keys()
    for name, frame in whole.groups.items():
        assert_frame_equal(inputs.tables.groups[name], frame)
    assert (inputs.tables.skip_mode, inputs.tables.not_made) == (whole.skip_mode, whole.not_made)
    ignore = {"computed_at"}
    assert inputs.completion().model_dump(exclude=ignore) == summarise(states).model_dump(exclude=ignore)
    marks = {c.key: c.mark for c in inputs.search_candidates() if c.indexable}
    assert marks == {state.key: document_mark(state) for state in states if indexable(state)}
    template, choices = atlas.load_template(), load_choices(atlas.store())
    analysis, whole_analysis = inputs.analysis(template, choices), analysis_from_states(states, template, choices)
    assert analysis.study_rows == whole_analysis.study_rows and analysis.study_rows
    assert analysis.entries == whole_analysis.entries and analysis.entries
    assert (analysis.excluded, analysis.agreement, analysis.error) == (
        whole_analysis.excluded,
        whole_analysis.agreement,
        whole_analysis.error,
    )
    assert [(s.id, [r.key for r in s.reports], s.values) for s in analysis.studies] == [
        (s.id, [r.key for r in s.reports], s.values) for s in whole_analysis.studies
    ]
    exports = atlas.exports_store()
    files = {}
    for made in (analysis, whole_analysis):  # the same files, whichever way the analysis was made
        written = write_exports(exports, inputs.tables, made, inputs.completion(), template)
        assert not written.not_written
        files[id(made)] = {path: exports.read_bytes(path) for path in exports.files() if not path.endswith(".xlsx")}
    assert files[id(analysis)] == files[id(whole_analysis)]
    return inputs


def test_only_what_changed_is_read_again_and_the_tables_are_those_of_every_state(
    run, llm_server, knowledge_base, instance
):
    llm_server.script(default={"content": answer(outcomes=[DURATION, FECAL])})
    for name in OTHERS:
        copy_into(knowledge_base, name)
    atlas = run.atlas
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    keys = [KEY, *(name.rsplit("/", 1)[1] for name in OTHERS)]
    instance.add_dynamic_partitions(documents_partitions.name, keys[1:])
    for key in keys:
        run(key)
    assert run.defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success

    first = _same_as_from_every_state(instance, atlas)
    assert first.made == 0  # the aggregates job made every part already
    assert first.tables.fields.height > 30 and first.tables.documents["status"].to_list().count("failed") == 1
    assert first.tables.groups["outcomes"].height >= 2  # the outcome entries, assembled like the rest
    documents = first.tables.documents
    assert documents.filter(documents["document_key"] == JATS)["duplicate_of"].to_list() == [KEY]
    assert len(set(documents.filter(documents["document_key"].is_in([KEY, JATS]))["study_id"])) == 1

    # a decision on the trial: its part alone is made again, and the tables follow it
    record = read_record(atlas.store(), KEY, "extraction", ExtractionRecord)
    template = atlas.load_template()
    decide(
        atlas.store(),
        record,
        DecisionRequest(
            "n_control",
            "correct",
            reviewer="ana",
            shown=(record.sha256, record.extraction_version),
            template_field=template.field_definition("n_control"),
            value="31",
        ),
    )
    after = _same_as_from_every_state(instance, atlas)
    assert after.made == 1 and after.studies_made == 1  # the trial's study, of its two reports, alone
    fields = after.tables.fields
    row = fields.filter((fields["document_key"] == KEY) & (fields["field"] == "n_control"))
    assert row["final_value"].to_list() == ["31"] and row["provenance"].to_list() == ["reviewer_corrected"]

    # a source removed from the knowledge base: its part again (marked), the others kept
    (knowledge_base / "plos_one_article.html").unlink()
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    removed = _same_as_from_every_state(instance, atlas)
    assert removed.made == 1
    documents = removed.tables.documents
    assert documents.filter(documents["document_key"] == "plos_one_article.html")["source_removed"].to_list() == [True]

    # a setting that weighs every document (the values accepted without a person): every part again
    review = run.settings.review.model_copy(update={"accept_tiers": "verified,approximate"})
    settings = run.settings.model_copy(update={"review": review})
    again = aggregate_inputs(instance, Deployment.from_settings(settings))
    assert again.made == len(keys)

    # a shard lost or damaged: its documents are made again, nothing else
    shutil.rmtree(atlas.store().path("aggregates/documents"))
    rebuilt = _same_as_from_every_state(instance, atlas)
    assert rebuilt.made == len(keys)


def test_a_part_that_cannot_be_trusted_is_made_again_and_one_that_cannot_be_made_holds_back_its_table_alone(
    run, llm_server, instance, monkeypatch
):
    llm_server.script(default={"content": answer(outcomes=[DURATION, FECAL])})
    run()
    atlas, store = run.atlas, run.atlas.store()
    assert aggregate_inputs(instance, atlas).made == 1 and aggregate_inputs(instance, atlas).made == 0

    # a decision file that cannot be read: the review merged without it is never kept as current
    store.write_bytes(f"reviews/decisions/{KEY}/20260101T000000Z-damaged.json", b"{not json")
    assert [aggregate_inputs(instance, atlas).made for _ in range(2)] == [1, 1]
    store.delete(f"reviews/decisions/{KEY}/20260101T000000Z-damaged.json")
    assert [aggregate_inputs(instance, atlas).made for _ in range(2)] == [1, 0]

    # a kept part that cannot be read back is made again
    shard = next(path for path in store.files("aggregates/documents"))
    frame = pl.read_parquet(io.BytesIO(store.read_bytes(shard)))
    store.write_bytes(shard, _parquet(frame.with_columns(pl.lit("{broken").alias("facts"))))
    assert aggregate_inputs(instance, atlas).made == 1

    # rows that do not fit their table's columns (a list where text goes): that table alone is held back, named
    from atlas_pipeline.outputs import document_products

    monkeypatch.setattr(document_products, "approved_rows", lambda state, template: [{"document_key": ["a", "b"]}])
    shutil.rmtree(store.path("aggregates/documents"))
    inputs = aggregate_inputs(instance, atlas)
    assert "approved" in inputs.tables.not_made and inputs.tables.approved.is_empty()
    assert inputs.tables.fields.height > 30  # the others are whole
    template = atlas.load_template()
    written = write_exports(atlas.exports_store(), inputs.tables, inputs.analysis(template, {}), inputs.completion())
    approved = {"atlas_approved.csv", "atlas_approved.parquet", "atlas_approved.jsonl"}
    assert set(written.not_written) == approved | {"atlas_documents.xlsx"}  # a workbook is whole or not written
    assert KEY in written.not_written["atlas_approved.csv"] and "fields_csv" in written


def _parquet(frame: pl.DataFrame) -> bytes:
    buffer = io.BytesIO()
    frame.write_parquet(buffer)
    return buffer.getvalue()
