"""Two runs of one document at once — `atlas run` twice, or the sensor and a click in the UI — take turns and leave
records that agree with each other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import dagster as dg

from atlas_pipeline.knowledge.catalog import load_catalog
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, ParseRecord, SnapshotRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import run_atlas
from scripted_servers.processes import local_env

KEY = "PMC1216327.pdf"


def test_two_runs_of_one_document_take_turns_and_agree(tmp_path, knowledge_base):
    copy_into(knowledge_base, f"rct/{KEY}", "html/plos_one_article.html")
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    assert run_atlas("run", env=env, cwd=tmp_path).returncode == 0
    atlas = str(Path(sys.executable).parent / "atlas")
    runs = [
        subprocess.Popen(
            [atlas, "run", "--only", KEY, "--force"],
            env={**os.environ, **env},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [process.communicate(timeout=600)[0] for process in runs]
    assert [process.returncode for process in runs] == [0, 0], outputs
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        records = instance.get_run_records(dg.RunsFilter(tags={"dagster/partition": KEY}), ascending=True)
        first, second = records[-2:]
        assert first.dagster_run.status == second.dagster_run.status == dg.DagsterRunStatus.SUCCESS
        waited = [
            entry
            for entry in instance.all_logs(second.dagster_run.run_id)
            if "processing the same document" in (entry.user_message or "")
        ]
        overlapped = second.start_time is not None and first.end_time is not None and second.start_time < first.end_time
        # on a loaded machine the second run may only start once the first is over: then there is nothing to wait for
        assert waited or not overlapped, "the younger run overlapped the older one without waiting for it"
        snapshot_done = [
            entry.timestamp
            for entry in instance.all_logs(second.dagster_run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
            if entry.dagster_event.asset_key == dg.AssetKey("document_snapshot")
        ]
        assert snapshot_done[0] >= first.end_time  # its snapshot came after the older run had finished
    store = Store(env["ATLAS_ARTIFACTS"])
    snapshot = read_record(store, KEY, "snapshot", SnapshotRecord)
    parse = read_record(store, KEY, "parse", ParseRecord)
    extraction = read_record(store, KEY, "extraction", ExtractionRecord)
    assert snapshot.sha256 == parse.sha256 == extraction.sha256 == load_catalog(store).entries[KEY].sha256
    assert parse.cached  # the second run found the first's parse: not done twice
