"""The knowledge-base sensor evaluated against a real instance: new, unchanged, edited, removed, duplicates, bulk."""

import json
import os
import shutil
import time

import dagster as dg

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.defs.document_states import already_extracted
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.knowledge.catalog import CatalogEntry, load_catalog, refresh_catalog
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import SensorHarness


def make_harness(instance, knowledge_base, settings_for, atlas_for, **extra):
    return SensorHarness(instance, settings_for(knowledge_base, **extra), atlas_for(knowledge_base, **extra))


def test_new_documents_get_partitions_and_one_run_each(instance, knowledge_base, settings_for, atlas_for):
    copy_into(knowledge_base, "rct/PMC1216327.pdf", "html/plos_one_article.html")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    result = harness.tick()
    assert harness.partitions == {"PMC1216327.pdf", "plos_one_article.html"}
    entries = load_catalog(harness.atlas.store()).entries
    assert {(r.partition_key, r.run_key.rsplit(":", 1)[0]) for r in result.run_requests} == {
        (key, f"{key}:{entry.sha256[:16]}") for key, entry in entries.items()
    }
    assert all(r.job_name in (None, "document_job") for r in result.run_requests)


def test_unchanged_documents_never_run_again_and_the_cursor_survives(instance, knowledge_base, settings_for, atlas_for):
    copy_into(knowledge_base, "rct/PMC1216327.pdf")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    assert len(harness.tick().run_requests) == 1
    assert harness.tick().run_requests == []
    # a restarted daemon: a new harness (new sensor object) with the stored cursor
    restarted = make_harness(instance, knowledge_base, settings_for, atlas_for)
    restarted.cursor = harness.cursor
    result = restarted.tick()
    assert result.run_requests == [] and "0 new" in result.skip_reason.skip_message
    # without the cursor the sensor would ask again (the run key would then stop a second run)
    forgetful = make_harness(instance, knowledge_base, settings_for, atlas_for)
    fingerprint = json.loads(harness.cursor)["PMC1216327.pdf"]
    assert [r.run_key for r in forgetful.tick().run_requests] == [f"PMC1216327.pdf:{fingerprint}"]


def test_a_changed_template_requests_every_document_again(instance, knowledge_base, settings_for, atlas_for, tmp_path):
    copy_into(knowledge_base, "rct/PMC1216327.pdf")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    (first,) = harness.tick().run_requests
    assert harness.tick().run_requests == []
    # the project adds a custom field: new template hash, new extraction version
    seeds = tmp_path / "seeds"
    shutil.copytree(PROJECT_ROOT / "seeds" / "templates", seeds / "templates")
    (seeds / "rules").mkdir()
    rule = json.loads((PROJECT_ROOT / "seeds" / "rules" / "default.json").read_text())
    rule["custom_fields"] = [{"name": "blinding_method", "type": "string", "instruction": "How was blinding done?"}]
    (seeds / "rules" / "default.json").write_text(json.dumps(rule))
    changed = make_harness(instance, knowledge_base, settings_for, atlas_for, seeds_dir=str(seeds))
    changed.cursor = harness.cursor
    (second,) = changed.tick().run_requests
    assert second.partition_key == first.partition_key and second.run_key != first.run_key
    assert second.run_key.rsplit(":", 1)[0] == first.run_key.rsplit(":", 1)[0]  # same bytes


def test_edited_document_runs_again_under_a_new_run_key(instance, knowledge_base, settings_for, atlas_for):
    (path,) = copy_into(knowledge_base, "rct/PMC1216327.pdf")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    (first,) = harness.tick().run_requests
    path.write_bytes(path.read_bytes() + b"\n% corrected version\n")
    os.utime(path, (time.time() + 5, time.time() + 5))
    (second,) = harness.tick().run_requests
    assert second.partition_key == first.partition_key == "PMC1216327.pdf"
    assert second.run_key != first.run_key
    assert harness.partitions == {"PMC1216327.pdf"}


def test_removed_source_is_recorded_and_nothing_is_deleted(instance, knowledge_base, settings_for, atlas_for):
    (path,) = copy_into(knowledge_base, "rct/PMC1216327.pdf")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    harness.tick()
    path.unlink()
    result = harness.tick()
    # no document runs again; the aggregates are refreshed so that the exports say the source is gone
    assert [request.job_name for request in result.run_requests] == ["aggregates_job"]
    (observation,) = result.asset_events
    assert observation.partition == "PMC1216327.pdf" and observation.metadata["source_removed"].value is True
    assert harness.tick().run_requests == []  # once
    assert harness.partitions == {"PMC1216327.pdf"}  # the partition (and what it holds) stays
    assert load_catalog(harness.atlas.store()).entries["PMC1216327.pdf"].removed is True


def test_duplicate_bytes_are_one_partition(instance, knowledge_base, settings_for, atlas_for):
    copy_into(knowledge_base, "rct/PMC1216327.pdf")
    copy_into(knowledge_base / "again", "rct/PMC1216327.pdf", rename={"rct/PMC1216327.pdf": "juice trial.pdf"})
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    result = harness.tick()
    assert harness.partitions == {"PMC1216327.pdf"} and len(result.run_requests) == 1
    again = harness.tick()  # the copy is known: no run, no aggregates refresh, nothing hashed again
    assert again.run_requests == [] and "0 duplicate" in again.skip_reason.skip_message


def test_hundreds_of_files_are_batched_across_ticks(instance, knowledge_base, settings_for, atlas_for):
    for number in range(450):
        (knowledge_base / f"abstract {number:04}, v1.txt").write_text(f"Trial abstract number {number}.\n")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for, sensor_max_runs_per_tick="200")
    started = time.perf_counter()
    first = harness.tick()
    elapsed = time.perf_counter() - started
    assert len(harness.partitions) == 450  # every document is known at once...
    assert len(first.run_requests) == 200  # ...and runs are requested in batches
    assert elapsed < 30, f"a tick over 450 new files took {elapsed:.1f} s (sensor timeout is 60 s)"
    assert len(harness.tick().run_requests) == 200
    assert len(harness.tick().run_requests) == 50
    assert harness.tick().run_requests == []
    assert all("," not in key and " " not in key for key in harness.partitions)


def test_documents_already_extracted_by_atlas_run_are_not_run_again(instance, knowledge_base, settings_for, atlas_for):
    (path, _) = copy_into(knowledge_base, "html/plos_one_article.html", "rct_jats/PMC3648394.nxml")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    scan = refresh_catalog(harness.atlas.open_knowledge_base(), harness.atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, list(scan.catalog.entries))
    job = harness.defs.resolve_job_def("document_job")
    assert job.execute_in_process(partition_key="plos_one_article.html", instance=instance).success  # as `atlas run`
    result = harness.tick()
    assert [r.partition_key for r in result.run_requests] == ["PMC3648394.nxml"]  # the other one is current
    assert "plos_one_article.html" in json.loads(harness.cursor)
    path.write_text(path.read_text() + "<!-- corrected -->")
    os.utime(path, (time.time() + 5, time.time() + 5))
    assert [r.partition_key for r in harness.tick().run_requests] == ["plos_one_article.html"]


def test_a_knowledge_base_that_disappears_is_a_skipped_tick_not_a_crash(
    instance, knowledge_base, settings_for, atlas_for
):
    copy_into(knowledge_base, "html/plos_one_article.html")
    harness = make_harness(instance, knowledge_base, settings_for, atlas_for)
    assert len(harness.tick().run_requests) == 1
    cursor = harness.cursor
    shutil.rmtree(knowledge_base)  # an unmounted share, a deleted folder
    result = harness.tick()
    assert result.run_requests == [] and "knowledge base not found" in result.skip_reason.skip_message
    assert harness.cursor == cursor and "plos_one_article.html" in load_catalog(harness.atlas.store()).entries
    knowledge_base.mkdir()
    copy_into(knowledge_base, "html/plos_one_article.html")  # back: nothing runs again
    assert harness.tick().run_requests == []


def test_the_run_history_answers_for_a_whole_tick_of_documents(instance):
    """A tick may plan 10,000 documents (ATLAS_SENSOR_MAX_RUNS_PER_TICK's maximum): the run history is read within
    Dagster's 10,000 records a read (asking 3 per document for 4,000 raised), and a document materialised many
    times never hides another's latest materialisation."""
    stamp = "2026-11-27T00:00:00+00:00"
    entries = [
        CatalogEntry(key=f"note-{n:05d}.txt", source_path=f"note-{n:05d}.txt", sha256=f"{n:064x}", size=1,
                     marker="1", first_seen=stamp, updated=stamp)
        for n in range(4000)
    ]  # fmt: skip
    instance.add_dynamic_partitions(documents_partitions.name, [entry.key for entry in entries])

    def extracted(entry, sha256):
        event = dg.AssetMaterialization(
            asset_key="document_extraction",
            partition=entry.key,
            metadata={"sha256": sha256, "reason": ""},
            tags={"dagster/code_version": "v1"},
        )
        instance.report_runless_asset_event(event)

    first, busy = entries[0], entries[1]
    extracted(first, first.sha256)
    for _ in range(8):  # another document extracted again and again since: 8 newer records than the first's
        extracted(busy, "0" * 64)
    assert already_extracted(instance, entries[:2], "v1") == {first.key}  # the busy one: other bytes
    assert already_extracted(instance, entries, "v1") == {first.key}
    assert already_extracted(instance, entries, "v2") == set()  # another extraction version
