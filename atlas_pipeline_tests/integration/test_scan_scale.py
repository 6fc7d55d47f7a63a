"""A knowledge-base scan is linear in the number of files (issue #40).

100,000 copies of one empty file are one document with 99,999 aliases. With a list search per alias, 10,000 copies
took 25 s, 50,000 took 214 s and 100,000 never ended (nothing saved meanwhile); now the scan of 100,000 takes about
ten times the scan of 10,000, a rescan of them reads no file, and a long scan says how far it got.
"""

import hashlib
import itertools
import json
import os
import time
from pathlib import Path

from atlas_pipeline.knowledge.catalog import PROGRESS_SECONDS, Catalog, ScanResult, refresh_catalog, scan
from atlas_pipeline.knowledge.listing import KnowledgeBase, SourceFile
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import CATALOG_PATH

BIG = 100_000
SMALL = 10_000


def empty_files(folder: Path, count: int) -> Path:
    folder.mkdir()
    for number in range(count):
        os.close(os.open(folder / f"copy-{number:06d}.txt", os.O_CREAT | os.O_WRONLY, 0o644))
    return folder


class ReadsNothing(KnowledgeBase):
    """A knowledge base whose files must not be read (a rescan of unchanged files)."""

    def sha256(self, relative: str) -> tuple[str, int]:
        raise AssertionError(f"{relative} read again")

    def head(self, relative: str, size: int = 8192) -> bytes:
        raise AssertionError(f"{relative} read again")


def timed(scan) -> tuple[ScanResult, float]:
    started = time.perf_counter()
    result = scan()
    return result, time.perf_counter() - started


def test_copies_of_one_empty_file_scan_in_linear_time(tmp_path):
    small_kb = empty_files(tmp_path / "small", SMALL)
    small, small_seconds = timed(lambda: refresh_catalog(KnowledgeBase(str(small_kb)), Store(str(tmp_path / "a1"))))
    assert len(next(iter(small.catalog.entries.values())).aliases) == SMALL - 1

    big_kb = empty_files(tmp_path / "big", BIG)
    store = Store(str(tmp_path / "artifacts"))
    calls: list[tuple[int, int, float]] = []
    big, seconds = timed(
        lambda: refresh_catalog(
            KnowledgeBase(str(big_kb)),
            store,
            progress=lambda done, total: calls.append((done, total, time.monotonic())),
        )
    )
    # identical empty files: one document named by the first, the others its aliases (an empty file is a document,
    # it ends `failed` "empty file (0 bytes)" when extracted; its copies are not documents of their own)
    (entry,) = big.catalog.entries.values()
    assert big.new == [entry.key] == ["copy-000000.txt"] and entry.source_path == "copy-000000.txt"
    assert entry.size == 0 and len(big.duplicates) == BIG - 1
    assert len(entry.aliases) == BIG - 1 and entry.aliases == [f"copy-{n:06d}.txt" for n in range(1, BIG)]
    assert set(entry.alias_markers) == set(entry.aliases)
    on_disk = json.loads((tmp_path / "artifacts" / CATALOG_PATH).read_text())["entries"][entry.key]
    assert on_disk["aliases"] == entry.aliases  # on disk still a list, in the listing's order
    print(f"\nscan of {SMALL:,} copies: {small_seconds:.1f} s, of {BIG:,}: {seconds:.1f} s")
    assert seconds < 120
    assert seconds < 25 * max(small_seconds, 0.2), (small_seconds, seconds)  # ten times the files: ~10×, not ~100×

    # a long scan reports how far it got, at most once a second
    assert all(total == BIG and 0 < done < BIG for done, total, _ in calls)
    assert [done for done, _, _ in calls] == sorted(done for done, _, _ in calls)
    assert all(later - earlier >= PROGRESS_SECONDS for (_, _, earlier), (_, _, later) in itertools.pairwise(calls))
    assert len(calls) <= seconds / PROGRESS_SECONDS + 1
    if seconds > 2 * PROGRESS_SECONDS:
        assert calls

    # the same 100,000 files again: nothing read, nothing changed, quick
    rescan, rescan_seconds = timed(lambda: refresh_catalog(ReadsNothing(str(big_kb)), store))
    print(f"rescan of {BIG:,} unchanged copies: {rescan_seconds:.1f} s")
    assert not rescan.changed and rescan.catalog == big.catalog
    assert rescan_seconds < 60 and rescan_seconds < 3 * seconds + 5


class Listing:
    """A knowledge base in memory (path → bytes, marker, problem): the scan's own work, without the disk's."""

    def __init__(self) -> None:
        self.files: dict[str, tuple[bytes, str, str]] = {}

    def put(self, path: str, data: bytes, marker: str = "1", problem: str = "") -> None:
        self.files[path] = (data, marker, problem)

    def scan(self, catalog: Catalog) -> ScanResult:
        listing = [SourceFile(p, len(d), m, problem) for p, (d, m, problem) in sorted(self.files.items())]
        return scan(catalog, listing, self.fingerprint, head=lambda path: self.files[path][0][:8192])

    def fingerprint(self, path: str) -> tuple[str, int]:
        data = self.files[path][0]
        return hashlib.sha256(data).hexdigest(), len(data)


def copies_changing(count: int) -> tuple[float, float, ScanResult]:
    """``count`` copies of one text; then every other copy gets bytes of its own and one in ten is refused."""
    kb = Listing()
    for number in range(count):
        kb.put(f"copy-{number:06d}.txt", b"the same words")
    first, first_seconds = timed(lambda: kb.scan(Catalog()))
    (entry,) = first.catalog.entries.values()
    assert len(entry.aliases) == count - 1
    for number in range(1, count, 2):
        kb.put(f"copy-{number:06d}.txt", f"words of copy {number}".encode(), marker="2")
    for number in range(2, count, 10):
        kb.put(f"copy-{number:06d}.txt", b"", marker="2", problem="too large: 900.0 MB; not read")
    second, second_seconds = timed(lambda: kb.scan(first.catalog))
    return first_seconds, second_seconds, second


def test_aliases_changing_bytes_or_refused_are_linear():
    """An alias whose bytes change, or that is refused, leaves its document: one removal each, not a list search."""
    small = copies_changing(SMALL)
    first_seconds, second_seconds, result = copies_changing(BIG)
    kept = result.catalog.entries["copy-000000.txt"]
    assert len(result.new) == BIG // 2 + BIG // 10 and not result.removed
    assert kept.aliases == [f"copy-{n:06d}.txt" for n in range(1, BIG) if n % 2 == 0 and n % 10 != 2]
    assert set(kept.alias_markers) == set(kept.aliases)
    print(f"\n{BIG:,} copies: {first_seconds:.1f} s; half of them changed: {second_seconds:.1f} s")
    assert first_seconds < 60 and second_seconds < 60
    assert first_seconds < 25 * max(small[0], 0.2), (small[:2], first_seconds)
    assert second_seconds < 25 * max(small[1], 0.2), (small[:2], second_seconds)


def test_many_documents_named_by_their_better_name_are_linear():
    """``x.pdf`` holding text and ``x.txt`` with the same bytes: the ``.txt`` names the document, first seen in this
    scan, so the document takes its key (a search through the scan's new keys per rename before)."""

    def pairs(count: int) -> tuple[ScanResult, float]:
        kb = Listing()
        for number in range(count):
            text = f"trial report {number}".encode()
            kb.put(f"doc-{number:06d}.pdf", text)
            kb.put(f"doc-{number:06d}.txt", text)
        return timed(lambda: kb.scan(Catalog()))

    _, small_seconds = pairs(SMALL // 2)
    result, seconds = pairs(BIG // 2)
    assert len(result.new) == BIG // 2 and result.new[:2] == ["doc-000000.txt", "doc-000001.txt"]
    entry = result.catalog.entries["doc-000123.txt"]
    assert entry.source_path == "doc-000123.txt" and entry.aliases == ["doc-000123.pdf"]
    print(f"\n{BIG // 2:,} pairs renamed: {seconds:.1f} s")
    assert seconds < 60 and seconds < 25 * max(small_seconds, 0.2), (small_seconds, seconds)
