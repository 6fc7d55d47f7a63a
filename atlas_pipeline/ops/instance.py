"""The Dagster instance the CLI uses: ``$DAGSTER_HOME`` (default ``var/dagster_home``) with the project's config."""

from __future__ import annotations

import importlib
import os
import shutil
import tempfile
import warnings
from pathlib import Path

from atlas_pipeline.config.review_folder import find_review
from atlas_pipeline.config.settings import PROJECT_ROOT, SettingsWarning
from atlas_pipeline.core.errors import AtlasError

DEFAULT_HOME = Path("var/dagster_home")


def project_file(name: str) -> Path:
    """A top-level project file (``dagster.yaml``, ``workspace.yaml``) from the checkout or the working directory."""
    for candidate in (PROJECT_ROOT / name, Path.cwd() / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{name} not found in {PROJECT_ROOT} or {Path.cwd()}")


def prepare_dagster_home(instance_config: str = "") -> Path:
    """Make sure ``$DAGSTER_HOME`` is set — to the review folder's instance in a review (``config.review_folder``) —,
    exists, and holds a ``dagster.yaml``: when absent, a copy of
    ``instance_config`` (ATLAS_INSTANCE_CONFIG, e.g. ``deploy/postgres/dagster.yaml``) or of the embedded default."""
    review, given = find_review(), os.environ.get("DAGSTER_HOME", "").strip()
    home = (review.dagster_home if review else Path(given or DEFAULT_HOME)).expanduser().resolve()
    if review is not None and given and Path(given).expanduser().resolve() != home:
        warnings.warn(  # a review's instance is its own: never another review's, never silently
            f"DAGSTER_HOME={given} is not this review's instance: {home} is used ([review] dagster_home in "
            f"{review.file} puts it elsewhere)",
            SettingsWarning,
            stacklevel=2,
        )
    try:
        home.mkdir(parents=True, exist_ok=True)
        os.environ["DAGSTER_HOME"] = str(home)
        config = home / "dagster.yaml"
        if not config.exists():
            source = Path(instance_config).expanduser() if instance_config else project_file("dagster.yaml")
            if not source.is_file():
                raise FileNotFoundError(f"ATLAS_INSTANCE_CONFIG={instance_config!r}: no such instance config file")
            shutil.copyfile(source, config)
        handle, probe = tempfile.mkstemp(dir=home, prefix=".atlas-write-probe-")  # unique: two commands at once
        os.close(handle)
        os.unlink(probe)
    except FileNotFoundError:
        raise
    except OSError as error:
        raise InstanceHomeError(
            f"DAGSTER_HOME={home} cannot be used: {error.strerror or error} — point DAGSTER_HOME at a folder you "
            "can write to"
        ) from None
    return home


class InstanceHomeError(AtlasError, FileNotFoundError):
    """DAGSTER_HOME cannot be created or written (read-only, a file in the way, permissions)."""


CONFIGURABLE_SECTIONS = (
    "run_launcher",
    "run_coordinator",
    "compute_logs",
    "local_artifact_storage",
    "run_storage",
    "event_log_storage",
    "schedule_storage",
    "scheduler",
)


def config_errors(config_type: object, value: object) -> list[str]:
    """Schema errors of ``value`` against a Dagster config type (``{env: X}`` sources are not resolved)."""
    from atlas_pipeline.dagster_internals import validate_config

    result = validate_config(config_type, value)
    return [] if result.success else [error.message for error in result.errors]


def validate_instance_config(path: Path) -> list[str]:
    """Problems with an instance config file (``dagster.yaml``): the top-level schema as Dagster checks it, then
    the config of every class it names (run launcher, coordinator, storages, …), imported from its package.
    Nothing is connected to, so a Kubernetes or Celery config can be checked on a laptop."""
    from atlas_pipeline.dagster_internals import DagsterInvalidConfigError, instance_config_tools

    dagster_instance_config, load_yaml_from_path = instance_config_tools()

    path = Path(path)
    try:
        dagster_instance_config(str(path.parent), path.name)
    except DagsterInvalidConfigError as error:
        return [f"{path}: {error}"]
    raw = load_yaml_from_path(str(path)) or {}
    problems = []
    for section in CONFIGURABLE_SECTIONS:
        entry = raw.get(section)
        if not entry:
            continue
        try:
            module = importlib.import_module(entry["module"])
            cls = getattr(module, entry["class"])
        except (ImportError, AttributeError) as error:
            problems.append(f"{path}: {section}: cannot load {entry['module']}.{entry['class']} ({error})")
            continue
        problems += [
            f"{path}: {section}: {message}" for message in config_errors(cls.config_type(), entry.get("config") or {})
        ]
    return problems
