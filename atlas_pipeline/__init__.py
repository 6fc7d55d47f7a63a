"""Atlas Pipeline: documents in, structured and quote-verified extractions out, orchestrated by Dagster."""

__version__ = "0.1.0"
