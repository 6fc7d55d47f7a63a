"""The Dagster instance the CLI uses: ``$DAGSTER_HOME`` (default ``var/dagster_home``) with the project's config."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from atlas_pipeline.settings import PROJECT_ROOT

DEFAULT_HOME = Path("var/dagster_home")


def project_file(name: str) -> Path:
    """A top-level project file (``dagster.yaml``, ``workspace.yaml``) from the checkout or the working directory."""
    for candidate in (PROJECT_ROOT / name, Path.cwd() / name):
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"{name} not found in {PROJECT_ROOT} or {Path.cwd()}")


def prepare_dagster_home(instance_config: str = "") -> Path:
    """Make sure ``$DAGSTER_HOME`` is set, exists, and holds a ``dagster.yaml``: when absent, a copy of
    ``instance_config`` (ATLAS_INSTANCE_CONFIG, e.g. ``deploy/postgres/dagster.yaml``) or of the embedded default."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    config = home / "dagster.yaml"
    if not config.exists():
        source = Path(instance_config).expanduser() if instance_config else project_file("dagster.yaml")
        if not source.is_file():
            raise FileNotFoundError(f"ATLAS_INSTANCE_CONFIG={instance_config!r}: no such instance config file")
        shutil.copyfile(source, config)
    return home
