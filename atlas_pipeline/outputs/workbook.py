"""The xlsx a reviewer opens: styled tables, typed cells, rows that need a person coloured, long values cut visibly.

Each sheet is an Excel table (bold header, banded rows, filters, frozen header) whose columns are as wide as their
content up to a cap, with long text wrapped. Cells keep their type: counts are whole numbers, rates percentages,
flags TRUE/FALSE, and a field's value is a number when it is one. Rows that need a person are coloured — failed and
skipped documents, documents still open, fields whose tier or flags need review — and an empty sheet says why.
Excel holds at most 32,767 characters in a cell: a longer value is cut with a marker saying so, and the full value
stays in the parquet and jsonl exports (``truncate_for_cells`` does the same for csv). A sheet holds at most
1,048,575 rows below its header: a longer table goes on in sheets ``fields (2)``, ``fields (3)``… (a row past
Excel's last is otherwise dropped without a word). A table longer than the team's cap (``max_rows``,
``ATLAS_REVIEW_WORKBOOK_SHEET_ROWS``) keeps its first rows — the fields awaiting a person come first — and says below
them how many more there are and where every row is.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence

import polars as pl

from atlas_pipeline.outputs.export_files import APPROVED_STEM, EXPORT_STEM, FIELDS_STEM, STUDIES
from atlas_pipeline.store.layout import export_path

CELL_LIMIT = 32_000  # below Excel's 32,767 and far below csv readers' field limits (Python's: 131,072)
MAX_WIDTH = 60
WRAP_FROM = 40
_NUMBER = re.compile(r"^-?\d+(\.\d+)?([eE][-+]?\d+)?$")
STATUS_FILLS = {
    "failed": "#F8CBAD",
    "skipped": "#D9D9D9",
    "cancelled": "#D9D9D9",
    "pending": "#FFF2CC",
    "extracting": "#FFF2CC",
    "partial": "#FCE4D6",
    "incomplete": "#FCE4D6",
}
TIER_FILLS = {"unverified": "#F8CBAD", "approximate": "#FFF2CC"}
FLAG_FILL = "#FCE4D6"
SHEET_ROWS = 1_048_575  # Excel's rows per sheet (1,048,576), the header's taken out


def continued_sheet(name: str, part: int) -> str:
    """The name of a table's ``part``-th sheet (1: the table's own name; Excel's names hold 31 characters)."""
    suffix = "" if part == 1 else f" ({part})"
    return name[: 31 - len(suffix)] + suffix


def truncate(value: str, full_in: str) -> str:
    if len(value) <= CELL_LIMIT:
        return value
    return (
        value[:CELL_LIMIT] + f" … [cut at {CELL_LIMIT:,} of {len(value):,} characters; the full value is in {full_in}]"
    )


def truncate_for_cells(frame: pl.DataFrame, full_in: str) -> pl.DataFrame:
    """String columns cut visibly at ``CELL_LIMIT`` characters (for xlsx and csv; parquet and jsonl keep all)."""
    columns = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    if not columns or frame.is_empty():
        return frame
    long = frame.select(pl.any_horizontal(pl.col(columns).str.len_chars() > CELL_LIMIT)).to_series()
    if not long.any():
        return frame
    return frame.with_columns(
        pl.col(name).map_elements(lambda v: truncate(v, full_in), return_dtype=pl.String) for name in columns
    )


_FORMULA_START = r"^[=+\-@\t\r]"  # what a spreadsheet reads as the start of a formula (OWASP, CSV injection)
_PLAIN_NUMBER = r"^[+-]?(?:\d+(?:[.,]\d+)*|\.\d+)(?:[eE][+-]?\d+)?%?$"


def neutralise_text(text: str) -> str:
    """One text cell as :func:`neutralise_formulas` writes it (for CSVs written without polars)."""
    formula = re.match(_FORMULA_START, text) and not re.match(_PLAIN_NUMBER, text)
    return "'" + text if formula else text


def neutralise_formulas(frame: pl.DataFrame) -> pl.DataFrame:
    """Text cells that a spreadsheet would run as a formula (starting with ``=``, ``+``, ``-``, ``@``, a tab or a
    carriage return) get a leading ``'`` so they open as text, as OWASP recommends for CSV; numbers written as text
    (``-0.5``, ``+3``) stay as they are, and numeric columns are numbers already. For csv only: xlsx writes plain
    string cells, parquet and jsonl keep exact values."""
    columns = [name for name, dtype in frame.schema.items() if dtype == pl.String]
    if not columns or frame.is_empty():
        return frame
    return frame.with_columns(
        pl.when(pl.col(name).str.contains(_FORMULA_START) & ~pl.col(name).str.contains(_PLAIN_NUMBER))
        .then(pl.lit("'") + pl.col(name))
        .otherwise(pl.col(name))
        .alias(name)
        for name in columns
    )


def _width(header: str, values: Sequence[object]) -> int:
    lengths = sorted(len(str(v)) for v in values if v is not None)
    typical = lengths[int(len(lengths) * 0.9)] if lengths else 0
    return max(8, min(MAX_WIDTH, max(len(header), typical) + 2))


class _Sheets:
    def __init__(self, workbook, sheet_rows: int = SHEET_ROWS, max_rows: int | None = None) -> None:
        self.workbook = workbook  # an xlsxwriter.Workbook
        self.sheet_rows = sheet_rows
        self.max_rows = max_rows
        self.cut: dict[str, tuple[int, int]] = {}  # table → (rows written, rows it has)
        self.header = workbook.add_format({"bold": True, "text_wrap": True, "valign": "top"})
        self.wrap = workbook.add_format({"text_wrap": True, "valign": "top"})
        self.top = workbook.add_format({"valign": "top"})
        self.integer = workbook.add_format({"num_format": "0", "valign": "top"})
        self.decimal = workbook.add_format({"num_format": "General", "valign": "top"})
        self.percent = workbook.add_format({"num_format": "0.0%", "valign": "top"})
        self.note = workbook.add_format({"italic": True, "font_color": "#595959"})
        colours = {*STATUS_FILLS.values(), *TIER_FILLS.values(), FLAG_FILL}
        self.fills = {colour: workbook.add_format({"bg_color": colour}) for colour in colours}

    def table(
        self,
        name: str,
        frame: pl.DataFrame,
        *,
        percent: tuple[str, ...] = (),
        typed_values: tuple[str, ...] = (),
        row_rules: Sequence[tuple[str, str, str]] = (),
        choices: dict[str, list[str]] | None = None,
        empty_note: str = "",
        complete_in: str = "",
    ) -> None:
        """One sheet holding ``frame`` as an Excel table (more past ``sheet_rows`` rows: ``continued_sheet``; its
        first ``max_rows`` only, and a line saying so and naming ``complete_in``, the files holding every row).
        ``typed_values``: string columns whose numeric-looking values are written as numbers; ``row_rules``:
        (column, Excel condition on its cell, fill) colouring whole rows, e.g. ``("status", '="failed"', red)``;
        ``choices``: columns whose cells offer a drop-down of values."""
        total = frame.height
        if self.max_rows is not None and total > self.max_rows:
            frame = frame.head(self.max_rows)
            self.cut[name] = (self.max_rows, total)
        parts = max(1, -(-frame.height // self.sheet_rows))
        for part in range(1, parts + 1):
            sheet = self._sheet(
                name,
                part,
                frame.slice((part - 1) * self.sheet_rows, self.sheet_rows),
                percent=percent,
                typed_values=typed_values,
                row_rules=row_rules,
                choices=choices,
                empty_note=empty_note,
            )
        if name in self.cut:
            shown = self.cut[name][0]
            rows_here = shown - (parts - 1) * self.sheet_rows
            where = f": every row is in {complete_in}" if complete_in else ""
            note = (
                f"The first {shown:,} of {total:,} rows (ATLAS_REVIEW_WORKBOOK_SHEET_ROWS); {total - shown:,} more are "
                f"not in this workbook{where}."
            )
            sheet.write(rows_here + 2, 0, note, self.note)

    def _sheet(
        self,
        table: str,
        part: int,
        frame: pl.DataFrame,
        *,
        percent: tuple[str, ...],
        typed_values: tuple[str, ...],
        row_rules: Sequence[tuple[str, str, str]],
        choices: dict[str, list[str]] | None,
        empty_note: str,
    ):
        name = continued_sheet(table, part)
        sheet = self.workbook.add_worksheet(name)
        columns = frame.columns
        schema = frame.schema  # once: polars builds it anew at each call (it was 80 % of a 10,000-row workbook)
        rows = frame.rows()
        for index, column in enumerate(columns):
            values = frame[column].to_list()
            width = _width(column, values)
            long_text = schema[column] == pl.String and width >= WRAP_FROM
            sheet.set_column(index, index, width, self.wrap if long_text else self.top)
        writers = [self._writer(sheet, column, schema[column], percent, typed_values) for column in columns]
        for row_number, row in enumerate(rows, 1):
            for index, value in enumerate(row):
                if value is not None:  # a blank cell without a format is no cell to Excel: nothing to write
                    writers[index](row_number, index, value)
        sheet.add_table(
            0,
            0,
            max(len(rows), 1),
            max(len(columns) - 1, 0),
            {
                "name": _table_name(table.replace(" ", "_") + (f"_{part}" if part > 1 else "")),
                "style": "Table Style Medium 2",
                "columns": [{"header": column, "header_format": self.header} for column in columns],
            },
        )
        sheet.freeze_panes(1, 1 if table != "fields" else 0)
        last = _column_letter(len(columns) - 1)
        for column, condition, colour in row_rules:
            if column not in columns or not rows:
                continue
            letter = _column_letter(columns.index(column))
            sheet.conditional_format(
                f"A2:{last}{len(rows) + 1}",
                {"type": "formula", "criteria": f"=${letter}2{condition}", "format": self.fills[colour]},
            )
        for column, allowed in (choices or {}).items():
            if column in columns and rows:
                index = columns.index(column)
                sheet.data_validation(
                    1,
                    index,
                    len(rows),
                    index,
                    {
                        "validate": "list",
                        "source": allowed,
                        "error_title": "Not a decision",
                        "error_message": f"Choose one of: {', '.join(allowed)}",
                    },
                )
        if not rows and empty_note:
            sheet.write(3, 0, empty_note, self.note)
        return sheet

    def _writer(self, sheet, column, dtype, percent, typed_values):
        """How a column's cells are written (chosen once per column: a sheet has millions of cells)."""
        if dtype == pl.String and column not in typed_values:
            return lambda row, col, value: sheet.write_string(row, col, value)
        if dtype == pl.Boolean:
            return sheet.write_boolean
        if dtype.is_integer() or dtype.is_float():
            number = self.percent if column in percent else self.integer if dtype.is_integer() else self.decimal
            return lambda row, col, value: sheet.write_number(row, col, value, number)
        return lambda row, col, value: self._cell(sheet, row, col, column, value, dtype, percent, typed_values)

    def _cell(self, sheet, row, col, column, value, dtype, percent, typed_values) -> None:
        if value is None:
            sheet.write_blank(row, col, None)
        elif isinstance(value, bool):
            sheet.write_boolean(row, col, value)
        elif column in percent and isinstance(value, int | float):
            sheet.write_number(row, col, value, self.percent)
        elif isinstance(value, int):
            sheet.write_number(row, col, value, self.integer)
        elif isinstance(value, float):
            sheet.write_number(row, col, value, self.decimal)
        elif column in typed_values and _NUMBER.match(str(value)):
            sheet.write_number(row, col, float(value), self.decimal)
        elif column in typed_values and str(value) in ("True", "False"):
            sheet.write_boolean(row, col, str(value) == "True")
        else:
            sheet.write_string(row, col, str(value))


def _column_letter(index: int) -> str:
    letters = ""
    index += 1
    while index:
        index, remainder = divmod(index - 1, 26)
        letters = chr(65 + remainder) + letters
    return letters


def _every(stem: str) -> str:
    return f"{export_path(stem, 'parquet')} / .csv / .jsonl"


def workbook_bytes(
    documents: pl.DataFrame,
    extractions: pl.DataFrame,
    fields: pl.DataFrame,
    completion: pl.DataFrame,
    *,
    approved: pl.DataFrame | None = None,
    quality: pl.DataFrame | None = None,
    choices: dict[str, list[str]] | None = None,
    groups: dict[str, pl.DataFrame] | None = None,
    skip_mode: bool,
    studies: pl.DataFrame | None = None,
    sheet_rows: int = SHEET_ROWS,
    max_rows: int | None = None,
    cut: dict[str, tuple[int, int]] | None = None,
) -> bytes:
    """The reviewer's workbook: sheets ``documents``, ``extractions`` (wide, the model's values), ``fields`` (long,
    those awaiting a person first, with decision columns to fill in), ``approved`` (final values of approved
    documents), ``review_quality`` and ``task_completion``; a table longer than ``sheet_rows`` goes on in sheets
    ``continued_sheet`` names, one longer than ``max_rows`` is cut there and says so (``cut``, when given, is told
    each table cut: its rows written and the rows it has)."""
    import xlsxwriter

    full_in = f"{export_path(FIELDS_STEM, 'parquet')} / .jsonl"
    why_empty = (
        "No values yet: the documents were processed in skip mode (no LLM endpoint configured). Extract them by "
        "hand on the review page (`atlas review`), or set ATLAS_LLM_BASE_URL to have a model propose them."
        if skip_mode
        else "No values extracted yet."
    )
    buffer = io.BytesIO()
    with xlsxwriter.Workbook(buffer, {"in_memory": True, "strings_to_numbers": False}) as workbook:
        sheets = _Sheets(workbook, sheet_rows, max_rows)
        sheets.table(
            "documents",
            truncate_for_cells(documents, f"{export_path(EXPORT_STEM, 'parquet')} / .jsonl"),
            percent=("completeness",),
            row_rules=[("status", f'="{status}"', colour) for status, colour in STATUS_FILLS.items()],
            empty_note="No documents in the knowledge base yet.",
            complete_in=_every(EXPORT_STEM),
        )
        value_columns = tuple(c for c in extractions.columns if not c.endswith("__tier") and c != "document_key")
        sheets.table(
            "extractions",
            truncate_for_cells(extractions, full_in),
            typed_values=value_columns,
            empty_note=why_empty,
            complete_in=_every(FIELDS_STEM),
        )
        sheets.table(
            "fields",
            truncate_for_cells(fields, full_in),
            typed_values=("model_value", "final_value"),
            percent=("confidence",),
            row_rules=[
                ("flags", '<>""', FLAG_FILL),
                *(("tier", f'="{tier}"', colour) for tier, colour in TIER_FILLS.items()),
            ],
            choices=choices,
            empty_note=why_empty,
            complete_in=_every(FIELDS_STEM),
        )
        for name, frame in (groups or {}).items():  # repeating groups: one row per document × entry
            sheets.table(
                name,
                truncate_for_cells(frame, f"atlas_{name}.parquet / .jsonl"),
                row_rules=[],
                empty_note=f"No {name} entries extracted yet.",
                complete_in=_every(f"atlas_{name}"),
            )
        if studies is not None:
            sheets.table(
                "studies",
                truncate_for_cells(studies, f"{STUDIES.path('parquet')} / .jsonl"),
                row_rules=[("state", '="conflict"', FLAG_FILL)],
                empty_note="No study values yet: they are the reports' accepted values, reconciled.",
                complete_in=_every(STUDIES.stem),
            )
        if approved is not None:
            sheets.table(
                "approved",
                truncate_for_cells(approved, f"{export_path(APPROVED_STEM, 'parquet')} / .jsonl"),
                empty_note="No document approved yet: approve or correct its fields on the review page "
                "(`atlas review`) or in the fields sheet.",
                complete_in=_every(APPROVED_STEM),
            )
        if quality is not None:
            sheets.table(
                "review_quality",
                quality,
                percent=("kept_rate",),
                empty_note="No field decided by a person yet.",
            )
        sheets.table("task_completion", completion, percent=("rate",))
    if cut is not None:
        cut.update(sheets.cut)
    return buffer.getvalue()


_LIKE_A_CELL = re.compile(r"[A-Za-z]{1,3}\d+|[RrCc]|[Rr]\d*[Cc]\d*")


def _table_name(name: str) -> str:
    """An Excel table's name: one that reads as a cell reference (``rob2`` is column ROB, row 2) would make Excel
    repair the file, so it is prefixed."""
    return f"table_{name}" if _LIKE_A_CELL.fullmatch(name) else name
