"""Listing and reading the knowledge base: a local folder or an ``s3://`` prefix, through fsspec.

Only this module and ``document_snapshot`` touch the knowledge base; everything downstream reads the snapshot.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from atlas_pipeline.storage import filesystem_for

# Files a person did not mean as documents: editor/OS droppings and partial downloads.
IGNORED_SUFFIXES = (".part", ".crdownload", ".tmp", ".swp")


class SourceMissingError(FileNotFoundError):
    """The source file is gone (deleted or renamed between listing and reading)."""


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file as listed: its path relative to the knowledge base, size, and a cheap change marker."""

    path: str
    size: int
    marker: str  # mtime (local) or ETag/last-modified (object stores): changes when the bytes may have changed


def _is_ignored(relative: str) -> bool:
    parts = relative.split("/")
    return any(part.startswith((".", "~$")) for part in parts) or relative.endswith(IGNORED_SUFFIXES)


def _marker(info: dict) -> str:
    for key in ("ETag", "etag", "mtime", "LastModified", "last_modified", "created"):
        if info.get(key) is not None:
            return str(info[key]).strip('"')
    return ""


class KnowledgeBase:
    """The documents below one folder or prefix."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.fs, self.root = filesystem_for(location)

    def list(self) -> list[SourceFile]:
        """Every document file below the root, sorted by path (hidden and partial files are left out)."""
        if not self.fs.exists(self.root):
            raise FileNotFoundError(f"knowledge base not found: {self.location}")
        found = self.fs.find(self.root, detail=True, withdirs=False)
        files = []
        for full, info in found.items():
            if info.get("type") == "directory":
                continue
            relative = posixpath.relpath(full, self.root)
            if _is_ignored(relative):
                continue
            files.append(SourceFile(path=relative, size=int(info.get("size") or 0), marker=_marker(info)))
        return sorted(files, key=lambda f: f.path)

    def read(self, relative: str) -> bytes:
        """The bytes of one source; ``SourceMissingError`` when it has vanished."""
        try:
            return self.fs.cat_file(f"{self.root}/{relative}")
        except FileNotFoundError as error:
            raise SourceMissingError(f"source vanished before it could be read: {relative}") from error

    def url(self, relative: str) -> str:
        return f"{self.location.rstrip('/')}/{relative}"
