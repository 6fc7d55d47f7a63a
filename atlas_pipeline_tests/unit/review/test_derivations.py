"""Derivations from final values: only accepted inputs, never over a written value, cautioned ones flagged; a
derived value proposed in the review and decided like any value."""

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import Template, load_template
from atlas_pipeline.review.derivations import Derivations
from atlas_pipeline.review.final_values import DocumentReview, FinalField, review_document
from atlas_pipeline_tests.support.records import extraction_record

TEMPLATE = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")


def _review(entry: dict[str, tuple], number: int = 1) -> DocumentReview:
    fields = {}
    for name, (value, provenance, *quote) in entry.items():
        full = f"outcomes[{number}].{name}"
        fields[full] = FinalField(
            field=full, module="outcomes", provenance=provenance, final_value=value, quote=(quote or [None])[0]
        )
    return DocumentReview(key="doc", sha256="x", extraction_version="v", approved=False, reviewable=True, fields=fields)


def derive_values(review: DocumentReview, template: Template, opted_in: frozenset[str] = frozenset()):
    return Derivations(template, opted_in).derive(review.fields)


def test_events_derived_from_accepted_percentages_with_their_inputs_and_arithmetic():
    review = _review(
        {
            "percent_intervention": (42, "model_verified", "42% of patients in the intervention group"),
            "total_intervention": (59, "reviewer_approved", "59 intervention"),
            "events_intervention": (None, "model_verified"),
            "percent_comparator": (61, "model_verified", "61% of patients in the control group"),
            "total_comparator": (64, "model_verified", "64 control"),
        }
    )
    derived = {value.field: value for value in derive_values(review, TEMPLATE)}
    events = derived["outcomes[1].events_intervention"]
    assert events.state == "derived" and events.value == 25 and events.formula == "events_from_percentage"
    assert events.tier == "derived" and events.source == "Cochrane Handbook 6.4.1"
    assert events.arithmetic.endswith("= round(24.78) = 25")
    assert [(i.role, i.field, i.value, i.quote) for i in events.inputs] == [
        ("percentage", "outcomes[1].percent_intervention", 42, "42% of patients in the intervention group"),
        ("n", "outcomes[1].total_intervention", 59, "59 intervention"),
    ]
    assert derived["outcomes[1].events_comparator"].value == 39


def test_never_from_an_unaccepted_input_and_never_over_a_written_value():
    review = _review(
        {
            "percent_intervention": (42, "awaiting_review", "42%"),
            "total_intervention": (59, "model_verified"),
            "se_comparator": (1.5, "rejected"),  # rejected: its value is not the final value
            "n_comparator": (30, "model_verified"),
            "se_intervention": (2.0, "model_verified"),
            "n_intervention": (25, "model_verified"),
            "sd_intervention": (9.0, "model_verified"),  # written: never replaced
        }
    )
    derived = {value.field: value for value in derive_values(review, TEMPLATE)}
    refused = derived["outcomes[1].events_intervention"]
    assert refused.state == "refused" and refused.value is None
    assert refused.reason == "not from an unaccepted input: outcomes[1].percent_intervention is awaiting review"
    assert "outcomes[1].sd_intervention" not in derived
    assert "outcomes[1].sd_comparator" not in derived or derived["outcomes[1].sd_comparator"].state == "refused"


def _sds(review: DocumentReview) -> list:
    return [v for v in derive_values(review, TEMPLATE) if v.field.endswith(("sd_intervention", "sd_comparator"))]


COMMON = {
    "mean_intervention": (50.6, "model_verified"),
    "mean_comparator": (46.8, "model_verified"),
    "n_intervention": (25, "model_verified"),
    "n_comparator": (22, "model_verified"),
}


def test_an_sd_from_the_exact_p_of_a_stated_t_test_the_handbooks_example():
    # Handbook 6.5.2.3: MD 3.8, exact p = 0.008 of a t-test, groups of 25 and 22 → SE 1.37, SD ≈ 4.69
    exact = _review(
        {
            **COMMON,
            "p_value_comparison": (0.008, "model_verified", "(p = 0.008)"),
            "p_value_test": ("t-test", "model_verified"),
        }
    )
    sd_i, sd_c = _sds(exact)
    assert sd_i.state == "derived" and sd_i.formula == "sd_from_p" and sd_c.value == sd_i.value
    assert abs(sd_i.value - 4.69) < 0.01
    # the same p without the test stated: nothing says a t value corresponds to it
    assert _sds(_review({**COMMON, "p_value_comparison": (0.008, "model_verified", "(p = 0.008)")})) == []


def test_a_p_threshold_never_derives_an_sd_however_it_is_written():
    test = {"p_value_test": ("t-test", "model_verified")}
    quotes = ("p < 0.001", "P value less than 0.001", "p-value ‹ 0·001", "P<.001", "p ≤ 0.001", "P ≦ 0.001", "NS")
    quotes += (
        "P value of 0.001 or less",
        "alpha was set at 0.001; the groups differed (p < 0.001)",
        "p = 1·10−3 or less",
    )
    for quote in quotes:
        review = _review({**COMMON, **test, "p_value_comparison": (0.001, "model_verified", quote)})
        sds = _sds(review)
        assert sds and all(v.state == "refused" and "threshold" in v.reason for v in sds), quote
    # typed by a person as a threshold ("<0.001", kept with its sign), with no quote at all
    typed = _review({**COMMON, **test, "p_value_comparison": ("<0.001", "reviewer_corrected")})
    assert all(v.state == "refused" and "threshold (<0.001)" in v.reason for v in _sds(typed))
    # a person's exact correction does not hide the model's quote that gives a threshold
    corrected = {"p_value_comparison": (0.001, "reviewer_corrected", "p < 0.001")}
    assert all(v.state == "refused" for v in _sds(_review({**COMMON, **test, **corrected})))


def test_sd_from_the_comparison_only_when_it_is_a_mean_difference():
    ci = _review(
        {
            **COMMON,
            "effect_measure": ("MD", "model_verified"),
            "ci_lower": (1.2, "model_verified"),
            "ci_upper": (6.4, "model_verified"),
        }
    )
    (first, *_) = derive_values(ci, TEMPLATE)
    assert first.formula == "sd_from_ci_of_difference" and first.state == "derived"
    assert "t(45 df)" in first.arithmetic  # each group under 60
    ratio = _review({**COMMON, "effect_measure": ("RR", "model_verified"), "ci_lower": (0.4, "model_verified")})
    assert all(value.formula != "sd_from_ci_of_difference" for value in derive_values(ratio, TEMPLATE))
    # a 90% CI, stated: as wide as 90% says
    ninety = _review(
        {
            **COMMON,
            "effect_measure": ("MD", "model_verified"),
            "ci_lower": (1.2, "model_verified"),
            "ci_upper": (6.4, "model_verified"),
            "ci_level": (90, "model_verified"),
        }
    )
    (narrow, *_) = derive_values(ninety, TEMPLATE)
    assert narrow.value > first.value


def test_median_quartiles_give_a_mean_and_sd_only_when_the_team_opts_in():
    review = _review(
        {
            "median_intervention": (20, "model_verified"),
            "q1_intervention": (12, "model_verified"),
            "q3_intervention": (30, "model_verified"),
            "n_intervention": (40, "model_verified"),
        }
    )
    found = {v.formula: v for v in derive_values(review, TEMPLATE)}
    assert found["mean_from_median_iqr"].state == found["sd_from_median_iqr"].state == "flagged"
    opted = {
        v.formula: v for v in derive_values(review, TEMPLATE, frozenset({"mean_from_median_iqr", "sd_from_median_iqr"}))
    }
    assert opted["sd_from_median_iqr"].state == "derived" and "Wan et al. 2014" in opted["sd_from_median_iqr"].source
    assert opted["mean_from_median_iqr"].value == round((0.7 + 0.39 / 40) * 21 + (1 - 0.7 - 0.39 / 40) * 20, 4)


def test_a_conversion_the_handbook_warns_against_is_flagged_unless_opted_in():
    data = TEMPLATE.model_dump()
    group = next(module for module in data["modules"] if module["name"] == "outcomes")
    group["derivations"] = [
        {
            "field": "sd_intervention",
            "formula": "sd_from_iqr",
            "inputs": {"q1": "q1_intervention", "q3": "q3_intervention"},
        }
    ]
    template = Template.model_validate(data)
    review = _review({"q1_intervention": (10, "model_verified"), "q3_intervention": (23.5, "model_verified")})
    (flagged,) = derive_values(review, template)
    assert flagged.state == "flagged" and flagged.value == 10.0
    assert "ATLAS_DERIVE_OPT_IN=sd_from_iqr" in flagged.reason and "skewed" in flagged.reason
    (opted,) = derive_values(review, template, frozenset({"sd_from_iqr"}))
    assert opted.state == "derived" and opted.value == 10.0


def test_a_template_rule_naming_an_unknown_formula_or_field_is_refused_on_load():
    import pytest

    data = TEMPLATE.model_dump()
    group = next(module for module in data["modules"] if module["name"] == "outcomes")
    group["derivations"] = [{"field": "sd_intervention", "formula": "sd_from_vibes", "inputs": {}}]
    with pytest.raises(ValueError, match="unknown formula 'sd_from_vibes'"):
        Template.model_validate(data)
    group["derivations"] = [{"field": "sd_intervention", "formula": "sd_from_se", "inputs": {"se": "se_nowhere"}}]
    with pytest.raises(ValueError, match="se_nowhere not among the module's fields"):
        Template.model_validate(data)


def _record():

    def given(value, quote, tier="verified"):
        return {"module": "outcomes", "value": value, "quote": quote, "tier": tier, "flags": []}

    fields = {
        "outcomes[1].outcome": given("Hospitalization or death", "Hospitalization or death"),
        "outcomes[1].percent_intervention": given(42, "42% of patients in the intervention group"),
        "outcomes[1].total_intervention": given(59, "59 intervention"),
        "outcomes[1].events_intervention": given(None, None, "not_reported"),
    }
    return extraction_record(fields=fields)


def test_a_derived_value_is_proposed_in_the_review_and_decided_like_any_value(tmp_path):
    from atlas_pipeline.review.decisions import DecisionRequest, decide, load_decisions
    from atlas_pipeline.store.files import Store

    store, record, derivations = Store(str(tmp_path)), _record(), Derivations(TEMPLATE)
    verified = frozenset({"verified"})
    review = review_document(record, [], verified, derivations)
    events = review.fields["outcomes[1].events_intervention"]
    assert (events.tier, events.model_value, events.provenance) == ("derived", 25, "awaiting_review")
    assert events.derivation["formula"] == "events_from_percentage" and events.quote.endswith("= 25")
    assert review.derivation_rules == derivations.fingerprint
    assert review_document(record, [], verified).fields["outcomes[1].events_intervention"].final_value is None
    # the team's policy may accept derived values as it accepts verified ones
    policy = review_document(record, [], verified | {"derived"}, derivations)
    assert policy.fields["outcomes[1].events_intervention"].provenance == "model_verified"

    shown = (record.sha256, record.extraction_version)
    proposed = {"value": events.model_value, "tier": "derived"}
    field = "outcomes[1].events_intervention"
    decide(
        store,
        record,
        DecisionRequest(field, "approve", reviewer="ana", shown=shown, shown_value="25", proposed=proposed),
    )
    approved = review_document(record, load_decisions(store, record.key), verified, derivations).fields[field]
    assert (approved.provenance, approved.final_value, approved.tier) == ("reviewer_approved", 25, "derived")
    # an input corrected: the result changes (42% of 62 is 26), so the approval of 25 asks for a recheck
    total = "outcomes[1].total_intervention"
    decide(store, record, DecisionRequest(total, "correct", reviewer="ana", shown=shown, value=62))
    changed = review_document(record, load_decisions(store, record.key), verified, derivations).fields[field]
    assert (changed.provenance, changed.model_value, changed.previous_model_value) == ("recheck", 26, 25)


def test_in_the_default_mode_a_derived_value_is_approved_and_a_persons_entry_corrected(tmp_path):
    from atlas_pipeline.review.decisions import DecisionRequest, decide, load_decisions
    from atlas_pipeline.store.files import Store

    store, derivations, policy = Store(str(tmp_path)), Derivations(TEMPLATE), frozenset({"verified"})
    record = extraction_record(fields={"study_id": None}).model_copy(update={"mode": "skip"})
    shown = (record.sha256, record.extraction_version)
    typed = {"outcome": "Hospitalization or death", "percent_intervention": "42", "total_intervention": "59"}
    for bare, value in typed.items():  # extraction by hand: a person's entry on the grid
        field = f"outcomes[1001].{bare}"
        definition = TEMPLATE.field_definition(field)
        decide(
            store,
            record,
            DecisionRequest(field, "correct", reviewer="ana", shown=shown, value=value, template_field=definition),
        )
    field = "outcomes[1001].events_intervention"
    review = review_document(record, load_decisions(store, record.key), policy, derivations)
    assert (review.fields[field].tier, review.fields[field].model_value) == ("derived", 25)
    proposed = {"value": 25, "tier": "derived"}
    decide(
        store,
        record,
        DecisionRequest(field, "approve", reviewer="ana", shown=shown, shown_value="25", proposed=proposed),
    )
    approved = review_document(record, load_decisions(store, record.key), policy, derivations).fields[field]
    assert (approved.provenance, approved.final_value, approved.derivation["formula"]) == (
        "reviewer_approved",
        25,
        "events_from_percentage",
    )
    # the person corrects their own entry's group size: the derived count follows, and asks for a re-check
    total = "outcomes[1001].total_intervention"
    decide(
        store,
        record,
        DecisionRequest(
            total, "correct", reviewer="ana", shown=shown, value="62", template_field=TEMPLATE.field_definition(total)
        ),
    )
    again = review_document(record, load_decisions(store, record.key), policy, derivations).fields
    assert again[total].final_value == 62 and (again[field].provenance, again[field].model_value) == ("recheck", 26)


def test_a_ci_level_awaiting_review_holds_the_derivation_back():
    ci = {
        **COMMON,
        "effect_measure": ("MD", "model_verified"),
        "ci_lower": (1.2, "model_verified"),
        "ci_upper": (6.4, "model_verified"),
    }
    (held, *_) = derive_values(_review({**ci, "ci_level": (90, "awaiting_review")}), TEMPLATE)
    assert held.state == "refused" and "ci_level is awaiting review" in held.reason
    (odd, *_) = derive_values(_review({**ci, "ci_level": ("90%", "reviewer_corrected")}), TEMPLATE)
    assert odd.state == "refused" and "ci_level is not a number" in odd.reason
