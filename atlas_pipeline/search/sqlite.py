"""The search index in one SQLite file with FTS5 (the embedded default: nothing to run)."""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from atlas_pipeline.search.entries import MATCH_END, MATCH_START, Hit, IndexedDocument, query_terms

SCHEMA = """
CREATE TABLE IF NOT EXISTS documents (key TEXT PRIMARY KEY, mark TEXT, status TEXT, source TEXT, title TEXT,
                                      path TEXT);
CREATE VIRTUAL TABLE IF NOT EXISTS parts USING fts5(key UNINDEXED, part UNINDEXED, field UNINDEXED, title, body,
                                                    tokenize = 'porter unicode61 remove_diacritics 2');
"""


def fts_query(query: str) -> str:
    """Each word or "phrase" quoted (FTS5 operators and punctuation never break a query); all must match."""
    return " ".join('"' + term.replace('"', '""') + '"' for term in query_terms(query))


class SqliteIndex:
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

    def upsert(self, documents: list[IndexedDocument]) -> None:
        with self._db:
            for doc in documents:
                self._db.execute("DELETE FROM parts WHERE key = ?", (doc.key,))
                self._db.execute(
                    "INSERT OR REPLACE INTO documents VALUES (?, ?, ?, ?, ?, ?)",
                    (doc.key, doc.mark, doc.status, doc.source, doc.title, doc.path),
                )
                self._db.executemany(
                    "INSERT INTO parts (key, part, field, title, body) VALUES (?, ?, ?, ?, ?)",
                    [(doc.key, p.part, p.field, doc.title, p.body) for p in doc.parts],
                )

    def remove(self, keys: list[str]) -> None:
        with self._db:
            for key in keys:
                self._db.execute("DELETE FROM parts WHERE key = ?", (key,))
                self._db.execute("DELETE FROM documents WHERE key = ?", (key,))

    def search(self, query: str, status: str = "", field: str = "", source: str = "", limit: int = 20) -> list[Hit]:
        match = fts_query(query)
        if not match:
            return []
        # rank every match (bm25: title weighs 5×), keep the best rows, and only then cut snippets for those
        inner = (
            "SELECT p.rowid FROM parts p JOIN documents d ON d.key = p.key WHERE parts MATCH :match"
            + "".join(
                f" AND {column} = :{name}"
                for column, name, value in (
                    ("d.status", "status", status),
                    ("d.source", "source", source),
                    ("p.field", "field", field),
                )
                if value
            )
            + " ORDER BY bm25(parts, 5.0, 1.0) LIMIT :rows"
        )
        sql = (
            "SELECT p.key, d.title, d.status, d.source, p.part, p.field, "
            f"snippet(parts, 4, '{MATCH_START}', '{MATCH_END}', '…', 16), bm25(parts, 5.0, 1.0) AS score "
            f"FROM parts p JOIN documents d ON d.key = p.key WHERE parts MATCH :match AND p.rowid IN ({inner}) "
            "ORDER BY score"
        )
        args = {"match": match, "status": status, "source": source, "field": field, "rows": limit * 5}
        with contextlib.closing(self._db.execute(sql, args)) as cursor:
            rows = cursor.fetchall()
        best: dict[str, Hit] = {}
        for key, title, status_, source_, part, field_, snippet, score in rows:
            if key not in best:  # rows come best first: a document's first row is its best passage
                best[key] = Hit(key, title, status_, source_, part, field_, snippet, round(-score, 4))
        return list(best.values())[:limit]
