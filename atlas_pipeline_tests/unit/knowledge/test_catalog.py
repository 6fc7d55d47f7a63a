"""The knowledge-base scan: new, unchanged, edited, removed, restored, renamed and duplicate documents."""

import os
import time

import pytest

from atlas_pipeline.knowledge import catalog as catalog_module
from atlas_pipeline.knowledge.catalog import (
    Catalog,
    load_catalog,
    load_entries,
    load_entry,
    refresh_catalog,
    save_catalog,
    scan,
)
from atlas_pipeline.knowledge.listing import KnowledgeBase, KnowledgeBaseError
from atlas_pipeline.knowledge.partition_keys import MAX_KEY_LENGTH, is_safe_key, make_key, slug_for
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import catalog_shard_path
from atlas_pipeline_tests.support.corpus import copy_into

RCT_A = "rct/PMC1216327.pdf"
RCT_B = "rct/PMC3508963.pdf"


def counting_reader(kb: KnowledgeBase):
    reads: list[str] = []

    def read(path: str) -> tuple[str, int]:
        reads.append(path)
        return kb.sha256(path)

    return read, reads


def test_new_then_unchanged_reads_nothing(knowledge_base, tmp_path):
    copy_into(knowledge_base, RCT_A, RCT_B)
    kb = KnowledgeBase(str(knowledge_base))
    first = scan(Catalog(), kb.list(), kb.sha256)
    assert sorted(first.new) == ["PMC1216327.pdf", "PMC3508963.pdf"]
    read, reads = counting_reader(kb)
    second = scan(first.catalog, kb.list(), read)
    assert not second.changed and reads == []
    assert second.catalog == first.catalog
    assert second.touched == []  # nothing copied: the very entries of the catalog read (copy on write)
    assert all(second.catalog.entries[key] is entry for key, entry in first.catalog.entries.items())


def test_edit_keeps_key_and_changes_fingerprint(knowledge_base):
    (path,) = copy_into(knowledge_base, RCT_A)
    kb = KnowledgeBase(str(knowledge_base))
    first = scan(Catalog(), kb.list(), kb.sha256)
    before = first.catalog.entries["PMC1216327.pdf"]
    path.write_bytes(path.read_bytes() + b"\n% appended revision\n")
    os.utime(path, (1_900_000_000, 1_900_000_000))
    second = scan(first.catalog, kb.list(), kb.sha256)
    after = second.catalog.entries["PMC1216327.pdf"]
    assert second.edited == ["PMC1216327.pdf"] and not second.new
    assert after.sha256 != before.sha256 and after.run_key != before.run_key
    assert after.run_key == f"PMC1216327.pdf:{after.sha256[:16]}"


def test_touch_without_change_is_not_an_edit(knowledge_base):
    (path,) = copy_into(knowledge_base, RCT_A)
    kb = KnowledgeBase(str(knowledge_base))
    first = scan(Catalog(), kb.list(), kb.sha256)
    os.utime(path, (1_900_000_000, 1_900_000_000))
    second = scan(first.catalog, kb.list(), kb.sha256)
    assert not second.edited and not second.new


def test_removed_source_is_flagged_not_deleted_and_can_come_back(knowledge_base):
    (path,) = copy_into(knowledge_base, RCT_A)
    kb = KnowledgeBase(str(knowledge_base))
    first = scan(Catalog(), kb.list(), kb.sha256)
    data = path.read_bytes()
    path.unlink()
    second = scan(first.catalog, kb.list(), kb.sha256)
    assert second.removed == ["PMC1216327.pdf"]
    assert second.catalog.entries["PMC1216327.pdf"].removed is True
    assert second.catalog.active() == []
    path.write_bytes(data)
    third = scan(second.catalog, kb.list(), kb.sha256)
    assert third.restored == ["PMC1216327.pdf"] and not third.new
    assert third.catalog.entries["PMC1216327.pdf"].removed is False
    assert second.catalog.entries["PMC1216327.pdf"].removed is True  # scanned, not changed


def test_duplicate_bytes_are_one_document(knowledge_base):
    copy_into(knowledge_base, RCT_A)
    copy_into(knowledge_base / "copies", RCT_A, rename={RCT_A: "same paper (copy).pdf"})
    kb = KnowledgeBase(str(knowledge_base))
    result = scan(Catalog(), kb.list(), kb.sha256)
    assert list(result.catalog.entries) == ["PMC1216327.pdf"]
    assert result.duplicates == [("copies/same paper (copy).pdf", "PMC1216327.pdf")]
    entry = next(iter(result.catalog.entries.values()))
    assert len(entry.aliases) == 1
    # the next scan reads neither file and reports nothing: a known copy is not news
    read, reads = counting_reader(kb)
    unchanged = scan(result.catalog, kb.list(), read)
    assert reads == [] and not unchanged.changed and unchanged.duplicates == []
    # removing the first copy keeps the document through the other one, and that is a change
    (knowledge_base / entry.source_path).unlink()
    before = unchanged.catalog.model_copy(deep=True)
    again = scan(unchanged.catalog, kb.list(), kb.sha256)
    kept = again.catalog.entries[entry.key]
    assert not kept.removed and kept.source_path == entry.aliases[0] and again.removed == []
    assert again.moved == [entry.key] and again.changed and again.touched == [entry.key]
    assert unchanged.catalog == before  # the catalog scanned is never changed: the scan changed its own copy
    read, reads = counting_reader(kb)
    assert not scan(again.catalog, kb.list(), read).changed and reads == []


def test_rename_keeps_the_key(knowledge_base):
    (path,) = copy_into(knowledge_base, RCT_A)
    kb = KnowledgeBase(str(knowledge_base))
    first = scan(Catalog(), kb.list(), kb.sha256)
    path.rename(knowledge_base / "renamed.pdf")
    second = scan(first.catalog, kb.list(), kb.sha256)
    assert list(second.catalog.entries) == ["PMC1216327.pdf"]
    entry = second.catalog.entries["PMC1216327.pdf"]
    assert entry.source_path == "renamed.pdf" and not entry.removed and not second.new


def test_rename_keeps_the_key_when_names_are_checked(knowledge_base, tmp_path):
    """The scan that tells x.pdf from x.txt looks at the first bytes of a document's source: a source renamed away
    is not there to look at, and the renamed file names the document (that look stopped every scan before)."""
    (knowledge_base / "paper.pdf").write_bytes(b"%PDF-1.4 a paper")
    kb, store = KnowledgeBase(str(knowledge_base)), Store(str(tmp_path / "artifacts"))
    (key,) = refresh_catalog(kb, store).new
    (knowledge_base / "paper.pdf").rename(knowledge_base / "a renamed paper.pdf")
    renamed = refresh_catalog(kb, store)
    assert list(renamed.catalog.entries) == [key] and not renamed.new and not renamed.removed
    entry = renamed.catalog.entries[key]
    assert entry.source_path == "a renamed paper.pdf" and entry.aliases == [] and not entry.removed
    assert not refresh_catalog(kb, store).changed


def test_moved_document_whose_old_name_gets_other_bytes(knowledge_base):
    """A removed document's bytes come back under another name while its old name gets other bytes, in one scan:
    the document follows its bytes, the old name is a new document (a failed list removal stopped the scan before)."""
    (knowledge_base / "a.txt").write_text("the first text")
    kb = KnowledgeBase(str(knowledge_base))
    first = scan(Catalog(), kb.list(), kb.sha256, head=kb.head)
    (knowledge_base / "a.txt").unlink()
    second = scan(first.catalog, kb.list(), kb.sha256, head=kb.head)
    assert second.removed == ["a.txt"]
    (knowledge_base / "0 moved.txt").write_text("the first text")
    (knowledge_base / "a.txt").write_text("another text")
    third = scan(second.catalog, kb.list(), kb.sha256, head=kb.head)
    assert third.restored == ["a.txt"] and third.catalog.entries["a.txt"].source_path == "0 moved.txt"
    (new_key,) = third.new
    assert new_key != "a.txt" and third.catalog.entries[new_key].source_path == "a.txt"


def test_progress_of_a_long_scan(knowledge_base, monkeypatch):
    """``progress(files looked at, files listed)``: at most every ``PROGRESS_SECONDS``, so never for a quick scan."""
    for number in range(5):
        (knowledge_base / f"note-{number}.txt").write_text(f"note {number}\n")
    kb = KnowledgeBase(str(knowledge_base))
    calls: list[tuple[int, int]] = []
    scan(Catalog(), kb.list(), kb.sha256, progress=lambda done, total: calls.append((done, total)))
    assert calls == []
    monkeypatch.setattr(catalog_module, "PROGRESS_SECONDS", 0.0)
    result = scan(Catalog(), iter(kb.list()), kb.sha256, progress=lambda done, total: calls.append((done, total)))
    assert calls == [(number, 5) for number in range(5)] and len(result.new) == 5  # a listing without a length too


def test_budget_defers_work_to_the_next_scan(knowledge_base):
    for number in range(30):
        (knowledge_base / f"note-{number:03}.txt").write_text(f"note {number}\n")
    kb = KnowledgeBase(str(knowledge_base))
    first = scan(Catalog(), kb.list(), kb.sha256, budget_seconds=0.0)
    assert first.deferred == 30 and first.new == []
    second = scan(first.catalog, kb.list(), kb.sha256)
    assert len(second.new) == 30 and second.deferred == 0


def test_a_listing_slower_than_the_budget_leaves_the_fingerprints_their_fifth(knowledge_base, tmp_path):
    """The sensor's budget counts the listing and the catalog too (a tick under 10 s at 100,000 files); a listing
    that takes it all still leaves a fifth to fingerprint, so a scan always gets on."""
    for number in range(30):
        (knowledge_base / f"note-{number:03}.txt").write_text(f"note {number}\n")

    class SlowListing(KnowledgeBase):
        def list(self):
            time.sleep(0.5)
            return super().list()

    store = Store(str(tmp_path / "artifacts"))
    result = refresh_catalog(SlowListing(str(knowledge_base)), store, budget_seconds=0.4)
    assert result.new and len(result.new) + result.deferred == 30


def test_a_knowledge_base_that_cannot_be_listed_is_an_error_not_an_empty_one(knowledge_base, monkeypatch):
    """An empty listing would mark every document removed: the folder refusing its listing is said instead (the
    sensor then skips its tick and keeps every result)."""
    copy_into(knowledge_base, RCT_A)
    kb = KnowledgeBase(str(knowledge_base))
    scandir = os.scandir

    def refusing(path):
        if os.path.realpath(path) == os.path.realpath(knowledge_base):
            raise PermissionError(13, "Permission denied", str(path))
        return scandir(path)

    monkeypatch.setattr(os, "scandir", refusing)
    with pytest.raises(KnowledgeBaseError, match=r"cannot be listed: .*Permission denied"):
        kb.list()


def test_hidden_and_partial_files_are_not_documents(knowledge_base):
    (knowledge_base / ".DS_Store").write_bytes(b"x")
    (knowledge_base / "download.pdf.part").write_bytes(b"%PDF-")
    (knowledge_base / "paper.txt").write_text("text")
    assert [f.path for f in KnowledgeBase(str(knowledge_base)).list()] == ["paper.txt"]


def test_refresh_persists_the_catalog(knowledge_base, tmp_path):
    copy_into(knowledge_base, RCT_A)
    store = Store(str(tmp_path / "artifacts"))
    result = refresh_catalog(KnowledgeBase(str(knowledge_base)), store)
    assert load_catalog(store) == result.catalog


def test_two_scanners_at_once_lose_nothing_and_runs_read_one_entry(knowledge_base, tmp_path):
    """The sensor and `atlas run` scan together: each read the catalog before the other saved. Both saves keep
    every entry (per entry, the later change wins), and a run reads its document's own entry file."""
    store = Store(str(tmp_path / "artifacts"))
    kb = KnowledgeBase(str(knowledge_base))
    stale = load_catalog(store)  # the second scanner's read, before anything was saved
    copy_into(knowledge_base, RCT_A)
    first = refresh_catalog(kb, store)
    (key_a,) = first.new
    copy_into(knowledge_base, RCT_B)
    second = scan(stale, kb.list(), kb.sha256)  # knows both files, from an empty catalog
    assert set(second.new) == {key_a, "PMC3508963.pdf"}
    (tmp_path / "kb" / "PMC1216327.pdf").write_bytes(b"%PDF-1.4 edited after the second scanner read it")
    edited = refresh_catalog(kb, store)
    assert edited.edited == [key_a]
    save_catalog(store, second.catalog, second.new)  # the slower scanner saves last
    saved = load_catalog(store)
    assert set(saved.entries) == {key_a, "PMC3508963.pdf"}
    assert saved.entries[key_a].sha256 == edited.catalog.entries[key_a].sha256  # the later change won
    assert load_entry(store, key_a) == saved.entries[key_a]
    assert load_entry(store, "PMC3508963.pdf") == saved.entries["PMC3508963.pdf"]
    assert load_entry(store, "NOPE.pdf") is None
    for shard in store.files("catalog/shards"):  # a store of an older version has no shards: the next scan adds them
        store.delete(shard)
    refresh_catalog(kb, store)
    assert {catalog_shard_path(key) for key in saved.entries} == set(store.files("catalog/shards"))
    both = load_entries(store, [key_a, "NOPE.pdf", "PMC3508963.pdf"]).entries  # a batch run's documents
    assert both == {key: saved.entries[key] for key in (key_a, "PMC3508963.pdf")}
    shard = Catalog.model_validate_json(store.read_bytes(catalog_shard_path(key_a)))  # a run reads its shard
    assert shard.entries[key_a] == saved.entries[key_a] and len(store.files("catalog/shards")) <= 2


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("PMC1216327.pdf", "PMC1216327.pdf"),
        ("dir/Étude clinique, phase 2.pdf", "Etude-clinique-phase-2.pdf"),
        ("../../etc/passwd", "passwd"),
        ("a/..hidden...pdf", "hidden.pdf"),
        ("sub/日本語.pdf", "pdf"),
        ("weird\n\tname\x00.txt", "weird-name-.txt"),
        ("///", "document"),
    ],
)
def test_slugs_are_readable_and_safe(path, expected):
    assert slug_for(path) == expected
    assert is_safe_key(slug_for(path))


def test_keys_are_unique_stable_and_bounded():
    taken: set[str] = set()
    first = make_key("a/report.pdf", taken)
    taken.add(first)
    second = make_key("b/report.pdf", taken)
    assert first == "report.pdf" and second.startswith("report.pdf-") and second != first
    assert make_key("b/report.pdf", taken) == second  # deterministic for the same path
    long_key = make_key("x" * 500 + ".pdf", set())
    assert len(long_key) <= MAX_KEY_LENGTH and is_safe_key(long_key)
