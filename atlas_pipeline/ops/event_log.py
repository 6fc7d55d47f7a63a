"""Dagster's SQLite event log, writing a batch of asset events in one transaction.

A batched run (``atlas run --batch N``) makes Dagster record, per document and per asset, a planned and a
materialisation event; Dagster's SQLite event log stores each in its own two transactions (the run's database and
the cross-run index), about 15 ms apiece, so bookkeeping, not Atlas, bounded small documents. Dagster already sends
these events in batches when ``DAGSTER_EVENT_BATCH_SIZE`` is set (its PostgreSQL storage writes them with one
statement); this storage gives the embedded SQLite default the same: one transaction per database per batch, the
rows and index entries exactly those of ``store_event`` one by one. ``dagster.yaml`` names it as the event log
storage; it lives in the instance's own folder (``history/runs``, Dagster's default place), so an existing home keeps
its history.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from atlas_pipeline.dagster_internals import (
    ASSET_EVENTS,
    ConfigurableClassData,
    DagsterInvariantViolationError,
    EventLogEntry,
    Field,
    SqliteEventLogStorage,
    StringSource,
    check,
)

BATCH_SIZE_VARIABLE = "DAGSTER_EVENT_BATCH_SIZE"
DEFAULT_BATCH_SIZE = "1000"  # events held at most before a write; a batch ends sooner (one output, one run's plan)


def enable_event_batching() -> None:
    """Ask Dagster to hand over asset events in batches (its own switch, read at every event) unless the
    environment already says otherwise; ``DAGSTER_EVENT_BATCH_SIZE=0`` turns batching off."""
    os.environ.setdefault(BATCH_SIZE_VARIABLE, DEFAULT_BATCH_SIZE)


class BatchedSqliteEventLogStorage(SqliteEventLogStorage):
    """``SqliteEventLogStorage`` whose ``store_event_batch`` writes the batch's asset events in one transaction on
    the run's database and one on the index (Dagster's own SQLite storage writes them one at a time).

    ``base_dir`` defaults to the instance's ``history/runs`` folder, known only once the instance registers."""

    def __init__(self, base_dir: str | None = None, inst_data: ConfigurableClassData | None = None) -> None:
        self._inst_data = check.opt_inst_param(inst_data, "inst_data", ConfigurableClassData)
        self._opened = False
        if base_dir:
            self._open(base_dir)

    def _open(self, base_dir: str) -> None:
        super().__init__(base_dir, self._inst_data)
        self._opened = True

    def register_instance(self, instance: Any) -> None:
        if not self._opened:
            self._open(os.path.join(instance.root_directory, "history", "runs"))
        enable_event_batching()
        super().register_instance(instance)

    @classmethod
    def config_type(cls) -> dict:
        return {"base_dir": Field(StringSource, is_required=False)}

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData | None, config_value: dict
    ) -> BatchedSqliteEventLogStorage:
        return cls(inst_data=inst_data, **config_value)

    def store_event_batch(self, events: Sequence[EventLogEntry]) -> None:
        """The batch's asset events: one statement on the run's database, one transaction on the index; anything
        else (check plans) as Dagster stores it, after them. Once the run's rows are committed, a failed index
        transaction is retried one event at a time here: raising would make Dagster store the whole batch again,
        and the run's rows twice."""
        assets = [event for event in events if event.is_dagster_event and event.dagster_event_type in ASSET_EVENTS]
        if len(assets) < 2 or len({event.run_id for event in assets}) != 1:
            super().store_event_batch(events)
            return
        with self.run_connection(assets[0].run_id) as connection:  # atomic: on failure Dagster retries it all
            connection.execute(self.prepare_insert_event_batch(assets))
        try:
            with self.index_transaction() as connection:
                self._mirror(connection, assets)
        except DagsterInvariantViolationError:
            raise
        except Exception:  # rolled back (e.g. the index locked past SQLite's timeout): one event at a time
            for event in assets:
                with self.index_transaction() as connection:
                    self._mirror(connection, [event])
        batched = {id(event) for event in assets}
        for event in events:
            if id(event) not in batched:
                self.store_event(event)

    def _mirror(self, connection: Any, events: Sequence[EventLogEntry]) -> None:
        """The index rows ``store_event`` writes for asset events: the event, its tags, the asset's entry."""
        ids = [connection.execute(self.prepare_insert_event(event)).inserted_primary_key[0] for event in events]
        if any(event_id is None for event_id in ids):
            raise DagsterInvariantViolationError("Cannot store asset event tags for null event id.")
        self._store_asset_event_tags(connection, events, ids)
        for event, event_id in zip(events, ids, strict=True):
            self._store_asset_event(connection, event, event_id)
