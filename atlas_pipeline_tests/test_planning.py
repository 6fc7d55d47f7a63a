"""One planner, two drivers: the knowledge-base sensor and `atlas run` decide what runs next through
``knowledge.planning.plan_runs`` — given the same catalog they plan the same documents — and the planner itself on
facts the test chooses (limits, named documents, cancellations, --force)."""

import re
import shutil

import dagster as dg

from atlas_pipeline.config.settings import load_settings
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry
from atlas_pipeline.knowledge.planning import plan_runs
from atlas_pipeline.ops.instance import project_file
from atlas_pipeline_tests.corpus import copy_into
from atlas_pipeline_tests.helpers import SensorHarness, run_atlas
from atlas_pipeline_tests.servers import local_env

DOCUMENTS = ("html/plos_one_article.html", "rct_jats/PMC1216327.nxml", "rct_jats/PMC1475568.nxml")


def test_the_sensor_and_atlas_run_plan_the_same_documents(knowledge_base, tmp_path):
    copy_into(knowledge_base, *DOCUMENTS)
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    env = {"DAGSTER_HOME": str(home), **local_env(tmp_path, knowledge_base)}
    first = run_atlas("run", "--only", "PMC1216327.nxml", env=env, cwd=tmp_path)  # one extracted already
    assert "[1/1] PMC1216327.nxml: done" in first.stdout, first.stdout + first.stderr  # rc 1: two still pending

    settings = load_settings(env)
    with dg.DagsterInstance.from_config(str(home)) as instance:
        harness = SensorHarness(instance, settings, Deployment.from_settings(settings))
        planned_by_sensor = sorted(request.partition_key for request in harness.tick().run_requests)
    run = run_atlas("run", env=env, cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    run_by_atlas = sorted(re.findall(r"^\[\d+/\d+\] (\S+):", run.stdout, re.MULTILINE))
    assert planned_by_sensor == run_by_atlas == ["PMC1475568.nxml", "plos_one_article.html"]
    assert "1 unchanged document(s) already extracted with this version" in run.stdout


class Facts:
    def __init__(self, extracted=(), cancelled=()):
        self._extracted, self._cancelled = set(extracted), set(cancelled)
        self.asked: list[list[str]] = []

    def extracted(self, entries):
        self.asked.append([entry.key for entry in entries])
        return {entry.key for entry in entries} & self._extracted

    def cancelled(self, keys):
        return set(keys) & self._cancelled


def _catalog(*keys: str) -> Catalog:
    entries = {
        key: CatalogEntry(key=key, source_path=key, sha256=f"{n:064x}", size=1, marker="m", first_seen="t", updated="t")
        for n, key in enumerate(keys)
    }
    return Catalog(entries=entries)


def test_the_plan_on_chosen_facts():
    catalog = _catalog("a", "b", "c", "d", "e")
    facts = Facts(extracted={"a"}, cancelled={"b", "a"})
    plan = plan_runs(catalog, {"a", "b"}, facts)
    assert plan.new_partitions == ["c", "d", "e"]
    assert (plan.keys, plan.unchanged, plan.cancelled) == (["c", "d", "e"], ["a"], ["b"])

    under_the_daemon = plan_runs(catalog, set(), facts, asked_already={"c"}, limit=2, leave_cancelled=False)
    assert under_the_daemon.keys == ["b"] and under_the_daemon.unchanged == ["a"]  # cancelled or not: new bytes
    assert [entry.key for entry in under_the_daemon.later] == ["d", "e"]
    assert facts.asked[-1] == ["a", "b"]  # the run history is asked about this pass's documents only

    named = plan_runs(catalog, set(catalog.entries), facts, only={"a", "b"})
    assert named.keys == ["a", "b"] and named.unchanged == []  # named: cancelled ones run again
    forced = plan_runs(catalog, set(catalog.entries), facts, force=True)
    assert forced.keys == ["a", "b", "c", "d", "e"]
