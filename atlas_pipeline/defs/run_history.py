"""The run history's answers to the planner (``knowledge/planning.py``): which documents were extracted already from
their current bytes with this extraction version, and which a person cancelled."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from atlas_pipeline.defs.cancellation import cancelled_documents
from atlas_pipeline.defs.document_states import already_extracted
from atlas_pipeline.knowledge.catalog import CatalogEntry
from atlas_pipeline.store.files import Store


@dataclass(frozen=True)
class InstanceFacts:
    """``DocumentFacts`` read from a Dagster instance."""

    instance: dg.DagsterInstance
    store: Store
    version: str  # the extraction version's tag

    def extracted(self, entries: Sequence[CatalogEntry]) -> set[str]:
        return already_extracted(self.instance, list(entries), self.version)

    def cancelled(self, keys: Sequence[str]) -> set[str]:
        return set(cancelled_documents(self.instance, self.store, list(keys))) if keys else set()
