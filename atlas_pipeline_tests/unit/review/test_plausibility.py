"""Plausibility where a value enters: every rule refused with its reason when a person types the value (page, grid,
workbook share ``coerce_value``), the entry's values checked together, and a p threshold kept with its sign."""

import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.p_values import parse_p
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.review.decisions import DecisionRefused, coerce_value
from atlas_pipeline.review.entry_grid import entry_refusal
from atlas_pipeline.review.final_values import FinalField

TEMPLATE = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")


def _field(name: str):
    return TEMPLATE.field_definition(f"outcomes[1].{name}") or TEMPLATE.field_definition(name)


@pytest.mark.parametrize(
    ("field", "typed", "reason"),
    [
        ("n_intervention", "0", "a group size is above 0"),
        ("total_comparator", "-3", "a group size is above 0"),
        ("events_intervention", "-1", "a number of events is 0 or more"),
        ("sd_comparator", "-2", "a standard deviation or error is 0 or more"),
        ("se_intervention", "-0.4", "a standard deviation or error is 0 or more"),
        ("percent_intervention", "140", "a percentage is between 0 and 100"),
        ("p_value_comparison", "1.5", "a p value is above 0 and at most 1"),
        ("ci_level", "950", "a confidence level"),
        ("n_intervention", "99999999999999999999999999999", "beyond any plausible"),
        ("mean_intervention", "1e308", "beyond any plausible"),
        ("male_percent", "101", "a percentage is between 0 and 100"),
    ],
)
def test_each_rule_is_refused_where_the_value_enters(field, typed, reason):
    with pytest.raises(DecisionRefused, match=reason):
        coerce_value(typed, _field(field))


def test_a_whole_number_past_what_a_float_holds_is_named_not_a_crash():
    from atlas_pipeline.core.plausibility import value_problem

    assert "beyond any plausible" in value_problem("n_intervention", 10**400)


def test_plausible_values_pass_and_a_p_threshold_keeps_its_sign():
    assert coerce_value("25", _field("n_intervention")) == 25
    assert coerce_value("0", _field("events_intervention")) == 0
    assert coerce_value("0", _field("sd_comparator")) == 0  # as a paper may report it; the analysis leaves it out
    assert coerce_value("0.008", _field("p_value_comparison")) == 0.008
    for typed in ("<0.001", "< .001", "p < 0.001", "less than 0.001", "‹0·001"):
        assert coerce_value(typed, _field("p_value_comparison")) == "<0.001", typed
    assert coerce_value("≤0.05", _field("p_value_comparison")) == "≤0.05"
    assert parse_p("<0.001").exact is False and parse_p(0.008).exact is True
    with pytest.raises(DecisionRefused, match="is not a number"):
        coerce_value("< lots", _field("p_value_comparison"))


def _final(name: str, value, provenance: str = "model_verified") -> FinalField:
    return FinalField(field=name, provenance=provenance, final_value=value, model_value=value)


def test_an_entrys_values_are_checked_together():
    fields = {
        name: _final(name, value)
        for name, value in {
            "outcomes[1].total_intervention": 50,
            "outcomes[1].events_intervention": 10,
            "outcomes[1].effect_measure": "RR",
            "outcomes[1].effect_estimate": 0.6,
            "outcomes[1].ci_lower": 0.4,
            "outcomes[1].ci_upper": 0.9,
            "outcomes[2].total_intervention": 10,
        }.items()
    }
    assert "more events than participants" in entry_refusal(fields, {"outcomes[1].events_intervention": 60})
    assert "more events than participants" in entry_refusal(fields, {"outcomes[1].total_intervention": 5})
    assert "outside its CI" in entry_refusal(fields, {"outcomes[1].effect_estimate": 1.4})
    assert "lower limit is above its upper" in entry_refusal(fields, {"outcomes[1].ci_lower": 1.2})
    assert "a ratio is above 0" in entry_refusal(fields, {"outcomes[1].ci_lower": -0.1})
    assert entry_refusal(fields, {"outcomes[1].events_intervention": 12}) is None
    assert entry_refusal(fields, {"outcomes[2].events_intervention": 9}) is None  # entry 2's own group of 10
    assert entry_refusal(fields, {"outcomes[1].events_intervention": None}) is None  # emptied
    assert "a ratio is above 0" in entry_refusal(
        {**fields, "outcomes[1].effect_measure": _final("outcomes[1].effect_measure", "MD")},
        {"outcomes[1].effect_measure": "RR", "outcomes[1].ci_lower": -0.1, "outcomes[1].effect_estimate": 0.2},
    )
    # a model's value nobody accepted does not refuse a person's: they may be correcting it next
    unreviewed = {**fields, "outcomes[1].total_intervention": FinalField(
        field="x", provenance="awaiting_review", model_value=5)}  # fmt: skip
    assert entry_refusal(unreviewed, {"outcomes[1].events_intervention": 10}) is None
