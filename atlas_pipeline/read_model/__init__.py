"""The document read model: where each document stands — its status with the reason (``core.document_status``),
its records, its review, its duplicate group and study — as the aggregates, the exports, search, the review page and
the CLI read it. Built from facts handed in (Dagster's are read in ``defs``), so it never imports Dagster."""
