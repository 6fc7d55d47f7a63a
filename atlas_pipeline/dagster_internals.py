"""Every name Atlas takes from Dagster's private modules (``dagster._…``), in one place.

Dagster's public API has no equivalent for these, and each is a break waiting for an upgrade: they are imported here
and nowhere else, and ``test_dagster_internals.py`` fails when Dagster's version is not the one they were checked
against (``CHECKED_WITH``) — upgrade, check each name below still means the same, then move the pin. Modules that are
heavy or rarely needed (the webserver's workspace, the storages' SQL tables) are imported by the functions that use
them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dagster import _check as check
from dagster._config import Field, StringSource, validate_config
from dagster._core.errors import DagsterInvalidConfigError, DagsterInvariantViolationError
from dagster._core.events import ASSET_EVENTS
from dagster._core.events.log import EventLogEntry
from dagster._core.storage.dagster_run import NOT_FINISHED_STATUSES
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage
from dagster._core.storage.partition_status_cache import AssetPartitionStatus
from dagster._core.storage.tags import (
    ASSET_PARTITION_RANGE_END_TAG,
    ASSET_PARTITION_RANGE_START_TAG,
    PARTITION_NAME_TAG,
)
from dagster._serdes import ConfigurableClassData
from dagster._time import datetime_from_timestamp
from dagster._utils.error import SerializableErrorInfo

CHECKED_WITH = "1.13.27"  # the Dagster version every name here was last checked against

__all__ = [
    "ASSET_EVENTS",
    "ASSET_PARTITION_RANGE_END_TAG",
    "ASSET_PARTITION_RANGE_START_TAG",
    "CHECKED_WITH",
    "NOT_FINISHED_STATUSES",
    "PARTITION_NAME_TAG",
    "AssetPartitionStatus",
    "ConfigurableClassData",
    "DagsterInvalidConfigError",
    "DagsterInvariantViolationError",
    "EventLogEntry",
    "Field",
    "SerializableErrorInfo",
    "SqliteEventLogStorage",
    "StringSource",
    "add_step_metadata",
    "check",
    "datetime_from_timestamp",
    "instance_config_tools",
    "run_storage_tables",
    "step_of",
    "validate_config",
    "workspace_tools",
]


def step_of(context: Any) -> Any | None:
    """The step execution context behind an asset's context, when it keeps per-partition metadata the way
    ``add_step_metadata`` writes it (None otherwise: use the public ``add_asset_metadata``)."""
    step = getattr(getattr(context, "op_execution_context", None), "_step_execution_context", None)
    return step if hasattr(step, "_metadata_accumulator") else None


def add_step_metadata(step: Any, asset_key: Any, partition_key: str, metadata: Mapping[str, Any]) -> None:
    """Metadata for one partition's materialisation, straight into the step's accumulator: the public
    ``add_asset_metadata`` lists every partition of the instance on each call (per document of a batched run)."""
    step._metadata_accumulator = step._metadata_accumulator.with_additional_asset_metadata(
        asset_key=asset_key, partition_key=partition_key, metadata=metadata
    )


def instance_config_tools() -> tuple[Any, Any]:
    """(``dagster_instance_config``, ``load_yaml_from_path``): an instance config read and checked as Dagster does."""
    from dagster._core.instance.config import dagster_instance_config
    from dagster_shared.yaml_utils import load_yaml_from_path

    return dagster_instance_config, load_yaml_from_path


def run_storage_tables() -> tuple[Any, Any]:
    """(``RunsTable``, ``AssetCheckExecutionsTable``): the SQL tables a migration corrects by hand."""
    from dagster._core.storage.event_log.schema import AssetCheckExecutionsTable
    from dagster._core.storage.runs.schema import RunsTable

    return RunsTable, AssetCheckExecutionsTable


def workspace_tools() -> tuple[Any, Any, Any]:
    """(``ProxyServerManager``, ``WorkspaceFileTarget``, ``WorkspaceProcessContext``): what ``dagster dev`` uses to
    share one code server between the UI and the daemon, and to serve the UI over a workspace."""
    from dagster._cli.proxy_server_manager import ProxyServerManager
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    return ProxyServerManager, WorkspaceFileTarget, WorkspaceProcessContext
