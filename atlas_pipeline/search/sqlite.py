"""The search index in one SQLite file with FTS5 (the embedded default: nothing to run)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from atlas_pipeline.search.entries import MATCH_END, MATCH_START, Hit, IndexedDocument, query_terms
from atlas_pipeline.search.index import SearchIndexBase

# ``part_keys`` maps each FTS row to its document through a real index: replacing or removing one document's rows
# never scans the FTS table (a filter on an UNINDEXED column would, for every document).
SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (key TEXT PRIMARY KEY, mark TEXT, status TEXT, source TEXT, title TEXT,
                                      path TEXT);
CREATE VIRTUAL TABLE IF NOT EXISTS parts USING fts5(key UNINDEXED, part UNINDEXED, field UNINDEXED, title, body,
                                                    tokenize = 'porter unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS part_keys (id INTEGER PRIMARY KEY, key TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS part_keys_key ON part_keys (key);
"""


def fts_query(query: str) -> str:
    """Each word or "phrase" quoted (FTS5 operators and punctuation never break a query); all must match."""
    return " ".join('"' + term.replace('"', '""') + '"' for term in query_terms(query))


class SqliteIndex(SearchIndexBase):
    backend = "sqlite"

    def __init__(self, path: str) -> None:
        Path(path).parent.mkdir(parents=True, exist_ok=True)
        self.location = path
        self._db = sqlite3.connect(path, timeout=60)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def marks(self) -> dict[str, str]:
        return dict(self._db.execute("SELECT key, mark FROM documents"))

    def count(self) -> int:
        return self._db.execute("SELECT count(*) FROM documents").fetchone()[0]

    def _delete_parts(self, key: str) -> None:
        self._db.execute("DELETE FROM parts WHERE rowid IN (SELECT id FROM part_keys WHERE key = ?)", (key,))
        self._db.execute("DELETE FROM part_keys WHERE key = ?", (key,))

    def upsert(self, documents: list[IndexedDocument]) -> None:
        with self._db:
            for doc in documents:
                self._delete_parts(doc.key)
                self._db.execute(
                    "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?)",
                    (doc.key, doc.mark, doc.status, doc.source, doc.title, doc.path),
                )
                for p in doc.parts:
                    row = self._db.execute(
                        "INSERT INTO parts (key, part, field, title, body) VALUES (?, ?, ?, ?, ?)",
                        (doc.key, p.part, p.field, doc.title, p.body),
                    ).lastrowid
                    self._db.execute("INSERT INTO part_keys (id, key) VALUES (?, ?)", (row, doc.key))

    def remove(self, keys: list[str]) -> None:
        with self._db:
            for key in keys:
                self._delete_parts(key)
                self._db.execute("DELETE FROM documents WHERE key = ?", (key,))

    def search(self, query: str, status: str = "", field: str = "", source: str = "", limit: int = 20) -> list[Hit]:
        match = fts_query(query)
        if not match or limit < 1:
            return []
        filters = "".join(
            f" AND {column} = :{name}"
            for column, name, value in (
                ("d.status", "status", status),
                ("d.source", "source", source),
                ("p.field", "field", field),
            )
            if value
        )
        # every match ranked (bm25; the title weighs 5×), each document's best row kept, the best documents chosen
        # — and only then are snippets cut, for those rows alone
        best_rows = (
            "SELECT id FROM (SELECT id, score, row_number() OVER (PARTITION BY key ORDER BY score) AS n FROM ("
            "SELECT p.rowid AS id, p.key AS key, bm25(parts, 5.0, 1.0) AS score FROM parts p "
            f"JOIN documents d ON d.key = p.key WHERE parts MATCH :match{filters})) "
            "WHERE n = 1 ORDER BY score LIMIT :limit"
        )
        sql = (
            "SELECT p.key, d.title, d.status, d.source, p.part, p.field, "
            f"snippet(parts, 4, '{MATCH_START}', '{MATCH_END}', '…', 16), bm25(parts, 5.0, 1.0) AS score "
            f"FROM parts p JOIN documents d ON d.key = p.key WHERE parts MATCH :match AND p.rowid IN ({best_rows}) "
            "ORDER BY score"
        )
        args = {"match": match, "status": status, "source": source, "field": field, "limit": limit}
        with contextlib.closing(self._db.execute(sql, args)) as cursor:
            rows = cursor.fetchall()
        return [
            Hit(key, title, st, src, part, fld, snippet, round(-score, 4))
            for key, title, st, src, part, fld, snippet, score in rows
        ]
