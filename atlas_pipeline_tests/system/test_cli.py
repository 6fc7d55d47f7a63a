"""The ``atlas`` command as a user runs it: a real instance under a temporary DAGSTER_HOME."""

import os
import socket
import stat
import subprocess

import dagster as dg
import polars as pl

from atlas_pipeline.ops.instance import project_file
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import BIN, run_atlas
from scripted_servers.processes import local_env


def test_run_then_status(tmp_path, knowledge_base):
    copy_into(
        knowledge_base,
        "rct/PMC1574360.pdf",
        "awkward/malformed/qpdf_bad1.pdf",
        "awkward/derived/PMC3508963_user_password_aes256.pdf",
    )
    env = {"DAGSTER_HOME": str(tmp_path / "home"), **local_env(tmp_path, knowledge_base)}
    result = run_atlas("run", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "scan: 3 new" in out
    assert "[1/3] PMC1574360.pdf: done" in out
    assert "PMC3508963_user_password_aes256.pdf: skipped: parse: encrypted, needs a password" in out
    assert "qpdf_bad1.pdf: failed: snapshot: not a PDF (no %PDF- header)" in out
    assert "3 documents: 3 finished, 0 open" in out
    # the failed document's run fails at document_status (red in the UI) without a stack trace on the console
    assert "Stack Trace" not in out + result.stderr and "STEP_FAILURE" not in out + result.stderr
    for fmt in ("xlsx", "csv", "parquet", "jsonl"):
        assert str(tmp_path / "exports" / f"atlas_documents.{fmt}") in out
    frame = pl.read_parquet(tmp_path / "exports" / "atlas_documents.parquet")
    assert sorted(frame["status"].to_list()) == ["done", "failed", "skipped"]
    assert (tmp_path / "home" / "dagster.yaml").read_text() == project_file("dagster.yaml").read_text()

    status = run_atlas("status", "--documents", env=env, cwd=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "3 documents: 3 finished, 0 open" in status.stdout
    assert "PMC1574360.pdf" in status.stdout and "done" in status.stdout

    # exports are for people: readable by the group and others, like any file a tool writes
    exports = sorted((tmp_path / "exports").iterdir())
    assert exports and {oct(stat.S_IMODE(path.stat().st_mode)) for path in exports} == {"0o644"}

    # an unchanged knowledge base: nothing is run again (the sensor agrees), and --force redoes what it names
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        runs_before = len(instance.get_runs())
    again = run_atlas("run", env=env, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "3 unchanged document(s) already extracted with this version: not run again" in again.stdout
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        assert len(instance.get_runs()) == runs_before
    forced = run_atlas("run", "--only", "PMC1574360.pdf", "--force", env=env, cwd=tmp_path)
    assert forced.returncode == 0 and "[1/1] PMC1574360.pdf: done" in forced.stdout, forced.stdout + forced.stderr

    # a key that is not there is an error before anything is scanned, and nothing is rewritten (the catalog neither)
    written = {path.name: path.stat().st_mtime_ns for path in exports}
    catalog = tmp_path / "artifacts" / "catalog" / "documents.json"
    scanned = catalog.stat().st_mtime_ns
    missing = run_atlas("run", "--only", "NOPE.pdf", env=env, cwd=tmp_path)
    assert missing.returncode == 2 and "atlas: no document NOPE.pdf in" in missing.stderr, missing.stderr
    assert "(known: PMC1574360.pdf" in missing.stderr and "scan:" not in missing.stdout
    assert {path.name: path.stat().st_mtime_ns for path in exports} == written
    assert catalog.stat().st_mtime_ns == scanned

    # a misspelled setting is named, with the one that was meant
    typo = run_atlas("status", env={**env, "ATLAS_OCRR": "false"}, cwd=tmp_path)
    assert typo.returncode == 0
    assert "ATLAS_OCRR is not an Atlas setting and is ignored (did you mean ATLAS_OCR?)" in typo.stderr


def test_invalid_setting_exits_2_naming_the_variable(tmp_path):
    result = run_atlas("run", env={"ATLAS_OCR": "sometimes", "DAGSTER_HOME": str(tmp_path)}, cwd=tmp_path)
    assert result.returncode == 2
    assert "ATLAS_OCR='sometimes'" in result.stderr and "valid boolean" in result.stderr


def test_missing_knowledge_base_is_a_clear_error(tmp_path):
    env = {"ATLAS_KNOWLEDGE_BASE": str(tmp_path / "nowhere"), "DAGSTER_HOME": str(tmp_path / "home")}
    result = run_atlas("run", env={**env, "ATLAS_ARTIFACTS": str(tmp_path / "a")}, cwd=tmp_path)
    assert result.returncode == 2
    assert f"knowledge base not found: {tmp_path / 'nowhere'}" in result.stderr
    assert "Traceback" not in result.stderr


def test_settings_command_lists_every_variable(tmp_path):
    result = run_atlas("settings", env={}, cwd=tmp_path)
    assert result.returncode == 0
    assert "ATLAS_KNOWLEDGE_BASE" in result.stdout and "ATLAS_SENSOR_INTERVAL_SECONDS" in result.stdout


def test_workspace_definitions_validate(tmp_path):
    result = subprocess.run(
        [str(BIN / "dagster"), "definitions", "validate", "-w", str(project_file("workspace.yaml"))],
        env={**os.environ, "DAGSTER_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Validation successful for code location atlas_pipeline" in result.stdout + result.stderr


def test_review_on_a_busy_port_says_so_before_claiming_to_serve(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"DAGSTER_HOME": str(tmp_path / "home"), "ATLAS_ARTIFACTS": str(tmp_path / "artifacts")}
        result = run_atlas("review", "--port", str(port), env=env, cwd=tmp_path)
    assert result.returncode == 2 and "review page on" not in result.stdout
    assert f"cannot serve the review page on 127.0.0.1:{port}: the port is in use" in result.stderr
