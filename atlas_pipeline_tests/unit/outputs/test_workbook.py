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
