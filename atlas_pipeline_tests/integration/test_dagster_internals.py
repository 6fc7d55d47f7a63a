"""Dagster's private names are taken in one module and checked against one Dagster version: an upgrade fails here
first, with what to do, instead of somewhere in a run."""

import ast
from pathlib import Path

import dagster

from atlas_pipeline import dagster_internals
from atlas_pipeline.config.settings import PROJECT_ROOT


def test_the_private_names_were_checked_against_this_dagster():
    assert dagster.__version__ == dagster_internals.CHECKED_WITH, (
        f"Dagster is {dagster.__version__}, atlas_pipeline/dagster_internals.py was checked against "
        f"{dagster_internals.CHECKED_WITH}: check each name there still means the same, then move CHECKED_WITH"
    )
    for name in dagster_internals.__all__:
        assert getattr(dagster_internals, name) is not None, name
    for lazy in (
        dagster_internals.instance_config_tools,
        dagster_internals.run_storage_tables,
        dagster_internals.workspace_tools,
    ):
        assert all(thing is not None for thing in lazy()), lazy.__name__


def test_no_other_module_reaches_into_dagster_privates():
    offenders = []
    for path in sorted((PROJECT_ROOT / "atlas_pipeline").rglob("*.py")):
        if path.name == "dagster_internals.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.Attribute) and node.attr == "_metadata_accumulator":
                names = ["._metadata_accumulator"]
            private = [n for n in names if n.startswith(("dagster._", "dagster_shared", "._"))]
            if private:
                offenders.append(f"{Path(path).relative_to(PROJECT_ROOT)}:{node.lineno}: {private[0]}")
    assert offenders == []
