"""What every search index is — the shape the backends share and the rest of Atlas uses — apart from which one a
deployment opens (``backends``), so that a backend never imports the module that chooses it."""

from __future__ import annotations

from typing import Protocol

from atlas_pipeline.search.entries import Hit, IndexedDocument


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
