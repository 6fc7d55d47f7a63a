"""The floors of the code hold (pyproject.toml, ``[tool.importlinter]``): each package imports only the floors below
it — core at the bottom, then store, the library stages, the read model, outputs and search, the settings (above the
library, whose value objects give them their defaults), the Deployment, the Dagster floor, the commands and apps —,
the library never imports Dagster, the Dagster floor, the review page and the commands never read a setting (they
are given a Deployment), and no two modules import each other, counting imports inside functions
too. The same check fails on back-edges and a cycle planted in a copy of the package."""

import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from atlas_pipeline.config.settings import PROJECT_ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}
    command = [str(LINT_IMPORTS), "--no-cache", "--config", str(PROJECT_ROOT / "pyproject.toml")]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_the_layer_contracts_hold():
    result = _lint(PROJECT_ROOT, PROJECT_ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_every_unit_of_the_package_has_its_floor():
    """A new package or module cannot slip past the rule by being left out of it."""
    contract = tomllib.loads((PROJECT_ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"][0]
    named = {name.strip() for floor in contract["layers"] for name in floor.replace("|", ":").split(":")}
    package = PROJECT_ROOT / "atlas_pipeline"
    units = {
        f"atlas_pipeline.{path.stem}"
        for path in package.iterdir()
        if (path.is_dir() and (path / "__init__.py").exists()) or (path.suffix == ".py" and path.stem != "__init__")
    }
    assert units - named == set(), "units without a floor"
    assert "atlas_pipeline.deployment" in named


def test_a_planted_back_edge_breaks_them(tmp_path):
    copy = tmp_path / "atlas_pipeline"
    shutil.copytree(PROJECT_ROOT / "atlas_pipeline", copy, ignore=shutil.ignore_patterns("__pycache__"))
    settings = copy / "config" / "settings.py"
    planted = "\n\ndef _planted():\n    from atlas_pipeline.deployment import Deployment\n\n    return Deployment\n"
    settings.write_text(settings.read_text() + planted)  # hidden in a function: counted all the same
    plain = copy / "parsing" / "plain.py"
    plain.write_text(plain.read_text() + "\n\ndef _planted_too():\n    import dagster\n\n    return dagster\n")
    llm = copy / "extraction" / "llm" / "client.py"  # a stage importing a later one: the order within the library
    llm.write_text(
        llm.read_text()
        + "\n\ndef _planted_three():\n    from atlas_pipeline.outputs import exports\n\n    return exports\n"
    )
    numbers = copy / "core" / "numbers.py"  # core imports nothing above it, not even the settings
    numbers.write_text(
        numbers.read_text()
        + "\n\ndef _planted_four():\n    from atlas_pipeline.config import settings\n\n    return settings\n"
    )
    sensors = copy / "defs" / "sensors.py"  # the Dagster floor reading a setting itself
    sensors.write_text(sensors.read_text() + "\n\nfrom atlas_pipeline.config.settings import load_settings  # noqa\n")
    status = copy / "cli" / "status.py"  # a command reading a setting itself, not through its Deployment
    status.write_text(status.read_text() + "\n\nfrom atlas_pipeline.config.settings import load_settings  # noqa\n")
    entries = copy / "search" / "entries.py"  # a cycle: refresh imports entries, entries now imports refresh
    entries.write_text(
        entries.read_text()
        + "\n\ndef _planted_cycle():\n    from atlas_pipeline.search import refresh\n\n    return refresh\n"
    )
    result = _lint(tmp_path, tmp_path)
    said = result.stdout + result.stderr
    assert result.returncode != 0, said
    assert "atlas_pipeline.config.settings -> atlas_pipeline.deployment" in said
    assert "atlas_pipeline.parsing.plain -> dagster" in said
    assert "atlas_pipeline.extraction.llm.client -> atlas_pipeline.outputs.exports" in said
    assert "atlas_pipeline.core.numbers -> atlas_pipeline.config.settings" in said
    assert "atlas_pipeline.defs.sensors -> atlas_pipeline.config.settings" in said
    assert "atlas_pipeline.cli.status -> atlas_pipeline.config.settings" in said
    assert "No cycles are allowed in atlas_pipeline.search" in said
    assert "4 broken" in said
