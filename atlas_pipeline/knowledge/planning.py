"""What should run next, decided in one place for both drivers: the knowledge-base sensor turns a plan into run
requests, ``atlas run`` executes it.

A plan is a pure function of the catalog, the partitions the instance knows, what the driver has already asked for,
and two facts about each document that only the run history knows — extracted already from these bytes with this
extraction version, or cancelled by a person — which the driver answers (``DocumentFacts``; the Dagster floor reads
them from the instance). Nothing here imports Dagster.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
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
