"""The document catalog: which documents exist, under which partition key, from which source, with which bytes.

The catalog is the one mapping from partition key to source path. ``scan`` compares a fresh listing of the
knowledge base with it and says what is new, edited, removed or a duplicate; the sensor and ``atlas run`` both use it.
Removed sources are flagged, never deleted: what was extracted from them stays.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sized
from dataclasses import dataclass, field
from datetime import datetime

from pydantic import BaseModel

from atlas_pipeline.core.clock import now_stamp
from atlas_pipeline.knowledge.listing import KnowledgeBase, SourceFile, SourceMissingError
from atlas_pipeline.knowledge.partition_keys import make_key
from atlas_pipeline.parsing.errors import DocumentError
from atlas_pipeline.parsing.media import detect_media_type
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import CATALOG_PATH, catalog_shard_path

PROGRESS_SECONDS = 1.0  # a long scan reports how far it got at most this often


class CatalogEntry(BaseModel):
    """One document: a partition key, its source, and the fingerprint of the bytes last seen there."""

    key: str
    source_path: str
    sha256: str
    size: int
    marker: str
    aliases: list[str] = []  # other source paths holding the very same bytes
    alias_markers: dict[str, str] = {}  # alias → its change marker, so an unchanged copy is not read again
    removed: bool = False
    problem: str = ""  # why the source is not read (a symlink leaving the knowledge base, too large, …)
    first_seen: str
    updated: str

    @property
    def fingerprint(self) -> str:
        if self.problem:  # never read: the fingerprint of the reason, so a new reason runs again
            return "p" + hashlib.sha256(self.problem.encode()).hexdigest()[:15]
        return self.sha256[:16]

    @property
    def run_key(self) -> str:
        """Run key for this version of the document: the same bytes never run twice from the sensor."""
        return f"{self.key}:{self.fingerprint}"


class Catalog(BaseModel):
    entries: dict[str, CatalogEntry] = {}

    def by_path(self) -> dict[str, CatalogEntry]:
        index = {}
        for entry in self.entries.values():
            index[entry.source_path] = entry
            for alias in entry.aliases:
                index[alias] = entry
        return index

    def by_sha(self) -> dict[str, CatalogEntry]:
        return {entry.sha256: entry for entry in self.entries.values() if entry.sha256}

    def active(self) -> list[CatalogEntry]:
        return [entry for entry in self.entries.values() if not entry.removed]


@dataclass
class ScanResult:
    """What one scan changed. ``deferred`` files were not fingerprinted for lack of time and wait a scan."""

    catalog: Catalog
    new: list[str] = field(default_factory=list)
    edited: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    restored: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)  # the source went away, a copy of the same bytes names it now
    duplicates: list[tuple[str, str]] = field(default_factory=list)  # (path, key it duplicates)
    vanished: list[str] = field(default_factory=list)
    deferred: int = 0
    touched: list[str] = field(default_factory=list)  # the entries the scan changed or made (the rest as stored)
    stamp: str = ""  # when the scan ran

    @property
    def changed(self) -> bool:
        return bool(self.new or self.edited or self.removed or self.restored or self.moved or self.duplicates)

    def summary(self) -> str:
        parts = [
            f"{len(self.new)} new",
            f"{len(self.edited)} edited",
            f"{len(self.removed)} removed",
            f"{len(self.duplicates)} duplicate",
        ]
        if self.restored:
            parts.append(f"{len(self.restored)} restored")
        if self.moved:
            parts.append(f"{len(self.moved)} now named by a copy")
        if self.vanished:
            parts.append(f"{len(self.vanished)} vanished while scanning")
        if self.deferred:
            parts.append(f"{self.deferred} deferred to the next scan")
        return ", ".join(parts)


def _fits(name: str, head: bytes) -> bool:
    """Does a file's name agree with what its first bytes are (``x.pdf`` holding text does not)?"""
    try:
        detect_media_type(head, name)
    except DocumentError:
        return False
    return True


class _Aliases:
    """The alias names of the entries one scan touches, each as an insertion-ordered dict: membership and removal
    in constant time, the order of the ``aliases`` list kept. Built per entry on first use; ``names`` gives what the
    entry's aliases are now (the dict, or the untouched list). The entry is held with its names, so its ``id`` is
    not reused while the scan runs."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[CatalogEntry, dict[str, None]]] = {}

    def of(self, entry: CatalogEntry) -> dict[str, None]:
        held = self._held.get(id(entry))
        if held is None:
            held = self._held[id(entry)] = (entry, dict.fromkeys(entry.aliases))
        return held[1]

    def names(self, entry: CatalogEntry) -> Iterable[str]:
        held = self._held.get(id(entry))
        return entry.aliases if held is None else held[1]

    def replaced(self, old: CatalogEntry, new: CatalogEntry) -> None:
        held = self._held.pop(id(old), None)
        if held is not None:
            self._held[id(new)] = (new, held[1])


class _Working:
    """The catalog one scan changes, copy on write: the entries are the stored catalog's own objects until the scan
    changes one (``own``), which then becomes a copy in every index. An unchanged rescan of 100,000 documents copies
    none (a copy of each cost two seconds); ``owned`` is what the scan changed or made."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = Catalog.model_construct(entries=dict(catalog.entries))
        self.entries = self.catalog.entries
        self.by_path = catalog.by_path()
        self.by_sha = catalog.by_sha()
        self.aliases = _Aliases()
        self.owned: dict[int, CatalogEntry] = {}  # id → entry (held, so an id is not reused while the scan runs)

    def own(self, entry: CatalogEntry) -> CatalogEntry:
        """``entry`` as the scan's own, to change: a copy (its alias list and markers too) in its place in the
        entries and the indexes, made once."""
        if id(entry) in self.owned:
            return entry
        copy = entry.model_copy(update={"aliases": list(entry.aliases), "alias_markers": dict(entry.alias_markers)})
        self.adopt(copy)
        if self.entries.get(copy.key) is entry:
            self.entries[copy.key] = copy
        for path in (copy.source_path, *copy.aliases):
            if self.by_path.get(path) is entry:
                self.by_path[path] = copy
        if copy.sha256 and self.by_sha.get(copy.sha256) is entry:
            self.by_sha[copy.sha256] = copy
        self.aliases.replaced(entry, copy)
        return copy

    def adopt(self, entry: CatalogEntry) -> CatalogEntry:
        """A new entry made by the scan: its own from the start."""
        self.owned[id(entry)] = entry
        return entry

    def changed_keys(self) -> list[str]:
        return list(dict.fromkeys(entry.key for entry in self.owned.values() if self.entries.get(entry.key) is entry))


def scan(
    catalog: Catalog,
    listing: Iterable[SourceFile],
    fingerprint: Callable[[str], tuple[str, int]],
    budget_seconds: float = float("inf"),
    head: Callable[[str], bytes] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> ScanResult:
    """Compare a listing with the catalog and return the updated catalog (the input is not modified).

    Files whose size and change marker match the catalog are not read. New or changed files are fingerprinted
    (``fingerprint(path)`` → sha256, size; read in chunks) until ``budget_seconds`` runs out; the rest are counted
    as deferred and picked up by the next scan. A listed ``problem`` (a symlink leaving the knowledge base, a file
    over the size limit) makes an entry that is never read. Of two names for the same bytes, the one whose
    extension fits the bytes names the source (``head(path)`` gives the first bytes to tell; each name is looked at
    once a scan, an empty file never). ``progress(files looked at, files listed)`` is called at most every
    ``PROGRESS_SECONDS`` while the scan runs (never for a scan shorter than that).

    The work is linear in the number of files listed and of aliases in the catalog: every lookup (path, sha256,
    alias, new key) goes through a dict or a set made once a scan, nothing is sorted or searched per file, only the
    entries that change are copied (``ScanResult.touched``), and the catalog is written once, by the caller.
    """
    work = _Working(catalog)
    stamp = now_stamp()  # orders entries changed by concurrent scans
    result = ScanResult(catalog=work.catalog, stamp=stamp)
    entries, path_index, sha_index, aliases, own = work.entries, work.by_path, work.by_sha, work.aliases, work.own
    fresh: dict[str, None] = {}  # the keys new in this scan, in order: ``result.new``
    fitting: dict[str, bool] = {}  # path → does its name fit its bytes (``head`` read once a path)
    seen: set[str] = set()
    deadline = time.monotonic() + budget_seconds

    def fits(path: str, size: int | None = None) -> bool:  # ``size``: just fingerprinted (0: empty, fits no name)
        if path not in fitting:
            try:
                fitting[path] = size != 0 and head is not None and _fits(path, head(path))
            except SourceMissingError:  # gone (a twin's source renamed away) or refused: it names nothing
                fitting[path] = False
        return fitting[path]

    if progress is not None and not isinstance(listing, Sized):
        listing = list(listing)
    total = len(listing) if isinstance(listing, Sized) else 0
    report_at = time.monotonic() + PROGRESS_SECONDS

    for looked_at, source in enumerate(listing):
        if progress is not None and time.monotonic() >= report_at:
            progress(looked_at, total)
            report_at = time.monotonic() + PROGRESS_SECONDS
        seen.add(source.path)
        known = path_index.get(source.path)
        if source.problem:
            key = _problem_entry(work, result, source, known, stamp, fresh)
            path_index[source.path] = entries[key]
            continue
        if known is not None and not known.problem and known.size == source.size and known.marker == source.marker:
            if known.removed and known.source_path == source.path:
                known = own(known)
                known.removed = False
                known.updated = stamp
                result.restored.append(known.key)
            continue
        if known is not None and known.alias_markers.get(source.path) == source.marker and known.size == source.size:
            continue  # a copy already known, unchanged
        if time.monotonic() > deadline:
            result.deferred += 1
            continue
        try:
            digest, size = fingerprint(source.path)
        except SourceMissingError:
            result.vanished.append(source.path)
            seen.discard(source.path)
            continue

        if known is not None and known.source_path == source.path:
            known = own(known)
            if known.removed:
                result.restored.append(known.key)
            elif known.sha256 != digest:
                result.edited.append(known.key)
            if known.removed or known.sha256 != digest:
                known.sha256 = digest
                known.removed = False
                known.problem = ""
                known.updated = stamp
            known.size, known.marker = size, source.marker
            sha_index[digest] = known
            continue
        if known is not None and known.sha256 == digest:  # a known copy touched, same bytes: nothing changed
            own(known).alias_markers[source.path] = source.marker
            continue
        if known is not None:  # an alias whose bytes changed: it becomes a document of its own
            known = own(known)
            aliases.of(known).pop(source.path, None)
            known.alias_markers.pop(source.path, None)

        twin = sha_index.get(digest)
        if twin is not None and twin.removed:  # moved or renamed: the document keeps its key
            twin = own(twin)
            twin.source_path, twin.removed, twin.updated = source.path, False, stamp
            twin.size, twin.marker = size, source.marker
            path_index[source.path] = twin
            result.restored.append(twin.key)
            continue
        if twin is not None:
            if (
                head is not None and not fits(twin.source_path) and fits(source.path, size)
            ):  # the same bytes as x.pdf and x.txt: the name that says what they are names the document
                twin = _rename(work, own(twin), source.path, source.marker, stamp, fresh)
                sha_index[digest] = twin
            elif source.path != twin.source_path:
                names = aliases.of(twin)
                if source.path not in names:
                    twin = own(twin)
                    names[source.path] = None
                    twin.alias_markers[source.path] = source.marker
            result.duplicates.append((source.path, twin.key))
            path_index[source.path] = twin
            continue

        key = make_key(source.path, entries)
        entry = work.adopt(
            CatalogEntry(
                key=key,
                source_path=source.path,
                sha256=digest,
                size=size,
                marker=source.marker,
                first_seen=stamp,
                updated=stamp,
            )
        )
        entries[key] = entry
        path_index[source.path] = entry
        sha_index[digest] = entry
        fresh[key] = None

    result.new = list(fresh)
    for entry in list(entries.values()):
        names = [alias for alias in aliases.names(entry) if alias in seen]  # on disk: a list, in the order found
        markers = {alias: entry.alias_markers[alias] for alias in names if alias in entry.alias_markers}
        gone = not entry.removed and entry.source_path not in seen
        if not gone and names == entry.aliases and markers == entry.alias_markers:
            continue  # as it was: not copied
        entry = own(entry)
        entry.aliases, entry.alias_markers = names, markers
        if not gone:
            continue
        if names:  # the first copy went away, another copy of the same bytes remains
            entry.source_path = names.pop(0)
            entry.marker = entry.alias_markers.pop(entry.source_path, "")
            entry.updated = stamp
            result.moved.append(entry.key)
            continue
        entry.removed = True
        entry.updated = stamp
        result.removed.append(entry.key)
    result.touched = work.changed_keys()
    return result


def _problem_entry(
    work: _Working,
    result: ScanResult,
    source: SourceFile,
    known: CatalogEntry | None,
    stamp: str,
    fresh: dict[str, None],
) -> str:
    """A listed source that will not be read: a catalog entry with the reason (never hashed). Returns its key."""
    entries = work.entries
    if known is not None and known.source_path == source.path:
        if known.problem != source.problem or known.removed:
            known = work.own(known)
            (result.restored if known.removed else result.edited).append(known.key)
            known.problem, known.sha256, known.removed, known.updated = source.problem, "", False, stamp
            known.size, known.marker = source.size, source.marker
        return known.key
    if known is not None:
        work.aliases.of(work.own(known)).pop(source.path, None)
    key = make_key(source.path, entries)
    entries[key] = work.adopt(
        CatalogEntry(
            key=key,
            source_path=source.path,
            sha256="",
            size=source.size,
            marker=source.marker,
            problem=source.problem,
            first_seen=stamp,
            updated=stamp,
        )
    )
    fresh[key] = None
    return key


def _rename(
    work: _Working,
    twin: CatalogEntry,
    path: str,
    marker: str,
    stamp: str,
    fresh: dict[str, None],
) -> CatalogEntry:
    """Make ``path`` the source of ``twin``'s document (the old name becomes an alias); a document first seen in
    this very scan takes the key of its better name. ``twin`` is the scan's own (``_Working.own``)."""
    old, old_marker = twin.source_path, twin.marker
    twin.source_path, twin.marker, twin.updated = path, marker, stamp
    names = work.aliases.of(twin)
    if path in names:
        del names[path]
        twin.alias_markers.pop(path, None)
    if old not in names:
        names[old] = None
        twin.alias_markers[old] = old_marker
    if twin.key in fresh:
        entries = work.entries
        del entries[twin.key]
        del fresh[twin.key]
        renamed = work.adopt(twin.model_copy(update={"key": make_key(path, entries)}))
        work.aliases.replaced(twin, renamed)
        twin = renamed
        entries[twin.key] = twin
        fresh[twin.key] = None
    return twin


def load_catalog(store: Store) -> Catalog:
    """The stored catalog, parsed and validated in one pass (pydantic's JSON reader: 100,000 entries in well under a
    second, where ``json.loads`` then validation took two)."""
    try:
        data = store.read_bytes(CATALOG_PATH)
    except FileNotFoundError:
        return Catalog()
    return Catalog.model_validate_json(data)


def load_entry(store: Store, key: str) -> CatalogEntry | None:
    """One document's entry (``load_entries``)."""
    return load_entries(store, [key]).entries.get(key)


def load_entries(store: Store, keys: Iterable[str]) -> Catalog:
    """The entries of some documents — from their shards, each read once (a run reads a few hundred entries, not the
    whole catalog of a large knowledge base), else from the catalog (one written before shards, or a shard not
    written yet). A key in neither is left out."""
    wanted = list(dict.fromkeys(keys))
    shards: dict[str, Catalog] = {}
    found: dict[str, CatalogEntry] = {}
    for key in wanted:
        path = catalog_shard_path(key)
        if path not in shards:
            try:
                shards[path] = Catalog.model_validate_json(store.read_bytes(path))
            except FileNotFoundError:
                shards[path] = Catalog()
        entry = shards[path].entries.get(key)
        if entry is not None:
            found[key] = entry
    if len(found) < len(wanted):
        whole = load_catalog(store).entries
        found.update({key: whole[key] for key in wanted if key not in found and key in whole})
    return Catalog.model_construct(entries=found)


def save_catalog(store: Store, catalog: Catalog, changed: Iterable[str] = ()) -> Catalog:
    """Write the catalog, merged with what another scanner (the sensor, another `atlas run`) may have written since
    it was read: per document, the entry changed last wins, and documents only the other one knows are kept. The
    shards of the ``changed`` entries are written first (every shard, when the store has none yet: a catalog of an
    older version), then the catalog: a save cut short leaves the catalog as it was, so the next scan finds the same
    changes and writes both again — a shard is never older than the catalog. Returns what was written."""
    stored = load_catalog(store)
    merged = dict(stored.entries)
    for key, entry in catalog.entries.items():
        theirs = merged.get(key)
        if theirs is None or _changed_at(entry) >= _changed_at(theirs):
            merged[key] = entry
    result = Catalog.model_construct(entries=dict(sorted(merged.items())))
    every = not _sharded(store, result)
    shards = {catalog_shard_path(key) for key in (result.entries if every else changed) if key in result.entries}
    if shards:
        members: dict[str, dict[str, CatalogEntry]] = {shard: {} for shard in shards}
        for key, entry in result.entries.items():
            shard = catalog_shard_path(key)
            if shard in members:
                members[shard][key] = entry
        for shard, entries in sorted(members.items()):
            store.write_bytes(shard, Catalog.model_construct(entries=entries).model_dump_json(indent=1).encode())
    store.write_bytes(CATALOG_PATH, result.model_dump_json(indent=1).encode())
    return result


def _sharded(store: Store, catalog: Catalog) -> bool:
    """Has the catalog its shards (the first entry's is there)? A catalog saved before shards existed has none; its
    runs would read the whole catalog until the next save writes them all."""
    first = next(iter(catalog.entries), None)
    return first is None or store.exists(catalog_shard_path(first))


def _changed_at(entry: CatalogEntry) -> datetime:
    return datetime.fromisoformat(entry.updated)


def refresh_catalog(
    knowledge_base: KnowledgeBase,
    store: Store,
    budget_seconds: float = float("inf"),
    progress: Callable[[int, int], None] | None = None,
) -> ScanResult:
    """Scan the knowledge base against the stored catalog and save it (once) when anything changed. ``progress``:
    see ``scan``. ``budget_seconds`` counts from here: the listing and the catalog's reading take their part of it
    (100,000 files: about 2.5 s), and the fingerprints at least a fifth, so a scan always gets on."""
    started = time.monotonic()
    catalog = load_catalog(store)
    listing = knowledge_base.list()
    left = max(budget_seconds - (time.monotonic() - started), budget_seconds / 5)
    result = scan(catalog, listing, knowledge_base.sha256, left, knowledge_base.head, progress)
    changed = [key for key in result.touched if catalog.entries.get(key) != result.catalog.entries.get(key)]
    if result.changed or changed or not _sharded(store, result.catalog):
        duplicated = dict.fromkeys(key for _, key in result.duplicates)  # 100,000 copies of one file: one key
        changed += [*result.new, *result.edited, *result.removed, *result.restored, *duplicated]
        result.catalog = save_catalog(store, result.catalog, changed)
    return result
