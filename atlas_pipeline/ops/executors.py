"""Which Dagster executor runs the jobs' steps, chosen by ``ATLAS_EXECUTOR`` (+ ``ATLAS_EXECUTOR_CONFIG``).

The default runs a document's three steps in the run's own process: per-document runs are small, and a process or
pod per step would cost more than the step. Scale out by launching runs elsewhere (``K8sRunLauncher`` in the
instance config) before reaching for a step executor; both are documented in ``docs/operations.md``.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import dagster as dg
import yaml

from atlas_pipeline.config.settings import SettingsError
from atlas_pipeline.ops.instance import config_errors

# ATLAS_EXECUTOR value → (module, attribute, pip package)
EXECUTORS: dict[str, tuple[str, str, str]] = {
    "in_process": ("dagster", "in_process_executor", "dagster"),
    "multiprocess": ("dagster", "multiprocess_executor", "dagster"),
    "k8s": ("dagster_k8s", "k8s_job_executor", "dagster-k8s"),
    "celery": ("dagster_celery", "celery_executor", "dagster-celery"),
}


def load_executor_config(path: str) -> dict:
    if not path:
        return {}
    try:
        loaded = yaml.safe_load(Path(path).read_text())
    except (OSError, yaml.YAMLError) as error:
        raise SettingsError(f"ATLAS_EXECUTOR_CONFIG={path!r}: cannot read it as YAML ({error})") from None
    if isinstance(loaded, dict) and "execution" in loaded:  # the shape dagster-celery's workers read
        execution = loaded["execution"] if isinstance(loaded["execution"], dict) else {}
        loaded = execution.get("config") or execution.get("celery")  # "celery": its legacy key
        if not loaded:
            raise SettingsError(f"ATLAS_EXECUTOR_CONFIG={path!r}: `execution:` needs a `config:` mapping")
    if not isinstance(loaded, dict):
        raise SettingsError(f"ATLAS_EXECUTOR_CONFIG={path!r}: expected a mapping of executor config")
    return loaded


def build_executor(name: str, config_path: str = "") -> dg.ExecutorDefinition:
    """The executor definition, configured from the YAML file and validated now (not at the first run)."""
    module_name, attribute, package = EXECUTORS[name]
    try:
        executor = getattr(importlib.import_module(module_name), attribute)
    except ImportError:
        raise SettingsError(
            f"ATLAS_EXECUTOR={name!r} needs the {package} package: pip install 'atlas-pipeline[scale-out]'"
        ) from None
    config = load_executor_config(config_path)
    if not config:
        return executor
    problems = config_errors(executor.config_schema.config_type, config)
    if problems:
        raise SettingsError(f"ATLAS_EXECUTOR_CONFIG={config_path!r} is not valid {name} config: {'; '.join(problems)}")
    return executor.configured(config)
