"""The scale-out snippets of docs/operations.md are valid: instance configs against Dagster's schemas and the
named classes' own schemas, the K8s run launcher and the Celery instance actually built on a real PostgreSQL, and
the executor configs accepted by the definitions (ATLAS_EXECUTOR / ATLAS_EXECUTOR_CONFIG)."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT, SettingsError, load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.ops.executors import build_executor
from atlas_pipeline.ops.instance import validate_instance_config
from atlas_pipeline_tests.support.helpers import run_atlas

DEPLOY = PROJECT_ROOT / "deploy"
INSTANCE_CONFIGS = [PROJECT_ROOT / "dagster.yaml", *sorted(DEPLOY.glob("*/dagster.yaml"))]
KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: test, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: test, user: {token: not-a-real-token}}]
contexts: [{name: test, context: {cluster: test, user: test, namespace: atlas}}]
current-context: test
"""


@pytest.mark.parametrize("path", INSTANCE_CONFIGS, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_instance_configs_are_valid(path):
    assert validate_instance_config(path) == []


def test_a_broken_snippet_is_reported_with_the_section_and_the_key(tmp_path):
    broken = (DEPLOY / "k8s" / "dagster.yaml").read_text().replace("fail_pod_on_run_failure", "fail_pod_on_failure")
    (tmp_path / "dagster.yaml").write_text(broken.replace("job_namespace: atlas", "job_namespace: [atlas]"))
    problems = validate_instance_config(tmp_path / "dagster.yaml")
    assert any("run_launcher" in p and 'unexpected config entry "fail_pod_on_failure"' in p for p in problems)
    assert any("run_launcher" in p and "job_namespace" in p for p in problems)
    result = run_atlas(
        "check-instance", str(tmp_path / "dagster.yaml"), str(DEPLOY / "k8s" / "dagster.yaml"), env={}, cwd=tmp_path
    )
    assert result.returncode == 1 and "deploy/k8s/dagster.yaml: valid" in result.stdout
    assert "fail_pod_on_failure" in result.stderr


def test_k8s_and_celery_instances_load_on_postgres(postgres, tmp_path, monkeypatch):
    for name, value in postgres.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "kubeconfig").write_text(KUBECONFIG)
    k8s_home, celery_home = tmp_path / "k8s", tmp_path / "celery"
    k8s_home.mkdir()
    config = (DEPLOY / "k8s" / "dagster.yaml").read_text()
    local = config.replace(
        "load_incluster_config: true", f"load_incluster_config: false\n    kubeconfig_file: {tmp_path}/kubeconfig"
    )
    (k8s_home / "dagster.yaml").write_text(local)
    with dg.DagsterInstance.from_config(str(k8s_home)) as instance:
        launcher = instance.run_launcher
        assert type(launcher).__name__ == "K8sRunLauncher"
        assert launcher.job_namespace == "atlas" and launcher.instance_config_map == "atlas-dagster-instance"
        assert "ATLAS_ARTIFACTS=s3://atlas-data/artifacts" in launcher.env_vars
        assert launcher.supports_check_run_worker_health  # run monitoring notices lost pods
        assert instance.run_monitoring_enabled and instance.run_retries_max_retries == 2
        assert type(instance.event_log_storage).__name__ == "PostgresEventLogStorage"
    celery_home.mkdir()
    shutil.copyfile(DEPLOY / "celery" / "dagster.yaml", celery_home / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(celery_home)) as instance:
        assert type(instance.run_storage).__name__ == "PostgresRunStorage"
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 16


@pytest.mark.parametrize("name", ["k8s", "celery"])
def test_executor_snippets_configure_the_jobs(name, monkeypatch, tmp_path):
    monkeypatch.setenv("ATLAS_CELERY_BROKER", "pyamqp://atlas@127.0.0.1//")
    monkeypatch.setenv("ATLAS_CELERY_BACKEND", "rpc://")
    config = str(DEPLOY / name / "executor.yaml")
    settings = load_settings(
        {"ATLAS_EXECUTOR": name, "ATLAS_EXECUTOR_CONFIG": config, "ATLAS_ARTIFACTS": str(tmp_path)}
    )
    defs = build_definitions(settings)
    for job in ("document_job", "aggregates_job"):
        assert defs.resolve_job_def(job).executor_def.name == build_executor(name).name
    # the whole code location loads the way the daemon loads it
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("dagster")),
            "definitions",
            "validate",
            "-w",
            str(PROJECT_ROOT / "workspace.yaml"),
        ],
        env={**os.environ, "ATLAS_EXECUTOR": name, "ATLAS_EXECUTOR_CONFIG": config, "DAGSTER_HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_invalid_executor_config_fails_at_load_with_the_variable(tmp_path):
    (tmp_path / "executor.yaml").write_text("job_namespace: atlas\nmax_concurent: 3\n")
    with pytest.raises(SettingsError, match=r"ATLAS_EXECUTOR_CONFIG=.*not valid k8s config.*max_concurent"):
        build_executor("k8s", str(tmp_path / "executor.yaml"))
    (tmp_path / "list.yaml").write_text("- a\n")
    with pytest.raises(SettingsError, match="expected a mapping"):
        build_executor("celery", str(tmp_path / "list.yaml"))


def test_the_operations_guide_starts_celery_workers_with_the_test_s_own_command():
    from atlas_pipeline.ops.instance import project_file
    from scripted_servers.processes import celery_worker_command, redis_command, webserver_command

    guide = project_file("docs/operations.md").read_text()
    assert " ".join(celery_worker_command("worker1")) in guide
    assert "dagster-daemon run -w workspace.yaml" in guide
    # the broker and the UI as the test starts them, with the guide's address, port and password variable
    redis = redis_command(6379, bind="0.0.0.0", password='"$REDIS_PASSWORD"')
    assert " ".join(part or '""' for part in redis) in guide
    assert "export ATLAS_CELERY_BROKER=redis://:$REDIS_PASSWORD@broker-host:6379/0" in guide
    assert " ".join(webserver_command("workspace.yaml", "0.0.0.0", 3000)) in guide
