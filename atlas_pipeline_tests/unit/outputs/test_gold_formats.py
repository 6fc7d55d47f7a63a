"""The corpus's human outcome rows (Yun et al.) read as gold as they are, derived values told from written ones."""

import json

from atlas_pipeline.outputs.evaluation import read_gold
from atlas_pipeline.outputs.gold_formats import derived_fields, yun_values
from atlas_pipeline_tests.support.corpus import corpus_file


def test_the_corpus_rows_become_outcome_gold_with_derived_values_flagged():
    text = corpus_file("gold/outcome_values.jsonl").read_text()
    rows = [json.loads(line) for line in text.splitlines() if line.strip()]
    gold = read_gold(text)
    assert {value.group for value in gold} == {"outcomes"}
    juice = [v for v in gold if v.document == "PMC1216327.pdf" and v.entry["outcome"] == "The duration of the illness"]
    values = {v.field: v.value for v in juice}
    assert values == {
        "mean_intervention": 47.5,
        "sd_intervention": 38.9,
        "mean_comparator": 26.5,
        "sd_comparator": 27.4,
        "n_intervention": 30,
        "n_comparator": 30,
    }
    percent = next(r for r in rows if "Used percent to calculate" in r["notes"])
    assert derived_fields(percent) == {"events_intervention", "events_comparator"}
    assert {v["field"] for v in yun_values(percent)} == {
        "events_intervention",
        "events_comparator",
        "total_intervention",
        "total_comparator",
    }
    from_ci = next(r for r in rows if "use CI to calculate the SDs" in r["notes"])
    assert derived_fields(from_ci) == {"sd_intervention", "sd_comparator"}
    assert derived_fields(next(r for r in rows if r["notes"] == "found in table 2")) == set()
    assert sum(v.derived for v in gold) == 36  # 16 binary rows from a percentage, 2 SD pairs from a CI


def test_the_notes_annotators_write_are_read_in_their_forms():
    from atlas_pipeline.outputs.gold_formats import median_fields

    sds, events = {"sd_intervention", "sd_comparator"}, {"events_intervention", "events_comparator"}
    for note in ("Back calculated SD from SE", "SD derived from the standard error", "SE converted to SD",
                 "SDs computed from the 95% CIs", "Have to use CI to calculate the SDs"):  # fmt: skip
        assert derived_fields({"notes": note}) == sds, note
    for note in ("calculated events from the percentages", "Used percentage found in text to calculate actual number"):
        assert derived_fields({"notes": note}) == events, note
    for note in (
        "found in table 2",
        "No std given",
        "SDs found in abstract while group sizes and means found in table 2",
    ):
        assert derived_fields({"notes": note}) == set() and not median_fields({"notes": note}), note
    assert median_fields({"notes": "median and IQ scores given"}) >= {"mean_intervention", "sd_intervention"}
    text = corpus_file("gold/outcome_values.jsonl").read_text()
    assert sum(v.median for v in read_gold(text)) > 0  # the corpus's medians are told apart
