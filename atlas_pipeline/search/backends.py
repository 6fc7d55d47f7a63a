"""Which index a deployment uses: ``ATLAS_SEARCH_BACKEND`` (auto: the instance's PostgreSQL when it has one)."""

from __future__ import annotations

import os
from typing import Protocol

from atlas_pipeline.search.entries import Hit, IndexedDocument

SQLITE_NAME = "atlas_search.sqlite"  # beside the instance's own SQLite files (DAGSTER_HOME/storage)


class SearchIndexBase:
    """What every index shares: closing it when a ``with`` block ends."""

    backend = ""
    location = ""

    def close(self) -> None:  # pragma: no cover - each backend closes its own connection
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SearchIndex(Protocol):
    backend: str
    location: str

    def marks(self) -> dict[str, str]: ...
    def count(self) -> int: ...
    def upsert(self, documents: list[IndexedDocument]) -> None: ...
    def remove(self, keys: list[str]) -> None: ...
    def search(self, query: str, status: str = "", field: str = "", source: str = "", limit: int = 20) -> list[Hit]: ...
    def close(self) -> None: ...
    def __enter__(self) -> SearchIndex: ...
    def __exit__(self, *exc: object) -> None: ...


class InstanceStorage(Protocol):
    """What an index needs of the Dagster instance — its database and storage folder — typed by shape, so that the
    search library does not import Dagster."""

    @property
    def run_storage(self) -> object: ...
    def storage_directory(self) -> str: ...


class SearchConfigError(ValueError):
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
