"""The search index in the Dagster instance's PostgreSQL database: full-text search with a GIN index."""

from __future__ import annotations

from atlas_pipeline.search.entries import (
    MATCH_END,
    MATCH_START,
    Hit,
    IndexedDocument,
    query_terms,
)
from atlas_pipeline.search.index import SearchIndexBase

SCHEMA = [
    """CREATE TABLE IF NOT EXISTS atlas_search_documents (key TEXT PRIMARY KEY, mark TEXT, status TEXT,
       source TEXT, title TEXT, path TEXT)""",
    """CREATE TABLE IF NOT EXISTS atlas_search_parts (key TEXT REFERENCES atlas_search_documents(key) ON DELETE
       CASCADE, part TEXT, field TEXT, title TEXT, body TEXT,
       tsv tsvector GENERATED ALWAYS AS (setweight(to_tsvector('english', coalesce(title, '')), 'A') ||
                                         setweight(to_tsvector('english', coalesce(body, '')), 'B')) STORED)""",
    "CREATE INDEX IF NOT EXISTS atlas_search_parts_tsv ON atlas_search_parts USING GIN (tsv)",
    "CREATE INDEX IF NOT EXISTS atlas_search_parts_key ON atlas_search_parts (key)",
]
HEADLINE = f"StartSel={MATCH_START}, StopSel={MATCH_END}, MaxWords=24, MinWords=8, MaxFragments=1, FragmentDelimiter=…"
ANALYZE_AFTER = 100
MAX_BODY = 900_000  # a tsvector holds at most 1 MB: very long texts are indexed in their first part


class PostgresIndex(SearchIndexBase):
    backend = "postgres"

    def __init__(self, url: str) -> None:
        import sqlalchemy as sa

        self._sa = sa
        self.location = url.split("@")[-1]  # host/db: never the password
        self._engine = sa.create_engine(url, pool_pre_ping=True)
        with self._engine.begin() as connection:
            connection.execute(sa.text("SELECT pg_advisory_xact_lock(7146)"))  # two creators at once
            for statement in SCHEMA:
                connection.execute(sa.text(statement))

    def close(self) -> None:
        self._engine.dispose()

    def marks(self) -> dict[str, str]:
        with self._engine.connect() as connection:
            rows = connection.execute(self._sa.text("SELECT key, mark FROM atlas_search_documents"))
            return {key: mark for key, mark in rows}

    def count(self) -> int:
        with self._engine.connect() as connection:
            return connection.execute(self._sa.text("SELECT count(*) FROM atlas_search_documents")).scalar_one()

    def upsert(self, documents: list[IndexedDocument]) -> None:
        text = self._sa.text
        with self._engine.begin() as connection:
            for doc in documents:
                # two refreshes at once (the automation and `atlas run`) take turns per document: no double rows
                connection.execute(text("SELECT pg_advisory_xact_lock(hashtext(:key))"), {"key": doc.key})
                connection.execute(text("DELETE FROM atlas_search_parts WHERE key = :key"), {"key": doc.key})
                connection.execute(
                    text(
                        "INSERT INTO atlas_search_documents VALUES (:key, :mark, :status, :source, :title, :path) "
                        "ON CONFLICT (key) DO UPDATE SET mark = :mark, status = :status, source = :source, "
                        "title = :title, path = :path"
                    ),
                    {
                        "key": doc.key,
                        "mark": doc.mark,
                        "status": doc.status,
                        "source": doc.source,
                        "title": doc.title,
                        "path": doc.path,
                    },
                )
                if doc.parts:
                    connection.execute(
                        text(
                            "INSERT INTO atlas_search_parts (key, part, field, title, body) "
                            "VALUES (:key, :part, :field, :title, :body)"
                        ),
                        [
                            {
                                "key": doc.key,
                                "part": p.part,
                                "field": p.field,
                                "title": doc.title,
                                "body": p.body[:MAX_BODY].replace("\x00", ""),
                            }
                            for p in doc.parts
                        ],
                    )

        if len(documents) >= ANALYZE_AFTER:  # fresh statistics: the planner then uses the GIN index
            with self._engine.begin() as connection:
                connection.execute(text("ANALYZE atlas_search_parts"))

    def remove(self, keys: list[str]) -> None:
        with self._engine.begin() as connection:
            for key in keys:
                connection.execute(self._sa.text("DELETE FROM atlas_search_documents WHERE key = :key"), {"key": key})

    def search(self, query: str, status: str = "", field: str = "", source: str = "", limit: int = 20) -> list[Hit]:
        terms = query_terms(query)
        if not terms or limit < 1:
            return []
        # every word, and every "quoted phrase" as a phrase, must match; what people type is never an operator
        pieces = [
            f"{'phraseto_tsquery' if ' ' in term.strip() else 'plainto_tsquery'}('english', :t{n})"
            for n, term in enumerate(terms)
        ]
        sql = (
            f"WITH q AS (SELECT ({' && '.join(pieces)}) AS query), "
            "ranked AS (SELECT p.key, d.title, d.status, d.source, p.part, p.field, p.body, "
            "ts_rank_cd(p.tsv, q.query) AS score, "
            "row_number() OVER (PARTITION BY p.key ORDER BY ts_rank_cd(p.tsv, q.query) DESC) AS n "
            "FROM atlas_search_parts p JOIN atlas_search_documents d ON d.key = p.key, q WHERE p.tsv @@ q.query"
        )
        args: dict = {"limit": limit, "options": HEADLINE, **{f"t{n}": term for n, term in enumerate(terms)}}
        for column, name, value in (("d.status", "status", status), ("d.source", "source", source)):
            if value:
                sql += f" AND {column} = :{name}"
                args[name] = value
        if field:
            sql += " AND p.field = :field"
            args["field"] = field
        sql += (
            ") SELECT key, title, status, source, part, field, "
            "ts_headline('english', body, (SELECT query FROM q), :options), score "
            "FROM ranked WHERE n = 1 ORDER BY score DESC, key LIMIT :limit"
        )
        with self._engine.connect() as connection:
            rows = connection.execute(self._sa.text(sql), args).all()
        return [Hit(r[0], r[1], r[2], r[3], r[4], r[5], r[6], round(float(r[7]), 4)) for r in rows]
