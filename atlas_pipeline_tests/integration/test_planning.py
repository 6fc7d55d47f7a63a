"""One planner, two drivers: the sensors and `atlas run` decide what runs next through ``knowledge.planning`` — given
the same catalog they plan the same documents, given the same decisions they merge the same reviews — and the
planner itself on facts the test chooses (limits, named documents, cancellations, --force, reviews, aggregates)."""

import dataclasses
import re
import shutil

import dagster as dg

from atlas_pipeline.config.settings import load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry
from atlas_pipeline.knowledge.planning import (
    AggregateFacts,
    StepKind,
    aggregates_missed,
    aggregates_stale,
    plan_runs,
    plan_steps,
    reviews_to_merge,
)
from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.review.decisions import DecisionRequest, decide
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import SensorHarness, run_atlas
from atlas_pipeline_tests.support.juice_trial import KEY, answer
from scripted_servers.processes import local_env

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


def test_the_steps_of_a_pass_and_why_the_aggregates_follow():
    """``plan_steps``: the same steps for both drivers, in the order they are taken; the aggregates refreshed for
    every change without the daemon, for a catalog change that runs nothing under it (its automation does the rest)."""
    catalog = _catalog("a", "b", "c")
    plan = plan_runs(catalog, {"a"}, Facts(extracted={"a"}))
    steps = plan_steps(plan, ["a"], automated=False)
    assert [(step.kind, step.keys) for step in steps] == [
        (StepKind.ADD_PARTITIONS, ("b", "c")),
        (StepKind.EXTRACT, ("b", "c")),
        (StepKind.MERGE_REVIEWS, ("a",)),
        (StepKind.REFRESH_AGGREGATES, ()),
    ]
    assert steps[-1].because == "documents were extracted"
    assert [step.kind for step in plan_steps(plan, ["a"], automated=True)] == [
        StepKind.ADD_PARTITIONS,
        StepKind.EXTRACT,
        StepKind.MERGE_REVIEWS,
    ]  # the automation refreshes them after the runs
    nothing = plan_runs(catalog, set(catalog.entries), Facts(extracted={"a", "b", "c"}))
    assert plan_steps(nothing, automated=False) == plan_steps(nothing, automated=True) == []
    merged_only = plan_steps(nothing, ["b"], automated=False)
    assert [step.kind for step in merged_only] == [StepKind.MERGE_REVIEWS, StepKind.REFRESH_AGGREGATES]
    for automated in (False, True):  # a source removed: nothing to run, the exports must say it all the same
        (refresh,) = plan_steps(nothing, catalog_changed=True, automated=automated)
        assert refresh.because.startswith("the catalog changed")
    (stale,) = plan_steps(nothing, stale="an export file is missing", automated=False)
    assert stale.because == "an export file is missing"
    assert plan_steps(nothing, stale="an export file is missing", automated=True) == []  # the freshness sensor's


def test_the_review_sensor_and_atlas_run_merge_the_same_reviews(llm_server, knowledge_base, tmp_path):
    copy_into(knowledge_base, f"rct/{KEY}")
    llm_server.script(default={"content": answer()})
    home = tmp_path / "home"
    home.mkdir()
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    env = {"DAGSTER_HOME": str(home), **local_env(tmp_path, knowledge_base), "ATLAS_LLM_BASE_URL": llm_server.base_url}
    first = run_atlas("run", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    settings = load_settings(env)
    store = Deployment.from_settings(settings).store()
    record = read_record(store, KEY, "extraction", ExtractionRecord)
    decide(
        store,
        record,
        DecisionRequest("p_value", "approve", reviewer="ben", shown=(record.sha256, record.extraction_version)),
    )
    defs = build_definitions(settings)
    resources = {"atlas": AtlasResource.from_deployment(Deployment.from_settings(settings))}

    def planned_by_sensor() -> list[str]:
        with dg.DagsterInstance.from_config(str(home)) as instance:
            context = dg.build_sensor_context(instance=instance, definitions=defs, resources=resources)
            return [request.partition_key for request in defs.resolve_sensor_def("review_sensor")(context).run_requests]

    assert planned_by_sensor() == [KEY]
    run = run_atlas("run", env=env, cwd=tmp_path)
    assert f"review decisions merged for 1 document(s): {KEY}" in run.stdout, run.stdout + run.stderr
    assert planned_by_sensor() == []  # merged by `atlas run`: nothing left to merge, though the sensor never asked
    again = run_atlas("run", env=env, cwd=tmp_path)
    assert "review decisions merged" not in again.stdout
    assert "task completion and exports are up to date: not refreshed" in again.stdout, again.stdout


def test_reviews_and_aggregates_on_chosen_facts():
    decided = {"a": "2-x", "b": "1-y", "c": "3-z", "gone": "1-q"}
    merged = {"a": "2-x", "b": "0-"}
    assert reviews_to_merge(decided, merged, {"a", "b", "c"}) == ["b", "c"]  # "gone": not a document here
    assert reviews_to_merge(decided, merged, {"a", "b", "c"}, asked_already={"c"}) == ["b"]

    names = ("task_completion", "extraction_exports")
    never = AggregateFacts(made={"task_completion": (100.0, 99.0)}, expected=names, landed_at=50.0)
    assert aggregates_stale(never) == "never made" and aggregates_missed(never, now=200.0) is None
    made = {"task_completion": (100.0, 99.0), "extraction_exports": (110.0, 108.0)}
    current = AggregateFacts(made=made, expected=names, landed_at=90.0, changed_at=80.0)
    assert aggregates_stale(current) is None and aggregates_missed(current, now=200.0) is None
    assert aggregates_stale(dataclasses.replace(current, exported=False)) == "an export file is missing"
    assert aggregates_stale(dataclasses.replace(current, changed_at=105.0)).startswith("the catalog")
    assert aggregates_stale(dataclasses.replace(current, ended_badly=True)).startswith("a document run failed")
    during = dataclasses.replace(current, landed_at=109.0)  # after the exports read the states, before they were made
    assert aggregates_stale(during) == "a document was extracted or reviewed since"
    assert aggregates_missed(during, now=200.0) == 109.0  # Dagster's automation counts it as handled: missed
    after = dataclasses.replace(current, landed_at=120.0)  # after both were made: the automation's to handle
    assert aggregates_missed(after, now=125.0, grace=30.0) is None
    assert aggregates_missed(after, now=200.0, grace=30.0) == 120.0  # unless it let it slip for longer than grace
