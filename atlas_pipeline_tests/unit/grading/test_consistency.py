"""Consistency checks declared in templates, on real corpus numbers: human gold outcomes and effect estimates hold
the RCT template's rules; the same numbers mixed up the way a model mixes them break them, naming rule and values."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.core.templates import TemplateError, load_template
from atlas_pipeline.grading.consistency import evaluate
from atlas_pipeline.grading.fields import FieldResult, apply_checks, document_status
from atlas_pipeline_tests.support.corpus import corpus_file

TEMPLATE = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
ARMS = {
    "intervention_events": "event_treatment",
    "intervention_group_size": "total_treatment",
    "comparator_events": "event_control",
    "comparator_group_size": "total_control",
    "intervention_standard_deviation": "sd_treatment",
    "comparator_standard_deviation": "sd_control",
    "intervention_mean": "mean_treatment",
    "comparator_mean": "mean_control",
}


def _number(value: object) -> float | None:
    return None if value is None else float(str(value).replace(",", ""))


def gold_rows() -> list[dict[str, float]]:
    """The corpus' human outcome rows as template values (events, totals, means, SDs per arm)."""
    rows = []
    for line in corpus_file("gold/outcome_values.jsonl").read_text().splitlines():
        row = json.loads(line)
        values = {field: _number(row.get(gold)) for gold, field in ARMS.items()}
        rows.append({name: value for name, value in values.items() if value is not None})
    return rows


def estimates() -> list[dict[str, float]]:
    """The corpus' ratio estimates (IRR, OR; mean differences left out: they may be negative) with their 95% CI."""
    rows = []
    for line in corpus_file("gold/effect_estimates.silver.jsonl").read_text().splitlines():
        row = json.loads(line)
        if row["measure"].upper() not in ("HR", "OR", "RR", "IRR"):
            continue
        rows.append(
            {
                "hr_value": float(row["estimate"]),
                "hr_ci_lower": float(row["ci_low"]),
                "hr_ci_upper": float(row["ci_high"]),
            }
        )
    return rows


def test_the_human_gold_holds_every_rule():
    rows = gold_rows()
    assert len(rows) == 107
    assert [evaluate(TEMPLATE.checks, row) for row in rows] == [[]] * len(rows)
    assert [evaluate(TEMPLATE.checks, row) for row in estimates()] == [[]] * len(estimates())


def test_events_and_totals_mixed_up_break_events_le_total():
    broken = 0
    for row in gold_rows():
        if "event_treatment" not in row or row["event_treatment"] == row["total_treatment"]:
            continue
        mixed = {**row, "event_treatment": row["total_treatment"], "total_treatment": row["event_treatment"]}
        violations = evaluate(TEMPLATE.checks, mixed)
        assert [v.rule for v in violations] == ["events ≤ total (treatment arm)"], mixed
        (violation,) = violations
        assert violation.fields == ["event_treatment", "total_treatment"]
        assert violation.values == {
            "event_treatment": row["total_treatment"],
            "total_treatment": row["event_treatment"],
        }
        assert violation.message == (
            f"events ≤ total (treatment arm) does not hold: event_treatment = {row['total_treatment']:g} "
            f"is not ≤ total_treatment = {row['event_treatment']:g}"
        )
        broken += 1
    assert broken >= 20


def test_an_estimate_outside_its_interval_and_a_ratio_below_zero_are_caught():
    checked = 0
    for row in estimates():
        swapped = {**row, "hr_value": row["hr_ci_upper"], "hr_ci_upper": row["hr_value"]}
        if swapped["hr_value"] == swapped["hr_ci_upper"]:
            continue
        (violation,) = evaluate(TEMPLATE.checks, swapped)
        assert violation.rule == "hr_ci_lower ≤ hr_value ≤ hr_ci_upper"
        assert violation.fields == ["hr_value", "hr_ci_upper"]
        signed = evaluate(TEMPLATE.checks, {**row, "hr_ci_lower": -row["hr_ci_lower"]})
        assert [v.rule for v in signed] == ["hazard ratios > 0"]
        checked += 1
    assert checked >= 6


def test_p_values_percentages_sds_ages_and_counts():
    def rules(**values: float) -> list[str]:
        return [v.rule for v in evaluate(TEMPLATE.checks, values)]

    assert rules(p_value=0.047, male_percent=48.2, sd_treatment=2.35, age_treatment=10.27, n_treatment=30) == []
    assert rules(p_value=4.7) == ["0 ≤ p_value ≤ 1"]
    assert rules(male_percent=148.2) == ["0 ≤ male_percent ≤ 100"]
    assert rules(sd_control=-1.63) == ["standard deviations ≥ 0"]
    assert rules(age_control=1027) == ["ages in a plausible range (0–120)"]
    assert rules(n_control=30.5) == ["counts are whole numbers"]
    assert rules(n_treatment_outcome=31, n_treatment=30) == ["outcome n ≤ randomised n (treatment arm)"]


def test_a_violation_flags_its_fields_and_keeps_the_document_from_done():
    fields = {f.name: FieldResult("m", None, None, 1.0, "not_reported") for f in TEMPLATE.fields}
    for name, value in {
        "study_id": "Valois 2005",
        "n_treatment": 30,
        "event_treatment": 45,
        "total_treatment": 30,
    }.items():
        fields[name] = FieldResult("m", value, "quote", 1.0, "verified")
    for name in ("study_design", "treatment_name", "control_name", "n_control"):
        fields[name] = FieldResult("m", "x", "quote", 1.0, "verified")
    violations = apply_checks(TEMPLATE.checks, fields)
    assert [v.rule for v in violations] == [
        "events ≤ total (treatment arm)",
        "outcome total ≤ randomised n (treatment arm)",
    ][:1]
    assert fields["event_treatment"].flags == fields["total_treatment"].flags != []
    assert fields["event_treatment"].needs_review and not fields["n_treatment"].flags
    status, score, reason = document_status({f.name: f.required for f in TEMPLATE.fields}, fields, violations)
    assert status == DocumentStatus.PARTIAL and score < 1.0
    assert "1 consistency violation(s): events ≤ total (treatment arm) does not hold" in reason


def test_a_custom_template_brings_its_own_checks(tmp_path: Path):
    template = {
        "code": "dose",
        "name": "Dosing",
        "version": "1",
        "modules": [
            {
                "name": "dose",
                "fields": [
                    {"name": "dose_min_mg", "type": "number", "description": "lowest dose"},
                    {"name": "dose_max_mg", "type": "number", "description": "highest dose"},
                    {"name": "drug", "type": "string", "description": "drug name"},
                ],
            }
        ],
        "checks": [{"rule": "le", "fields": ["dose_min_mg", "dose_max_mg"]}],
    }
    (tmp_path / "dose.json").write_text(json.dumps(template))
    loaded = load_template(tmp_path, "dose")
    (violation,) = evaluate(loaded.checks, {"dose_min_mg": 50, "dose_max_mg": 5})
    assert violation.message == "dose_min_mg ≤ dose_max_mg does not hold: dose_min_mg = 50 is not ≤ dose_max_mg = 5"
    for checks, problem in (
        ([{"rule": "le", "fields": ["dose_min_mg", "dose_mx_mg"]}], "names an unknown field 'dose_mx_mg'"),
        ([{"rule": "positive", "fields": ["drug"]}], "needs numeric fields, 'drug' is string"),
        ([{"rule": "range", "fields": ["dose_min_mg"]}], "needs a min, a max or both"),
    ):
        (tmp_path / "dose.json").write_text(json.dumps({**template, "checks": checks}))
        with pytest.raises(TemplateError, match=problem):
            load_template(tmp_path, "dose")
