"""What a sensor has asked for, per document (partition key → the mark of the version asked for), kept beside its
cursor rather than in it.

A sensor's cursor is stored by Dagster with every tick it makes; a knowledge base of 100,000 documents gave a cursor
of 4.6 MB, written (and kept) each tick. Past ``INLINE`` documents the marks go to the artifact store as one
content-addressed file (``sensors/<sensor>/<sha256>.json``) and the cursor names it, and the file it was made from.
A tick that changes nothing writes nothing. A file goes when a cursor Dagster kept names its successor (the tick
that wrote the successor was saved), or when no cursor has named it for ``ORPHANED_AFTER_SECONDS`` (a tick whose
cursor the daemon never saved, an evaluation from the UI's *Test sensor*): a cursor the daemon may still hand back
never names a file that is gone.
"""

from __future__ import annotations

import hashlib
import json

from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import SENSOR_MARKS

INLINE = 500  # marks kept in the cursor itself (readable in the Dagster UI) up to this many
STORED = ":marks-in"  # the cursor's key naming the stored file (partition keys have no ':')
PREVIOUS = ":marks-from"  # the file the stored one was made from: gone once the cursor naming both is read back
ORPHANED_AFTER_SECONDS = 24 * 3600


class SensorMarks:
    """The marks of one sensor (``name``) in ``store``: ``read`` them from a cursor, ``cursor`` them for the next."""

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.folder = f"{SENSOR_MARKS}/{name}"
        self._read_from = ""  # the stored file the marks were read from

    def read(self, cursor: str | None) -> tuple[dict[str, str], dict[str, str]]:
        """(marks per partition key, the cursor's other entries — those whose key starts with ':'). A cursor of an
        older version (every mark inline) is read as it is; a stored file that is gone or unreadable reads as no
        marks (the planner then asks the run history, and run keys keep a document from running twice)."""
        value = _decode(cursor)
        marks = {key: mark for key, mark in value.items() if not key.startswith(":")}
        extra = {key: mark for key, mark in value.items() if key.startswith(":") and key not in (STORED, PREVIOUS)}
        name = value.get(STORED, "")
        if name:
            try:
                stored = self.store.read_json(self._path(name))
            except (FileNotFoundError, ValueError):
                stored = {}
            marks = {**(stored if isinstance(stored, dict) else {}), **marks}
            self._tidy(current=name, previous=value.get(PREVIOUS, ""))
        self._read_from = name
        return marks, extra

    def cursor(self, marks: dict[str, str], extra: dict[str, str]) -> str:
        """The next cursor: the marks inline when few, else written (once per content) and named."""
        if len(marks) <= INLINE:
            return _encode({**marks, **extra})
        body = json.dumps(marks, separators=(",", ":"), sort_keys=True).encode()
        name = hashlib.sha256(body).hexdigest()[:32]
        if not self.store.exists(self._path(name)):
            self.store.write_bytes(self._path(name), body)
        previous = self._read_from if self._read_from != name else ""
        return _encode({**extra, STORED: name, **({PREVIOUS: previous} if previous else {})})

    def _path(self, name: str) -> str:
        return f"{self.folder}/{name}.json"

    def _tidy(self, current: str, previous: str) -> None:
        """The cursor just read was kept by Dagster: the file it was made from is no longer needed; a file no
        cursor names is deleted once it is a day old."""
        if previous and previous != current:
            self.store.delete(self._path(previous))
        for path in self.store.files(self.folder):
            if path != self._path(current) and self.store.age_seconds(path) > ORPHANED_AFTER_SECONDS:
                self.store.delete(path)


def _decode(cursor: str | None) -> dict[str, str]:
    if not cursor:
        return {}
    try:
        value = json.loads(cursor)
    except json.JSONDecodeError:
        return {}
    return {str(key): str(mark) for key, mark in value.items()} if isinstance(value, dict) else {}


def _encode(value: dict[str, str]) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)
