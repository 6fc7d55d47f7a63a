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


def prepare_dagster_home() -> Path:
    """Make sure ``$DAGSTER_HOME`` is set, exists, and holds a ``dagster.yaml`` (copied from the project if absent)."""
    home = Path(os.environ.get("DAGSTER_HOME") or DEFAULT_HOME).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True)
    os.environ["DAGSTER_HOME"] = str(home)
    config = home / "dagster.yaml"
    if not config.exists():
        shutil.copyfile(project_file("dagster.yaml"), config)
    return home
