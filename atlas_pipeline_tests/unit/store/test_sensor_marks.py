"""A sensor's marks beside its cursor: few inline, many in one content-addressed file the cursor names."""

import json
import os

from atlas_pipeline.store.files import Store
from atlas_pipeline.store.sensor_marks import INLINE, ORPHANED_AFTER_SECONDS, SensorMarks

FOLDER = "sensors/knowledge_base_sensor"


def marks_of(count: int, version: str = "a") -> dict[str, str]:
    return {f"note-{number:06d}.txt": f"{number:016x}:{version}" for number in range(count)}


def tick(store: Store, cursor: str | None, marks: dict[str, str], extra: dict[str, str] | None = None) -> str:
    """One evaluation: the cursor read, the next one made (a book per evaluation, as in the sensor)."""
    book = SensorMarks(store, "knowledge_base_sensor")
    book.read(cursor)
    return book.cursor(marks, extra or {})


def test_few_marks_stay_in_the_cursor(tmp_path):
    store = Store(str(tmp_path))
    cursor = tick(store, None, marks_of(3), {":faulted-batches-seen": "12.5"})
    assert json.loads(cursor)["note-000001.txt"] == "0000000000000001:a"
    book = SensorMarks(store, "knowledge_base_sensor")
    assert book.read(cursor) == (marks_of(3), {":faulted-batches-seen": "12.5"})
    assert store.files("sensors") == []


def test_many_marks_go_to_one_file_the_cursor_names(tmp_path):
    store = Store(str(tmp_path))
    first = tick(store, None, marks_of(INLINE + 1), {":seen": "1"})
    assert len(first) < 200
    assert SensorMarks(store, "x").read(first) == ({}, {":seen": "1"})  # another sensor's folder: not its marks
    assert SensorMarks(store, "knowledge_base_sensor").read(first) == (marks_of(INLINE + 1), {":seen": "1"})
    (stored,) = store.files(FOLDER)
    written = os.stat(tmp_path / stored).st_mtime_ns
    again = tick(store, first, marks_of(INLINE + 1), {":seen": "2"})  # the same marks: the same file, untouched
    assert store.files(FOLDER) == [stored] and os.stat(tmp_path / stored).st_mtime_ns == written
    assert SensorMarks(store, "knowledge_base_sensor").read(again)[0] == marks_of(INLINE + 1)


def test_a_file_goes_only_once_a_kept_cursor_names_its_successor(tmp_path):
    store = Store(str(tmp_path))
    first = tick(store, None, marks_of(INLINE + 1))
    (kept,) = store.files(FOLDER)
    tick(store, first, marks_of(INLINE + 2))  # a tick whose cursor the daemon never saved (it crashed) ...
    assert len(store.files(FOLDER)) == 2
    assert SensorMarks(store, "knowledge_base_sensor").read(first)[0] == marks_of(INLINE + 1)  # ... read intact
    second = tick(store, first, marks_of(INLINE + 3))  # the next tick reads `first` again
    assert kept in store.files(FOLDER) and len(store.files(FOLDER)) == 3  # nothing a cursor may name goes
    third = tick(store, second, marks_of(INLINE + 4))  # `second` was kept: the file it was made from goes
    assert kept not in store.files(FOLDER)
    book = SensorMarks(store, "knowledge_base_sensor")
    assert book.read(third)[0] == marks_of(INLINE + 4)
    for path in store.files(FOLDER):  # the unsaved tick's file, a day later, goes too
        old = (tmp_path / path).stat().st_mtime - ORPHANED_AFTER_SECONDS - 60
        os.utime(tmp_path / path, (old, old))
    book.read(third)
    assert len(store.files(FOLDER)) == 1  # what `third` names


def test_an_older_cursor_a_lost_file_and_a_broken_one_are_read_without_error(tmp_path):
    store = Store(str(tmp_path))
    book = SensorMarks(store, "review_sensor")
    legacy = json.dumps({**marks_of(INLINE + 10), ":duplicate-splits": "3.0"})
    assert book.read(legacy) == (marks_of(INLINE + 10), {":duplicate-splits": "3.0"})
    cursor = SensorMarks(store, "review_sensor").cursor(marks_of(INLINE + 10), {})
    (path,) = store.files("sensors/review_sensor")
    store.write_bytes(path, b'{"note-000001.txt": "half writ')
    assert SensorMarks(store, "review_sensor").read(cursor) == ({}, {})  # the planner asks the run history again
    store.delete(path)
    assert SensorMarks(store, "review_sensor").read(cursor) == ({}, {})
    assert book.read("not json") == ({}, {}) and book.read(None) == ({}, {})
