"""Shared fixtures — temporary knowledge bases, settings, Dagster instances, one PostgreSQL server and one S3 server
for the whole session — and the markers that make a fast tier possible.

Markers follow from what a test needs, so nobody has to remember them: ``corpus`` (the test, a fixture or a helper
it uses names a ``corpus`` helper), ``postgres`` and ``s3`` (it uses those servers' fixtures), ``daemon`` (set by the
module: the real dagster-daemon). ``make test-fast`` runs the rest: no corpus, no servers, no daemon.
"""

from __future__ import annotations

import inspect
import itertools
import shutil
import types
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT, AtlasSettings, load_settings
from atlas_pipeline.core.hashing import sha256_of
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.parsing import ParseOptions
from atlas_pipeline.parsing.document_parse import parse_snapshot
from atlas_pipeline.store import layout
from atlas_pipeline.store.files import Store, filesystem_for
from atlas_pipeline.store.records import ExtractionRecord, SnapshotRecord, read_record
from atlas_pipeline_tests.support import corpus
from atlas_pipeline_tests.support.corpus import copy_into, corpus_file
from atlas_pipeline_tests.support.juice_trial import API_KEY, KEY
from scripted_servers.processes import (
    S3_CREDENTIALS,
    create_database,
    moto_s3_server,
    postgres_server,
    scripted_openai_server,
)

_CORPUS_HELPERS = (
    corpus.CORPUS,
    corpus.SEED_KB,
    corpus.corpus_file,
    corpus.parsed_corpus,
    corpus.corpus_scope,
    corpus.copy_into,
)
_DATABASE_NUMBERS = itertools.count(1)
_SERVER_FIXTURES = {"postgres": "postgres", "postgres_cluster": "postgres", "s3_endpoint": "s3"}


# the order in which `make test`'s two workers take the work: the longest first, the unit tests fill the gaps at the end
_TIER_ORDER = {"system": 1, "integration": 2, "project": 3, "unit": 4}


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _reads_corpus(item):
            item.add_marker(pytest.mark.corpus)
        for fixture, marker in _SERVER_FIXTURES.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(getattr(pytest.mark, marker))
        # `make test` runs two workers (pytest-xdist, --dist loadgroup): a module's tests stay together (its servers,
        # instances and definitions are made once), and every test under the real daemon runs on one worker, one at a
        # time — two daemons and their code servers at once on two cores are the machine's limit, not the code's. A
        # unit test is in no group: it needs nothing shared, so one long module (the quote sweeps) is split between
        # the workers instead of holding one of them
        if item.get_closest_marker("daemon"):
            item.add_marker(pytest.mark.xdist_group("daemon"))
        elif item.module.__name__.split(".")[1] != "unit":
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    items.sort(key=_schedule_rank)


def _schedule_rank(item: pytest.Item) -> int:
    if item.get_closest_marker("daemon"):
        return 0
    return _TIER_ORDER.get(item.module.__name__.split(".")[1], 5)


def _reads_corpus(item: pytest.Item) -> bool:
    """Whether the test — or a fixture or module function it uses, transitively — names a corpus helper."""
    function = getattr(item, "function", None)
    if function is None:
        return False
    fixture_info = getattr(item, "_fixtureinfo", None)
    functions = [function]
    for definitions in fixture_info.name2fixturedefs.values() if fixture_info else ():
        functions += [definition.func for definition in definitions]
    seen: set[types.CodeType] = set()
    while functions:
        function = inspect.unwrap(functions.pop())
        code = getattr(function, "__code__", None)
        if code is None or code in seen:
            continue
        seen.add(code)
        for name in _names(code):
            value = function.__globals__.get(name)
            if any(value is helper for helper in _CORPUS_HELPERS):
                return True
            helper = inspect.unwrap(value) if callable(value) else None  # through functools.cache & co
            if inspect.isfunction(helper) and helper.__module__ == function.__module__:
                functions.append(helper)  # a helper of the same module: follow it
    return False


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _names(constant)
    return names


@pytest.fixture(autouse=True)
def _own_llm_gate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test its own LLM request gate (extraction.llm.gate): a window one test halved never slows another; and no
    review folder of the developer's shell (``ATLAS_REVIEW``) under the tests."""
    monkeypatch.setenv("ATLAS_LLM_GATE_DIR", str(tmp_path / "llm-gate"))
    monkeypatch.delenv("ATLAS_REVIEW", raising=False)


@pytest.fixture
def knowledge_base(tmp_path: Path) -> Path:
    folder = tmp_path / "kb"
    folder.mkdir()
    return folder


@pytest.fixture
def settings_for(tmp_path: Path):
    """Settings pointing at a given knowledge base, with artifacts and exports under ``tmp_path``."""

    def make(kb: Path, **extra: str) -> AtlasSettings:
        env = {
            "ATLAS_KNOWLEDGE_BASE": str(kb),
            "ATLAS_ARTIFACTS": str(tmp_path / "artifacts"),
            "ATLAS_EXPORTS": str(tmp_path / "exports"),
            "ATLAS_LLM_GATE_DIR": str(tmp_path / "llm-gate"),
            "ATLAS_REVIEW_USERS": str(tmp_path / "review_users.json"),
        }
        env.update({f"ATLAS_{name.upper()}": value for name, value in extra.items()})
        return load_settings(env)

    return make


@pytest.fixture
def atlas_for(settings_for):
    def make(kb: Path, **extra: str) -> AtlasResource:
        return Deployment.from_settings(settings_for(kb, **extra))

    return make


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as value:
        yield value


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[dict[str, str]]:
    """One PostgreSQL server for the session (tests get their own database from ``postgres``)."""
    with postgres_server() as server:
        yield server.env


@pytest.fixture
def postgres(postgres_cluster, request) -> dict[str, str]:
    """A fresh database for this test on the session's server: its ``ATLAS_PG_*``/``PG*`` environment."""
    readable = "".join(c if c.isalnum() else "_" for c in request.node.name).lower()
    name = f"t{next(_DATABASE_NUMBERS)}_{readable}"[:60]
    return create_database(postgres_cluster, name)


@pytest.fixture(scope="session")
def _s3_server(tmp_path_factory) -> Iterator[str]:
    with moto_s3_server(tmp_path_factory.mktemp("moto")) as endpoint:
        yield endpoint


@pytest.fixture
def s3_endpoint(_s3_server, monkeypatch) -> str:
    """The session's S3-compatible server, emptied for this test; credentials and ATLAS_S3_ENDPOINT_URL set."""
    urllib.request.urlopen(urllib.request.Request(f"{_s3_server}/moto-api/reset", method="POST"), timeout=10)
    for name, value in {**S3_CREDENTIALS, "ATLAS_S3_ENDPOINT_URL": _s3_server}.items():
        monkeypatch.setenv(name, value)
    return _s3_server


@pytest.fixture(scope="module")
def llm_server(tmp_path_factory):
    with scripted_openai_server(tmp_path_factory.mktemp("llm")) as server:
        yield server


@pytest.fixture(scope="module")
def parse_cache(tmp_path_factory):
    """The juice trial parsed once, in a store whose ``parsed/`` tree each test starts from (saves a parse each)."""
    folder = tmp_path_factory.mktemp("parsed")
    store = Store(str(folder))
    data = corpus_file(f"rct/{KEY}").read_bytes()
    snapshot = SnapshotRecord(key=KEY, source_path=KEY, source_url=KEY, sha256=sha256_of(data), taken_at="-")
    store.write_bytes(layout.snapshot_path(snapshot.sha256), data)
    parse_snapshot(store, snapshot, ParseOptions())
    return folder / "parsed"


@pytest.fixture
def llm_deployment(llm_server, knowledge_base, settings_for, atlas_for, instance, monkeypatch, parse_cache, tmp_path):
    """The juice trial in the knowledge base (its parse copied in), its partition added, and an llm-mode deployment
    against the scripted endpoint with ``extra`` settings: (settings, deployment, definitions)."""

    def make(**extra: str):
        copy_into(knowledge_base, f"rct/{KEY}")
        shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
        monkeypatch.setenv("ATLAS_LLM_API_KEY", API_KEY)
        options = {
            "llm_base_url": llm_server.base_url,
            "llm_model": "scripted-model",
            "llm_api_key": API_KEY,
            "llm_max_retries": "2",
            "llm_backoff_seconds": "0.01",
            "llm_timeout_seconds": "2",
            "llm_deadline_seconds": "5",  # the whole answer: a trickled or endless one is cut off (test_llm_extraction)
            "llm_max_answer_bytes": "2000000",
            **extra,
        }
        settings = settings_for(knowledge_base, **options)
        atlas = atlas_for(knowledge_base, **options)
        refresh_catalog(atlas.open_knowledge_base(), atlas.store())
        instance.add_dynamic_partitions(documents_partitions.name, [KEY])
        return settings, atlas, build_definitions(settings)

    return make


@pytest.fixture
def run(llm_deployment, instance):
    """Materialise the document job for the juice trial in llm mode; returns (result, record)."""
    settings, atlas, defs = llm_deployment()

    def materialise(key: str = KEY):
        result = defs.resolve_job_def("document_job").execute_in_process(
            partition_key=key, instance=instance, raise_on_error=False
        )
        return result, read_record(atlas.store(), key, "extraction", ExtractionRecord)

    materialise.defs = defs
    materialise.atlas = atlas
    materialise.settings = settings
    return materialise


@pytest.fixture
def new_deployment(tmp_path, monkeypatch, postgres, s3_endpoint):
    """Environment of the target deployment: a fresh PostgreSQL database and a bucket on a local S3 server."""
    filesystem_for("s3://atlas-new")[0].mkdir("atlas-new")
    for name, value in postgres.items():
        monkeypatch.setenv(name, value)
    return {
        **S3_CREDENTIALS,
        **postgres,
        "ATLAS_S3_ENDPOINT_URL": s3_endpoint,
        "DAGSTER_HOME": str(tmp_path / "new_home"),
        "ATLAS_INSTANCE_CONFIG": str(PROJECT_ROOT / "deploy" / "postgres" / "dagster.yaml"),
        "ATLAS_ARTIFACTS": "s3://atlas-new/artifacts",
        "ATLAS_EXPORTS": "s3://atlas-new/exports",
    }
