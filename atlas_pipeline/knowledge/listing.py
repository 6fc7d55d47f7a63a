"""Listing and reading the knowledge base: a local folder or an ``s3://`` prefix, through fsspec.

Only this module and ``document_snapshot`` touch the knowledge base; everything downstream reads the snapshot.

A knowledge base is whatever people drop into a shared folder, so one bad entry never stops the listing:

- **symbolic links** are followed only while they stay inside the knowledge base and point at a file. A link that
  leaves it (to ``/etc/shadow``, say), a link to a directory, a broken link and a link loop are listed with a
  ``problem`` and never read: the document ends ``skipped`` with that reason;
- an entry that cannot be looked at (permissions, a file vanishing mid-listing) is listed with its problem;
- a file larger than the size limit is listed with its problem from its listed size — its bytes are never read;
- hidden files (``.…``, ``~$…``) and partial downloads (``*.part``, ``*.tmp``, …) are not documents.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import posixpath
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import BinaryIO

from fsspec.implementations.local import LocalFileSystem

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.store.files import Store, filesystem_for

# Files a person did not mean as documents: editor/OS droppings and partial downloads.
IGNORED_SUFFIXES = (".part", ".crdownload", ".tmp", ".swp")
CHUNK = 1 << 20


class SourceMissingError(AtlasError, FileNotFoundError):
    """The source file is gone (deleted or renamed between listing and reading)."""


class SourceRefusedError(SourceMissingError):
    """The source became something the knowledge base does not read after it was listed (a link to a file
    outside it, a directory, a device): refused when it is opened, never read."""


class KnowledgeBaseError(AtlasError, FileNotFoundError):
    """The knowledge base itself cannot be listed (missing, or a file instead of a folder)."""


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One file as listed: its path relative to the knowledge base, size, a cheap change marker, and — for an
    entry that will not be read — why (the document then ends ``skipped`` with that reason)."""

    path: str
    size: int
    marker: str  # mtime (local) or ETag/last-modified (object stores): changes when the bytes may have changed
    problem: str = ""


def _is_ignored(relative: str) -> bool:
    parts = relative.split("/")
    return any(part.startswith((".", "~$")) for part in parts) or relative.endswith(IGNORED_SUFFIXES)


def _marker(info: dict) -> str:
    for key in ("ETag", "etag", "mtime", "LastModified", "last_modified", "created"):
        if info.get(key) is not None:
            return str(info[key]).strip('"')
    return ""


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def _plain_entry(entry: os.DirEntry[str], relative: str) -> SourceFile | None:
    """A listed entry that is no link: a regular file, or a pipe, socket or device listed with its problem; None
    when it became a link since the folder was listed (looked at as a link)."""
    try:
        info = entry.stat(follow_symlinks=False)
    except OSError as error:  # gone or refused between the folder's listing and the look, as the walk said it
        return SourceFile(relative, 0, "", f"cannot be read: {error.strerror or error}")
    if stat.S_ISLNK(info.st_mode):
        return None
    if not stat.S_ISREG(info.st_mode):
        return SourceFile(relative, 0, "", "not a regular file (a pipe, socket or device); not read")
    return SourceFile(relative, info.st_size, str(info.st_mtime))


class KnowledgeBase:
    """The documents below one folder or prefix (``max_bytes``: larger files are listed with a problem)."""

    def __init__(self, location: str, max_bytes: int | None = None) -> None:
        self.location = location
        self.max_bytes = max_bytes
        self.fs, self.root = filesystem_for(location)
        self.local = isinstance(self.fs, LocalFileSystem)
        self._resolved_root: str | None = None

    def _real_root(self) -> str:
        """The root's real path, resolved once per listing object (a scan opens thousands of files)."""
        if self._resolved_root is None:
            self._resolved_root = os.path.realpath(self.root)
        return self._resolved_root

    def check(self) -> None:
        """Raise ``KnowledgeBaseError`` unless the knowledge base is a folder or prefix that exists."""
        if not self.fs.exists(self.root):
            raise KnowledgeBaseError(f"knowledge base not found: {self.location}")
        if not self.fs.isdir(self.root):
            raise KnowledgeBaseError(f"the knowledge base must be a folder or prefix, not a file: {self.location}")

    def list(self) -> list[SourceFile]:
        """Every document file below the root, sorted by path (see the module docstring for what is left out or
        listed with a problem)."""
        self.check()
        files = self._list_local() if self.local else self._list_remote()
        return sorted((self._limited(source) for source in files), key=lambda f: f.path)

    def _limited(self, source: SourceFile) -> SourceFile:
        if source.problem or self.max_bytes is None or source.size <= self.max_bytes:
            return source
        problem = (
            f"too large: {source.size / 1_000_000:.1f} MB (limit ATLAS_MAX_DOCUMENT_MB="
            f"{self.max_bytes / 1_000_000:g}); not read"
        )
        return SourceFile(source.path, source.size, source.marker, problem)

    def _list_remote(self) -> list[SourceFile]:
        files = []
        for full, info in self.fs.find(self.root, detail=True, withdirs=False).items():
            if info.get("type") == "directory":
                continue
            relative = posixpath.relpath(full, self.root)
            if not _is_ignored(relative):
                files.append(SourceFile(relative, int(info.get("size") or 0), _marker(info)))
        return files

    def _list_local(self) -> list[SourceFile]:
        """One ``scandir`` per folder: a plain file costs one ``lstat`` (its type comes with the folder's listing),
        a link is looked at through ``_local_entry``; a hidden folder is not entered (nothing below it is a
        document). Linear in the files, about a second per 100,000 on a local disk."""
        root = os.path.realpath(self.root)
        files: list[SourceFile] = []
        folders = [(self.root, "")]
        while folders:
            folder, prefix = folders.pop()
            try:
                with os.scandir(folder) as listed:
                    found = list(listed)
            except OSError as error:  # a folder that cannot be listed: say so, go on
                if not prefix:  # the knowledge base itself: nothing is scanned, nothing marked removed
                    raise KnowledgeBaseError(
                        f"knowledge base cannot be listed: {self.location} ({error.strerror or error})"
                    ) from None
                relative = prefix.rstrip("/")
                if not relative.endswith(IGNORED_SUFFIXES):
                    files.append(SourceFile(relative, 0, "", f"cannot be listed: {error.strerror or error}"))
                continue
            for entry in found:
                relative = prefix + entry.name
                if entry.name.startswith((".", "~$")):
                    continue
                try:
                    link = entry.is_symlink()
                    if not link and entry.is_dir(follow_symlinks=False):
                        folders.append((entry.path, relative + "/"))
                        continue
                except OSError as error:
                    if not relative.endswith(IGNORED_SUFFIXES):
                        files.append(SourceFile(relative, 0, "", f"cannot be read: {error.strerror or error}"))
                    continue
                if relative.endswith(IGNORED_SUFFIXES):
                    continue
                plain = None if link else _plain_entry(entry, relative)
                files.append(plain or self._local_entry(entry.path, relative, root))
        return files

    def _local_entry(self, full: str, relative: str, root: str) -> SourceFile:
        try:
            if os.path.islink(full):
                target = os.path.realpath(full)
                if not os.path.exists(target):
                    loop = os.path.realpath(target) == target and os.path.islink(target)
                    return SourceFile(relative, 0, "", "symlink loop; not followed" if loop else "broken symlink")
                if not _inside(target, root):
                    return SourceFile(relative, 0, "", "symlink to a file outside the knowledge base; not followed")
                if os.path.isdir(target):
                    return SourceFile(relative, 0, "", "symlink to a directory; not followed")
            info = os.stat(full)
        except OSError as error:
            if error.errno == 40:  # ELOOP
                return SourceFile(relative, 0, "", "symlink loop; not followed")
            return SourceFile(relative, 0, "", f"cannot be read: {error.strerror or error}")
        if not os.path.isfile(full):
            return SourceFile(relative, 0, "", "not a regular file (a pipe, socket or device); not read")
        return SourceFile(relative, info.st_size, str(info.st_mtime))

    @contextlib.contextmanager
    def open(self, relative: str) -> Iterator[BinaryIO]:
        """One source opened for reading — the only way a source is read. A local file is checked *as opened*
        (its descriptor's real path inside the knowledge base, a regular file), so a file swapped for a link to
        something outside after the listing is refused (``SourceRefusedError``), however long ago it was listed.
        ``SourceMissingError`` when it has vanished."""
        path = f"{self.root}/{relative}"
        if not self.local:  # object-store keys are not links
            try:
                with self.fs.open(path, "rb") as handle:
                    yield handle
            except FileNotFoundError as error:
                raise SourceMissingError(f"source vanished before it could be read: {relative}") from error
            return
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError as error:
            raise SourceMissingError(f"source vanished before it could be read: {relative}") from error
        except OSError as error:
            raise SourceRefusedError(f"{relative}: cannot be opened ({error.strerror or error}); not read") from None
        with os.fdopen(descriptor, "rb") as handle:
            real = os.path.realpath(f"/proc/self/fd/{descriptor}") if os.path.exists("/proc/self/fd") else None
            if real is None:  # no /proc: the path's real location, checked just after the open
                real = os.path.realpath(path)
            if not _inside(real, self._real_root()):
                raise SourceRefusedError(
                    f"{relative} now leads outside the knowledge base (changed after it was listed); not read"
                )
            if not stat.S_ISREG(os.fstat(descriptor).st_mode):
                raise SourceRefusedError(f"{relative} is no longer a regular file; not read")
            yield handle

    def read(self, relative: str) -> bytes:
        """The bytes of one source (``open``'s checks and errors)."""
        with self.open(relative) as handle:
            return handle.read()

    def sha256(self, relative: str) -> tuple[str, int]:
        """sha256 and size of one source, read in chunks (a large file is never held in memory)."""
        digest, size = hashlib.sha256(), 0
        with self.open(relative) as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
                size += len(chunk)
        return digest.hexdigest(), size

    def head(self, relative: str, size: int = 8192) -> bytes:
        """The first bytes of a source (enough to tell what it is)."""
        with self.open(relative) as handle:
            return handle.read(size)

    def url(self, relative: str) -> str:
        return f"{self.location.rstrip('/')}/{relative}"

    def add(self, name: str, data: bytes | BinaryIO, folder: str = "uploads") -> str:
        """Add a document (an upload from the review page) as ``folder/name`` and return its relative path; the
        sensor then takes it like any other file. ``data``: the bytes, or a file read in chunks (the size limit
        counted as they come, never held whole). Refuses names that are not documents, a file over the size limit
        and a name already taken (nothing in the knowledge base is ever overwritten)."""
        base = posixpath.basename(name.replace("\\", "/")).strip()
        if not base or _is_ignored(base):
            raise ValueError(f"{name!r} is not a document file name (hidden, partial or empty)")
        relative = f"{folder}/{base}"
        target = Store(self.location)
        if target.exists(relative):
            raise FileExistsError(f"{relative} is already in the knowledge base: rename the file to add it")
        source = io.BytesIO(data) if isinstance(data, bytes) else data
        with tempfile.SpooledTemporaryFile(max_size=CHUNK) as copy:
            size = 0
            while chunk := source.read(CHUNK):
                size += len(chunk)
                if self.max_bytes is not None and size > self.max_bytes:
                    raise ValueError(
                        f"{base} is too large: over {self.max_bytes / 1_000_000:g} MB (limit ATLAS_MAX_DOCUMENT_MB="
                        f"{self.max_bytes / 1_000_000:g}; stopped reading)"
                    )
                copy.write(chunk)
            if not size:
                raise ValueError(f"{base} is empty")
            copy.seek(0)
            target.write_file(relative, copy)
        return relative
