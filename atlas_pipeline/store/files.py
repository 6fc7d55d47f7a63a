"""A small byte/JSON store over fsspec, so the same code writes to a local folder or an ``s3://`` prefix.

Writes are whole-object: locally through a temporary file and an atomic rename (a reader never sees half a file),
on object stores through a single PUT, which is atomic there.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import posixpath
import shutil
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

import fsspec
from fsspec.implementations.local import LocalFileSystem

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.core.locations import is_url


def _file_mode() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


FILE_MODE = _file_mode()


class StoreError(AtlasError, OSError):
    """Reading or writing the store failed; the message names the location, never credentials."""


def filesystem_for(location: str) -> tuple[fsspec.AbstractFileSystem, str]:
    """The fsspec filesystem and the root path inside it for a folder or URL."""
    if not is_url(location):
        return LocalFileSystem(), str(Path(location).resolve())
    protocol = location.split("://", 1)[0]
    options: dict[str, Any] = {}
    if protocol == "s3":
        endpoint = os.environ.get("ATLAS_S3_ENDPOINT_URL") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            options["client_kwargs"] = {"endpoint_url": endpoint}
        options["use_listings_cache"] = False
    fs, root = fsspec.core.url_to_fs(location, **options)
    return fs, root.rstrip("/")


class Store:
    """Objects addressed by relative POSIX paths below one root folder or prefix."""

    def __init__(self, location: str) -> None:
        self.location = location
        self.fs, self.root = filesystem_for(location)
        self._local = isinstance(self.fs, LocalFileSystem)

    def path(self, relative: str) -> str:
        """The absolute path (inside the filesystem) of a relative key; refuses keys that escape the root."""
        normal = posixpath.normpath(relative)
        if normal.startswith("../") or normal == ".." or posixpath.isabs(normal):
            raise StoreError(f"refusing a path outside the store: {relative!r}")
        return f"{self.root}/{normal}"

    def url(self, relative: str) -> str:
        """A location a person can open: a local path or a full URL."""
        full = self.path(relative)
        if self._local:
            return full
        return f"{self.location.split('://', 1)[0]}://{full}"

    def exists(self, relative: str) -> bool:
        return bool(self.fs.exists(self.path(relative)))

    def read_bytes(self, relative: str) -> bytes:
        try:
            return self.fs.cat_file(self.path(relative))
        except FileNotFoundError:
            raise
        except OSError as error:
            raise StoreError(f"cannot read {self.url(relative)}: {error}") from error

    def write_bytes(self, relative: str, data: bytes) -> str:
        return self.write_file(relative, io.BytesIO(data))

    def write_file(self, relative: str, source: BinaryIO) -> str:
        """Write an object whole (a reader never sees half of it: locally a temporary file and an atomic rename) from
        a file read in chunks (an upload is never held whole in memory)."""
        target = self.path(relative)
        try:
            if self._local:
                folder = os.path.dirname(target)
                os.makedirs(folder, exist_ok=True)
                handle, temporary = tempfile.mkstemp(dir=folder, prefix=".tmp-")
                try:
                    with os.fdopen(handle, "wb") as out:
                        shutil.copyfileobj(source, out, 1 << 20)
                    os.chmod(temporary, FILE_MODE)
                    os.replace(temporary, target)
                except BaseException:
                    if os.path.exists(temporary):
                        os.unlink(temporary)
                    raise
            else:
                with self.fs.open(target, "wb") as out:
                    shutil.copyfileobj(source, out, 1 << 20)
        except OSError as error:
            raise StoreError(f"cannot write {self.url(relative)}: {error}") from error
        return self.url(relative)

    def age_seconds(self, relative: str) -> float:
        """Seconds since an object was last written (0 when the store cannot tell)."""
        try:
            modified = self.fs.modified(self.path(relative))
        except (NotImplementedError, OSError):
            return 0.0
        if modified.tzinfo is None:
            modified = modified.replace(tzinfo=UTC)
        return max(0.0, (datetime.now(UTC) - modified).total_seconds())

    def size(self, relative: str) -> int:
        """An object's size in bytes, without reading it."""
        return int(self.fs.size(self.path(relative)))

    def read_text(self, relative: str) -> str:
        return self.read_bytes(relative).decode("utf-8")

    def write_text(self, relative: str, text: str) -> str:
        return self.write_bytes(relative, text.encode("utf-8"))

    def read_json(self, relative: str) -> Any:
        return json.loads(self.read_bytes(relative))

    def write_json(self, relative: str, value: Any) -> str:
        return self.write_bytes(relative, json.dumps(value, ensure_ascii=False, indent=1).encode("utf-8"))

    def read_json_or(self, relative: str, default: Any) -> Any:
        try:
            return self.read_json(relative)
        except FileNotFoundError:
            return default

    def delete(self, relative: str) -> None:
        """Remove an object; one already gone is no error (two processes may tidy the same queue)."""
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm(self.path(relative))

    def versions(self, under: str) -> dict[str, str]:
        """Every object below the folder ``under`` (relative path → a version that changes whenever it is written),
        in one listing and without reading any: locally the file's inode, time and size (a write replaces the file,
        so a new inode), on an object store its ETag (or size and time)."""
        top = self.path(under)
        found: dict[str, str] = {}
        if self._local:
            folders = [top]
            while folders:
                folder = folders.pop()
                try:
                    entries = list(os.scandir(folder))
                except (FileNotFoundError, NotADirectoryError):
                    continue
                for entry in entries:
                    if entry.name.startswith(".tmp-"):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        folders.append(entry.path)
                        continue
                    try:
                        stat = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:  # gone since the listing
                        continue
                    relative = posixpath.relpath(entry.path, self.root)
                    found[relative] = f"{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}"
            return found
        if not self.fs.exists(top):
            return {}
        for path, info in self.fs.find(top, withdirs=False, detail=True).items():
            tag = info.get("ETag") or info.get("etag") or ""
            stamp = info.get("LastModified") or info.get("mtime") or info.get("last_modified") or ""
            found[posixpath.relpath(path, self.root)] = f"{tag}:{info.get('size')}:{stamp}"
        return found

    def files(self, under: str = "") -> list[str]:
        """Relative paths of every object in the store (or below the folder ``under``), sorted; half-written local
        temporaries left out."""
        top = self.path(under) if under else self.root
        if not self.fs.exists(top):
            return []
        found = self.fs.find(top, withdirs=False)
        relative = (posixpath.relpath(path, self.root) for path in found)
        return sorted(path for path in relative if not posixpath.basename(path).startswith(".tmp-"))
