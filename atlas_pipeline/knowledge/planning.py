"""What should run next, decided in one place for both drivers: the planner returns steps (``plan_steps``: add these
partitions, extract these documents, merge these reviews, refresh the aggregates because …); the sensors turn them
into run requests, ``atlas run`` executes them.

A plan is a pure function of the catalog, the partitions the instance knows, what the driver has already asked for,
and two facts about each document that only the run history knows — extracted already from these bytes with this
extraction version, or cancelled by a person — which the driver answers (``DocumentFacts``; the Dagster floor reads
them from the instance). The same module decides which documents have review decisions to merge
(``reviews_to_merge``) and whether the aggregates are stale (``aggregates_stale``; ``aggregates_missed`` for what
Dagster's automation let slip). Nothing here imports Dagster.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry


class DocumentFacts(Protocol):
    """What the run history says about documents."""

    def extracted(self, entries: Sequence[CatalogEntry]) -> set[str]:
        """Keys whose latest extraction was made from these very bytes with the current extraction version."""
        ...

    def cancelled(self, keys: Sequence[str]) -> set[str]:
        """Keys whose newest run a person cancelled, with no extraction since."""
        ...


@dataclass(frozen=True)
class RunPlan:
    """``new_partitions``: documents the instance does not know yet; ``to_run``: new or changed documents to extract,
    in catalog order; ``unchanged``: extracted already from these bytes with this version (nothing to redo);
    ``cancelled``: left alone because a person cancelled them; ``later``: beyond this pass's limit (next tick)."""

    new_partitions: list[str]
    to_run: list[CatalogEntry]
    unchanged: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    later: list[CatalogEntry] = field(default_factory=list)

    @property
    def keys(self) -> list[str]:
        return [entry.key for entry in self.to_run]


def plan_runs(
    catalog: Catalog,
    known_partitions: Collection[str],
    facts: DocumentFacts,
    *,
    asked_already: Collection[str] = (),
    only: Collection[str] | None = None,
    force: bool = False,
    limit: int | None = None,
    leave_cancelled: bool = True,
) -> RunPlan:
    """The plan for one pass over ``catalog``.

    ``asked_already``: documents the driver has requested for their current bytes and version (the sensor's cursor),
    not planned again; ``only``: the documents a person named (a cancelled one among them runs again); ``force``:
    run them even if extracted already; ``limit``: at most this many considered in this pass (the rest ``later``);
    ``leave_cancelled``: whether a cancelled document waits until it is named (``atlas run``) — under the daemon a
    cancellation was of one queued run, and new bytes are a new request, so the sensor plans them.
    """
    new_partitions = [key for key in catalog.entries if key not in known_partitions]
    entries = [entry for entry in catalog.active() if entry.key not in asked_already]
    if only is not None:
        entries = [entry for entry in entries if entry.key in only]
    later = entries[limit:] if limit else []
    entries = entries[:limit] if limit else entries
    unchanged = set() if force else facts.extracted(entries)
    if only:  # a cancelled document named here runs again, even one extracted before its cancelled run
        unchanged -= facts.cancelled(sorted(unchanged))
    candidates = [entry.key for entry in entries if entry.key not in unchanged]
    cancelled = facts.cancelled(candidates) if leave_cancelled and not only and not force else set()
    return RunPlan(
        new_partitions=new_partitions,
        to_run=[entry for entry in entries if entry.key not in unchanged and entry.key not in cancelled],
        unchanged=[entry.key for entry in entries if entry.key in unchanged],
        cancelled=[key for key in candidates if key in cancelled],
        later=later,
    )


def plan_batches(keys: Sequence[str], ordered: Sequence[str], size: int) -> list[list[str]]:
    """The documents of the EXTRACT step cut into runs of at most ``size`` partitions that are consecutive in the
    partition order (``ordered``): a batched run targets a partition range, which must not take in a document not
    asked for. Keys not (yet) in ``ordered`` run alone. The same cut for both drivers: the sensor requests one run
    per batch, ``atlas run`` executes them."""
    wanted, groups, current = set(keys), [], []
    for key in ordered:
        if key in wanted:
            current.append(key)
            if len(current) == size:
                groups.append(current)
                current = []
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    registered = set(ordered)
    return groups + [[key] for key in keys if key not in registered]


def documents_per_run(mode: str, concurrency: int, chosen: int = 0) -> int:
    """How many documents one run takes on: ``chosen`` when set (``ATLAS_DOCUMENTS_PER_RUN``, ``atlas run
    --batch``), else as many as the endpoint takes requests at once when a model extracts (one run keeps them all in
    flight), else one (a run per document: its own logs, its own retry)."""
    if chosen > 0:
        return chosen
    return max(1, concurrency) if mode == "llm" else 1


def reviews_to_merge(
    decided: Mapping[str, str],
    merged: Mapping[str, str],
    candidates: Collection[str],
    asked_already: Collection[str] = (),
) -> list[str]:
    """Documents among ``candidates`` whose decision log (``decided``: key → mark of its log) is newer than what
    their stored review merged (``merged``: key → the mark it merged; missing: never merged), in key order.
    ``asked_already``: merges the driver has requested for these very marks (the review sensor's cursor)."""
    return sorted(
        key
        for key, mark in decided.items()
        if key in candidates and merged.get(key) != mark and key not in asked_already
    )


@dataclass(frozen=True)
class AggregateFacts:
    """What the run history says about the aggregates (task completion, duplicate groups, exports, search index).

    ``made``: per aggregate of this deployment, when it was last materialised and when that run read the document
    states (None: not recorded); an aggregate never made is missing. ``expected``: the aggregates of this deployment.
    ``landed_at``: the newest document extraction or merged review; ``changed_at``: the newest catalog change or
    duplicate group a person split or joined; ``ended_badly``: a document run failed or was cancelled after the
    oldest aggregate; ``exported``: every export file is there; ``policy`` and ``policies``: what makes a value
    final now, and what each aggregate that depends on it was made with."""

    made: Mapping[str, tuple[float, float | None]]
    expected: tuple[str, ...]
    landed_at: float | None = None
    changed_at: float = 0.0
    ended_badly: bool = False
    exported: bool = True
    policy: str = ""  # what makes a value final now (``Deployment.final_values_policy``); "" when not asked
    policies: Mapping[str, str | None] = field(default_factory=dict)  # aggregate → the policy it was made with

    @property
    def policy_changed(self) -> bool:
        """Whether an aggregate whose figures depend on the policy was made under another one (or none recorded)."""
        return bool(self.policy) and any(made != self.policy for made in self.policies.values())

    @property
    def refreshed_at(self) -> float | None:
        """When the oldest aggregate was made (None: one was never made)."""
        if any(name not in self.made for name in self.expected):
            return None
        return min(self.made[name][0] for name in self.expected)


def aggregates_stale(facts: AggregateFacts) -> str | None:
    """Why the aggregates would say something else if made now, or None when refreshing them would rewrite the same
    figures and files (what ``atlas run`` asks before it refreshes them)."""
    refreshed = facts.refreshed_at
    if refreshed is None:
        return "never made"
    if not facts.exported:
        return "an export file is missing"
    if facts.landed_at is not None and facts.landed_at > refreshed:
        return "a document was extracted or reviewed since"
    if facts.changed_at > refreshed:
        return "the catalog, a duplicate group or a study's chosen value changed since"
    if facts.policy_changed:
        return "the acceptance policy, derivation rules or template changed since"
    if facts.ended_badly:
        return "a document run failed or was cancelled since"
    return None


def aggregates_missed(facts: AggregateFacts, now: float, grace: float = float("inf")) -> float | None:
    """The time of the newest extraction or review when it landed *while* an aggregate was being computed — after
    the aggregate read the document states, before it was materialised — else None (what the freshness sensor asks).

    Dagster's automation condition counts such a document as handled by that run, though the run never saw it. One
    that lands after the materialisation is the automation's to handle — unless ``grace`` seconds pass without a newer
    aggregate (it landed in the same automation tick as the aggregate's own materialisation, which then counts it as
    handled too): then it is missed as well. An aggregate never made is the automation's to make."""
    landed = facts.landed_at
    if landed is None:
        return None
    for name in facts.expected:
        if name not in facts.made:
            continue
        made_at, states_read_at = facts.made[name]
        if states_read_at is None or states_read_at >= landed:
            continue
        if landed <= made_at or now - landed > grace:
            return landed
    return None


class StepKind(StrEnum):
    ADD_PARTITIONS = "add partitions"  # documents the instance does not know yet
    EXTRACT = "extract"  # new or changed documents
    MERGE_REVIEWS = "merge reviews"  # documents whose decisions are newer than their merged review
    REFRESH_AGGREGATES = "refresh the aggregates"  # task completion, duplicate groups, exports, search index


@dataclass(frozen=True)
class Step:
    """One thing to do next, on ``keys`` (documents; none for the aggregates), and why."""

    kind: StepKind
    keys: tuple[str, ...] = ()
    because: str = ""


def refresh_because(
    *, extracting: bool, merging: bool, catalog_changed: bool, stale: str | None, automated: bool
) -> str | None:
    """Why the aggregates are refreshed now, or None. Under the daemon (``automated``) Dagster's automation refreshes
    them after every extraction and merge, and the freshness sensor catches what it lets slip (``aggregates_missed``):
    the planner asks only for a catalog change that runs nothing (a source removed, restored, moved or duplicated).
    Without it (``atlas run``) every change counts, and so does an aggregate that would say something else if made now
    (``aggregates_stale``)."""
    if catalog_changed and not extracting:
        return "the catalog changed (a source removed, restored, moved or duplicated)"
    if automated:
        return None
    if extracting:
        return "documents were extracted"
    if merging:
        return "review decisions were merged"
    return stale


def plan_steps(
    plan: RunPlan,
    merges: Sequence[str] = (),
    *,
    catalog_changed: bool = False,
    stale: str | None = None,
    automated: bool,
) -> list[Step]:
    """The steps of one pass, in the order they are taken: the partitions to add and the documents to extract (from
    ``plan_runs``), the reviews to merge (``reviews_to_merge``), and the aggregates when ``refresh_because`` says so."""
    steps = []
    if plan.new_partitions:
        steps.append(Step(StepKind.ADD_PARTITIONS, tuple(plan.new_partitions), "not known to the instance yet"))
    if plan.to_run:
        steps.append(Step(StepKind.EXTRACT, tuple(plan.keys), "new, changed or never extracted with this version"))
    if merges:
        steps.append(Step(StepKind.MERGE_REVIEWS, tuple(merges), "decided on since their review was merged"))
    why = refresh_because(
        extracting=bool(plan.to_run),
        merging=bool(merges),
        catalog_changed=catalog_changed,
        stale=stale,
        automated=automated,
    )
    if why is not None:
        steps.append(Step(StepKind.REFRESH_AGGREGATES, because=why))
    return steps
