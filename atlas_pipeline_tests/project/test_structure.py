"""The structure a newcomer relies on: every module imports on its own (no import cycles), ``atlas status`` stays
light, and each setting is defined once — the Dagster resources and the LLM client take theirs by name."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
import textwrap

import dagster as dg

from atlas_pipeline.config.settings import PROJECT_ROOT, SETTINGS, load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.asset_names import AGGREGATE_ASSET_NAMES, DOCUMENT_ASSET_NAMES
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.extraction.llm import LLMConfig
from atlas_pipeline.parsing import ParseOptions
from atlas_pipeline.parsing.bounded import ParseLimits
from atlas_pipeline.parsing.providers import ProviderLimits
from atlas_pipeline.sources.politeness import Politeness

PACKAGE = PROJECT_ROOT / "atlas_pipeline"


def _modules() -> list[str]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PROJECT_ROOT).with_suffix("").parts
        found.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return found


def test_every_module_imports_first_and_alone():
    """Each module imported first in a fresh interpreter (a forked child of one that imported nothing of ours): an
    import cycle shows up as the ImportError it causes when the cycle is entered from the wrong side. The parent
    loads beforehand every third-party module the package uses (listed by a throwaway child), so each child imports
    only our modules: the same check, a second a module cheaper."""
    script = textwrap.dedent(
        """
        import importlib, os, sys, traceback
        OURS = ("atlas_pipeline", "atlas_pipeline_tests", "__main__")
        read, write = os.pipe()
        if os.fork() == 0:
            os.close(read)
            before = set(sys.modules)
            for name in sys.argv[1:]:
                try:
                    importlib.import_module(name)
                except BaseException:
                    pass
            theirs = [m for m in sys.modules if m not in before and not m.startswith(OURS)]
            os.write(write, "\\n".join(theirs).encode())
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as listing:
            theirs = listing.read().split()
        os.wait()
        for name in theirs:
            try:
                importlib.import_module(name)
            except BaseException:
                pass
        assert not [m for m in sys.modules if m.startswith(OURS[:2])], "a third-party module imported ours"
        failed = []
        for name in sys.argv[1:]:
            pid = os.fork()
            if pid == 0:
                try:
                    importlib.import_module(name)
                except BaseException:
                    traceback.print_exc()
                    os._exit(1)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            if status:
                failed.append(name)
        print("FAILED", *failed)
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script, *_modules()], capture_output=True, text=True, timeout=600, cwd=PROJECT_ROOT
    )
    assert result.returncode == 0 and result.stdout.strip() == "FAILED", result.stdout + result.stderr[-4000:]
    assert len(_modules()) > 40  # the walk found the package


def test_every_error_atlas_raises_on_purpose_derives_from_atlas_error():
    """One root (``core.errors.AtlasError``): ``except AtlasError`` catches every error Atlas means to say, and each
    is still the built-in kind it is (a ``ValueError``, an ``OSError``)."""
    import importlib
    import inspect

    from atlas_pipeline.core.errors import AtlasError

    errors = {}
    for name in _modules():
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for _, value in inspect.getmembers(module, inspect.isclass):
            if value.__module__ == name and issubclass(value, Exception) and not issubclass(value, Warning):
                errors[f"{name}.{value.__name__}"] = value
    assert len(errors) > 30  # the walk found them
    assert [name for name, error in errors.items() if not issubclass(error, AtlasError)] == []  # warnings aside
    from atlas_pipeline.config.settings import SettingsError
    from atlas_pipeline.store.files import StoreError

    assert issubclass(SettingsError, ValueError) and issubclass(StoreError, OSError)


def test_status_does_not_load_the_pdf_stack_or_the_llm_client(tmp_path):
    script = textwrap.dedent(
        """
        import sys
        from atlas_pipeline.cli import main
        try:
            main(["status"])
        except SystemExit:
            pass
        print("LOADED", *sorted(m for m in ("pymupdf", "pymupdf4llm", "openai", "bs4") if m in sys.modules))
        """
    )
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "home"), "ATLAS_ARTIFACTS": str(tmp_path / "artifacts")}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert "0 documents" in result.stdout, result.stdout + result.stderr
    assert result.stdout.strip().endswith("LOADED"), result.stdout


def test_the_resource_carries_every_setting_and_makes_the_same_deployment(monkeypatch):
    monkeypatch.setenv("ATLAS_LLM_API_KEY", "sk-secret")
    settings = load_settings({"ATLAS_LLM_API_KEY": "sk-secret", "ATLAS_OCR": "false", "ATLAS_LLM_CONCURRENCY": "3"})
    resource = AtlasResource.from_deployment(Deployment.from_settings(settings))
    assert "sk-secret" not in str(resource.environment) and "ATLAS_LLM_API_KEY" not in resource.environment
    secrets = {name for name, setting in SETTINGS.items() if setting.field.annotation.__name__ == "SecretStr"}
    assert secrets <= set(AtlasResource.model_fields), "every secret an EnvVar field of the resource"
    assert "llm_api_key" in secrets and "llm_second_api_key" in secrets
    assert set(resource.environment) == {f"ATLAS_{name.upper()}" for name in set(SETTINGS) - secrets}
    with dg.build_resources({"atlas": resource}) as built:
        deployment = built.atlas.deployment
    assert deployment.settings == settings  # secrets resolved from the environment at run time
    assert deployment.llm_config().api_key == "sk-secret" and deployment.llm_config().concurrency == 3
    assert deployment.extraction_version() == Deployment.from_settings(settings).extraction_version()


def test_the_settings_take_their_defaults_from_the_library_value_objects():
    """A knob is given its default once, by the library class that uses it; the settings of a deployment that sets
    nothing make exactly the library's own objects."""
    deployment = Deployment.from_settings(load_settings({}))
    assert dataclasses.replace(deployment.llm_config(), base_url="") == LLMConfig(base_url="")
    assert deployment.parse_options() == ParseOptions()
    assert deployment.parse_limits() == ParseLimits()
    assert deployment.provider_limits() == ProviderLimits()
    assert deployment.politeness() == Politeness()


def test_the_asset_names_others_refer_to_are_the_assets_defined(tmp_path):
    defs = build_definitions(load_settings({"ATLAS_ARTIFACTS": str(tmp_path / "a"), "ATLAS_EXPORTS": str(tmp_path)}))
    defined = {key.to_user_string() for key in defs.resolve_all_asset_keys()}
    assert defined == set(DOCUMENT_ASSET_NAMES) | set(AGGREGATE_ASSET_NAMES)


def test_test_modules_share_helpers_through_helper_modules_only():
    tests = sorted((PROJECT_ROOT / "atlas_pipeline_tests").rglob("test_*.py"))
    imports_a_test = re.compile(r"^\s*(from|import) atlas_pipeline_tests\.[\w.]*\btest_", re.MULTILINE)
    offenders = [path.name for path in tests if imports_a_test.search(path.read_text())]
    assert tests and offenders == []


def test_tests_live_in_the_folder_of_their_kind():
    """unit/ (one library package each, no Dagster instance), integration/, system/, project/; shared code in
    support/; nothing at the top but the conftest. The scripted servers are a package of their own
    (``scripted_servers``) that the tests and the benchmarks both import: no benchmark imports the test package's
    servers."""
    tests_root = PROJECT_ROOT / "atlas_pipeline_tests"
    kinds = {"unit", "integration", "system", "project"}
    for path in tests_root.rglob("test_*.py"):
        kind = path.relative_to(tests_root).parts[0]
        assert kind in kinds, path
        if kind == "unit":
            package = path.relative_to(tests_root).parts[1]
            assert (PACKAGE / package).is_dir(), f"{path}: unit tests mirror a package of atlas_pipeline"
    top = {path.name for path in tests_root.glob("*.py")}
    assert top == {"__init__.py", "conftest.py"}, top
    assert not (tests_root / "servers").exists()
    benchmarks = "\n".join(path.read_text() for path in (PROJECT_ROOT / "bench").glob("*.py"))
    assert "scripted_servers" in benchmarks and "atlas_pipeline_tests.servers" not in benchmarks
