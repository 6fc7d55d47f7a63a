"""Search over everything collected: each document's text, tables and extracted values, kept current by the
``search_index`` asset — SQLite FTS5 on the embedded default, PostgreSQL full-text search when the instance is
PostgreSQL (``ATLAS_SEARCH_BACKEND``)."""
