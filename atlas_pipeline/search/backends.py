"""Which index a deployment uses: ``ATLAS_SEARCH_BACKEND`` (auto: the instance's PostgreSQL when it has one)."""

from __future__ import annotations

import os
from typing import Protocol

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.search.index import SearchIndex

SQLITE_NAME = "atlas_search.sqlite"  # beside the instance's own SQLite files (DAGSTER_HOME/storage)


class InstanceStorage(Protocol):
    """What an index needs of the Dagster instance — its database and storage folder — typed by shape, so that the
    search library does not import Dagster."""

    @property
    def run_storage(self) -> object: ...
    def storage_directory(self) -> str: ...


class SearchConfigError(AtlasError, ValueError):
    """The configured backend cannot be used with this instance."""


def instance_postgres_url(instance: InstanceStorage) -> str:
    """The SQLAlchemy URL of the instance's PostgreSQL database ("" for any other storage)."""
    return str(getattr(instance.run_storage, "postgres_url", "") or "")


def open_index(backend: str, sqlite_path: str, instance: InstanceStorage) -> SearchIndex:
    url = instance_postgres_url(instance)
    if backend == "postgres" or (backend == "auto" and url):
        if not url:
            raise SearchConfigError(
                "ATLAS_SEARCH_BACKEND=postgres needs a PostgreSQL Dagster instance (deploy/postgres/dagster.yaml)"
            )
        from atlas_pipeline.search.postgres import PostgresIndex

        return PostgresIndex(url)
    from atlas_pipeline.search.sqlite import SqliteIndex

    return SqliteIndex(sqlite_path or os.path.join(instance.storage_directory(), SQLITE_NAME))
