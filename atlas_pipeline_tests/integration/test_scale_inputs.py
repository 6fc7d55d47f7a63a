"""Big inputs end like small ones: a knowledge base of 600 small files (every one gets a partition over several sensor
ticks, a run and a terminal status, none lost) and a 300-page PDF through the document job. Tens of thousands of
documents are bench/scale's and bench/scan's."""

import pymupdf

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.ops.runs import run_documents
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import SensorHarness

SMALL_FILES = 600


def test_six_hundred_small_files_all_end_done(instance, knowledge_base, settings_for, atlas_for):
    text = sorted(corpus_file("gold/evidence_txt").glob("*.txt"))[0].read_text(errors="replace")
    for number in range(SMALL_FILES):
        start = (number * 97) % max(1, len(text) - 400)
        (knowledge_base / f"note-{number:04d}.txt").write_text(f"Note {number}\n\n{text[start : start + 400]}")
    per_tick = {"sensor_max_runs_per_tick": "150"}  # several ticks, as 2,000 files took at the default
    settings, atlas = settings_for(knowledge_base, **per_tick), atlas_for(knowledge_base, **per_tick)
    harness = SensorHarness(instance, settings, atlas)
    requested: list[str] = []
    for _ in range(SMALL_FILES // settings.runtime.sensor_max_runs_per_tick + 2):
        requested += [request.partition_key for request in harness.tick().run_requests]
    assert len(harness.partitions) == SMALL_FILES
    assert sorted(requested) == sorted(harness.partitions)  # each requested exactly once, over several ticks
    assert harness.tick().run_requests == []

    defs = build_definitions(settings)
    outcomes = list(run_documents(sorted(requested), workers=1, defs=defs, instance=instance, batch=500))
    assert len(outcomes) == SMALL_FILES and all(success for _, success, _ in outcomes)
    states = document_states(instance, atlas)
    assert len(states) == SMALL_FILES
    assert {state.status for state in states} == {DocumentStatus.DONE}
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    exported = atlas.exports_store().read_text("atlas_documents.csv").splitlines()
    assert len(exported) == SMALL_FILES + 1


def test_a_300_page_pdf_goes_through_the_document_job(instance, knowledge_base, settings_for, atlas_for):
    big = pymupdf.open()
    sources = sorted(corpus_file("rct").glob("*.pdf"))
    while big.page_count < 300:
        with pymupdf.open(sources[big.page_count % len(sources)]) as source:
            big.insert_pdf(source, to_page=min(source.page_count, 300 - big.page_count) - 1)
    big.save(knowledge_base / "three hundred pages.pdf")
    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)  # the default engine, as users run it
    harness = SensorHarness(instance, settings, atlas)
    (request,) = harness.tick().run_requests
    result = (
        build_definitions(settings)
        .resolve_job_def("document_job")
        .execute_in_process(partition_key=request.partition_key, instance=instance)
    )
    assert result.success
    record = read_record(atlas.store(), request.partition_key, "extraction", ExtractionRecord)
    assert record.status == DocumentStatus.DONE
    states = {s.key: s for s in document_states(instance, atlas)}
    assert states[request.partition_key].parse.pages == 300
    assert states[request.partition_key].parse.characters > 500_000
