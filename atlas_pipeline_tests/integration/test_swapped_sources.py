"""A knowledge-base file swapped after the scan: every read goes through one opener that checks the file *as
opened* — a link leading outside the knowledge base, a directory or a pipe put in its place is refused then, however
long after the listing, and its bytes reach neither the snapshot, the text nor the search index."""

from __future__ import annotations

import os

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.store.records import ExtractionRecord, SnapshotRecord, read_record

SECRET = b"the private key of the lab server: hunter2-0xDEADBEEF\n"


def test_a_file_swapped_for_an_outside_link_after_the_scan_is_never_read(
    knowledge_base, settings_for, instance, tmp_path
):
    outside = tmp_path / "outside" / "secret.txt"
    outside.parent.mkdir()
    outside.write_bytes(SECRET)
    (knowledge_base / "z.txt").write_text("We randomised 40 adults to juice or water.\n")
    (knowledge_base / "fifo.txt").write_text("a plain file for now\n")
    settings = settings_for(knowledge_base)
    atlas = Deployment.from_settings(settings)
    scan = refresh_catalog(atlas.open_knowledge_base(), atlas.store())  # the listing: both are plain files
    assert set(scan.catalog.entries) == {"z.txt", "fifo.txt"}
    instance.add_dynamic_partitions(documents_partitions.name, ["z.txt", "fifo.txt"])
    # between the listing and the snapshot: one file becomes a link to the secret, the other a pipe
    (knowledge_base / "z.txt").unlink()
    os.symlink(outside, knowledge_base / "z.txt")
    (knowledge_base / "fifo.txt").unlink()
    os.mkfifo(knowledge_base / "fifo.txt")
    job = build_definitions(settings).resolve_job_def("document_job")
    for key in ("z.txt", "fifo.txt"):
        assert job.execute_in_process(partition_key=key, instance=instance).success
    store = atlas.store()
    snapshot = read_record(store, "z.txt", "snapshot", SnapshotRecord)
    assert snapshot.problem.status == "skipped" and "now leads outside the knowledge base" in snapshot.problem.reason
    assert read_record(store, "z.txt", "extraction", ExtractionRecord).status == "skipped"
    fifo = read_record(store, "fifo.txt", "snapshot", SnapshotRecord)
    assert fifo.problem.status == "skipped" and "no longer a regular file" in fifo.problem.reason
    for path in store.files():  # the secret is nowhere in the artifacts: snapshots, text, records, index
        assert SECRET not in (tmp_path / "artifacts" / path).read_bytes(), path
