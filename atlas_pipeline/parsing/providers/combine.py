"""One parse from two providers: the text of one, the tables of another (``ATLAS_TABLES_PARSER``).

The markdown is the text provider's, unchanged — every quote span and page marker refers to it as it would without
the tables provider. The tables are the tables provider's (HTML with their text, page and caption), replacing the
text provider's own list: they are what the prompt offers as the high-fidelity tables, and their plain text is part
of the quote search scope (markdown + tables), so a quote taken from such a table is found there and located as
"table N, row R". Where the tables provider finds no table at all, the text provider's tables are kept, with a
warning, rather than leaving the document without any.
"""

from __future__ import annotations

from atlas_pipeline.parsing.model import ParsedDocument


def with_tables_from(text: ParsedDocument, tables: ParsedDocument) -> ParsedDocument:
    warnings = list(text.warnings) + [f"{tables.provider}: {warning}" for warning in tables.warnings]
    chosen = tables.tables
    if not chosen and text.tables:
        warnings.append(f"{tables.provider} found no table; the {len(text.tables)} table(s) of {text.provider} kept")
        chosen = text.tables
    return text.model_copy(
        update={
            "tables": [table.model_copy(update={"index": n}) for n, table in enumerate(chosen)],
            "engine": f"{text.engine}; tables: {tables.engine}",
            "provider": f"{text.provider} + tables: {tables.provider}",
            "provider_task_id": tables.provider_task_id,
            "provider_version": tables.provider_version,
            "timings": {**text.timings, **{f"tables_{name}": value for name, value in tables.timings.items()}},
            "warnings": warnings,
        }
    )
