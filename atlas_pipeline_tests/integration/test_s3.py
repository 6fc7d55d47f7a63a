"""The knowledge base, artifacts and exports on S3, against a real S3-compatible server (moto) on 127.0.0.1."""

import polars as pl

from atlas_pipeline.config.settings import load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.aggregate_inputs import aggregate_inputs
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.listing import KnowledgeBase
from atlas_pipeline.outputs.export_files import export_files
from atlas_pipeline.store.files import filesystem_for
from atlas_pipeline.store.records import ExtractionRecord, read_record, write_record
from atlas_pipeline_tests.support.corpus import corpus_file
from atlas_pipeline_tests.support.helpers import SensorHarness, ran_as_its_document


def test_bucket_documents_are_discovered_processed_and_exported(s3_endpoint, instance):
    fs, _ = filesystem_for("s3://atlas-test")
    fs.mkdir("atlas-test")
    fs.pipe_file("atlas-test/papers/PMC3508963.pdf", corpus_file("rct/PMC3508963.pdf").read_bytes())
    fs.pipe_file("atlas-test/papers/sub dir/broken.pdf", b"<html><body>not a pdf</body></html>")
    fs.pipe_file("atlas-test/papers/.hidden", b"x")

    env = {
        "ATLAS_KNOWLEDGE_BASE": "s3://atlas-test/papers",
        "ATLAS_ARTIFACTS": "s3://atlas-test/artifacts",
        "ATLAS_EXPORTS": "s3://atlas-test/exports",
    }
    settings = load_settings(env)
    atlas = Deployment.from_settings(settings)
    assert [f.path for f in KnowledgeBase(settings.project.knowledge_base).list()] == [
        "PMC3508963.pdf",
        "sub dir/broken.pdf",
    ]

    harness = SensorHarness(instance, settings, atlas)
    requests = harness.tick().run_requests
    assert harness.partitions == {"PMC3508963.pdf", "broken.pdf"} and len(requests) == 2

    defs = build_definitions(settings)
    for request in requests:
        result = defs.resolve_job_def("document_job").execute_in_process(
            partition_key=request.partition_key, instance=instance, raise_on_error=False
        )
        record = read_record(atlas.store(), request.partition_key, "extraction", ExtractionRecord)
        assert ran_as_its_document(result, record.status)
    assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success

    store = atlas.store()
    done = read_record(store, "PMC3508963.pdf", "extraction", ExtractionRecord)
    broken = read_record(store, "broken.pdf", "extraction", ExtractionRecord)
    assert done.status == "done" and done.text_path.startswith("parsed/")
    assert broken.status == "failed" and broken.reason == "snapshot: not a PDF (HTML content)"
    markdown = fs.cat_file(f"atlas-test/artifacts/{done.text_path}")
    assert markdown.startswith(b"<!-- page 1 -->\n\nSoleimanpour et al. BMC Urology 2012")
    with fs.open("atlas-test/exports/atlas_documents.parquet", "rb") as handle:
        frame = pl.read_parquet(handle)
    assert dict(zip(frame["document_key"], frame["status"], strict=True)) == {
        "PMC3508963.pdf": "done",
        "broken.pdf": "failed",
    }
    assert {path.rsplit("/", 1)[-1] for path in fs.ls("atlas-test/exports")} == set(export_files())
    # the documents' parts of the aggregates are kept in the bucket: a refresh reads again only a document rewritten
    assert len(fs.ls("atlas-test/artifacts/aggregates/documents")) == 2
    assert aggregate_inputs(instance, atlas).made == 0
    write_record(store, "broken.pdf", "extraction", broken)  # the same content, written again
    assert aggregate_inputs(instance, atlas).made == 1
    # a second scan of the bucket finds nothing new
    assert harness.tick().run_requests == []
    # the S3 secret appears nowhere: not in the bucket, not in the run logs
    for path in fs.find("atlas-test"):
        assert b"atlas-test-secret" not in fs.cat_file(path), path
    for run in instance.get_runs():
        for entry in instance.all_logs(run.run_id):
            assert "atlas-test-secret" not in str(entry)
