"""The reviewer's workbook past Excel's rows per sheet: nothing dropped, the import reads it whole."""

import fastexcel
import polars as pl

from atlas_pipeline.outputs.exports import FIELD_SCHEMA, SCHEMA
from atlas_pipeline.outputs.workbook import SHEET_ROWS, continued_sheet, workbook_bytes
from atlas_pipeline.review.workbook_import import read_rows


def _fields(rows: int) -> pl.DataFrame:
    return pl.DataFrame(
        [{"document_key": f"doc-{n:02d}", "field": "sample_size", "model_value": str(n)} for n in range(rows)],
        schema=FIELD_SCHEMA,
    )


def test_a_table_longer_than_a_sheet_goes_on_in_numbered_sheets_and_is_read_back_whole():
    fields = _fields(7)
    documents = pl.DataFrame([{"document_key": "doc-00", "status": "done"}], schema=SCHEMA)
    data = workbook_bytes(
        documents, pl.DataFrame({"document_key": ["doc-00"]}), fields, pl.DataFrame({"rate": [1.0]}),
        skip_mode=False, sheet_rows=3,
    )  # fmt: skip
    names = fastexcel.read_excel(data).sheet_names
    assert names[: names.index("fields")] == ["documents", "extractions"]
    assert [n for n in names if n.startswith("fields")] == ["fields", "fields (2)", "fields (3)"]
    parts = [pl.read_excel(data, sheet_name=name) for name in ("fields", "fields (2)", "fields (3)")]
    assert [part.height for part in parts] == [3, 3, 1]
    assert pl.concat(parts)["document_key"].to_list() == fields["document_key"].to_list()
    assert [row["model_value"] for row in read_rows(data)] == [str(n) for n in range(7)]  # the import reads on


def test_sheet_names_stay_inside_excels_31_characters_and_the_limit_is_excels():
    assert SHEET_ROWS == 1_048_576 - 1  # the header takes a row
    assert continued_sheet("fields", 1) == "fields"
    long = continued_sheet("a_module_name_of_thirty_chars_x", 12)
    assert len(long) == 31 and long.endswith(" (12)")


def test_a_sheet_past_the_teams_cap_keeps_its_first_rows_and_says_where_every_row_is():
    fields = _fields(7)
    cut: dict[str, tuple[int, int]] = {}
    data = workbook_bytes(
        pl.DataFrame(schema=SCHEMA), pl.DataFrame({"document_key": []}), fields, pl.DataFrame({"rate": [1.0]}),
        skip_mode=False, max_rows=5, cut=cut,
    )  # fmt: skip
    assert cut == {"fields": (5, 7)}
    sheet = pl.read_excel(data, sheet_name="fields", has_header=False)
    column = sheet.to_series(0).to_list()
    assert column[1:6] == [f"doc-{n:02d}" for n in range(5)]  # the first five, as they came (awaiting first)
    assert column[-1].startswith("The first 5 of 7 rows (ATLAS_REVIEW_WORKBOOK_SHEET_ROWS); 2 more")
    assert "atlas_fields.parquet / .csv / .jsonl" in column[-1]
    assert "fields (2)" not in fastexcel.read_excel(data).sheet_names
