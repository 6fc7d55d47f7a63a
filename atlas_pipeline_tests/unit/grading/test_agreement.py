"""Agreement between two extractions: values compared after normalisation, entries matched by identity, and the
statistics (percent agreement, Cohen's kappa) on data whose answer is known."""

import pytest

from atlas_pipeline.core.templates import Template
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.grading.agreement import (
    agreement_state,
    agreement_statistics,
    cohen_kappa,
    compare_extractions,
    same_value,
)


@pytest.fixture(scope="module")
def template() -> Template:
    return Deployment.from_environment({}).load_template()


@pytest.mark.parametrize(
    ("first", "second", "kind", "same"),
    [
        (1.2, "1.20", "number", True),  # the same number as written
        (1.23, 1.2, "number", False),
        ("\u22120.5", -0.5, "number", True),  # a typographic minus
        ("1,200", 1200, "number", True),
        ("1,5", "15", "number", False),  # a decimal comma is no thousands separator
        (0.5, -0.5, "number", False),  # a sign
        ("Placebo", "placebo", "label", True),
        ("MD", "SMD", "label", False),
        ("low-dose aspirin, placebo", "Placebo; low\u2011dose aspirin", "text", True),  # typography, word order
        ("no adverse events", "adverse events", "text", False),  # a negation
        ("p < 0.05", "p 0.05", "text", False),  # a comparator
        (["nausea", "Headache"], ["headache", "nausea"], "text", True),
        (True, "true", "boolean", True),
    ],
)
def test_values_are_the_same_after_normalisation_only(first, second, kind, same):
    assert same_value(first, second, kind) is same


def test_states():
    assert agreement_state(None, "", "text") == "neither"
    assert agreement_state(12, None, "number") == "only_one" and agreement_state([], "x") == "only_one"
    assert agreement_state(12, 12.0, "number") == "agreed" and agreement_state(12, 13, "number") == "disagreed"


def test_two_extractions_compared_field_by_field_and_entry_by_identity(template):
    first = {
        "n_treatment": {"value": 30},
        "n_control": {"value": 29},
        "study_design": {"value": "parallel RCT"},
        "funding_source": {"value": "none declared"},
        "outcomes[0].outcome": {"value": "Pain at rest"},
        "outcomes[0].time_point": {"value": "6 weeks"},
        "outcomes[0].intervention": {"value": "juice"},
        "outcomes[0].comparator": {"value": "water"},
        "outcomes[0].mean_intervention": {"value": 2.1},
        "outcomes[1].outcome": {"value": "Nausea"},
        "outcomes[1].time_point": {"value": "6 weeks"},
        "outcomes[1].intervention": {"value": "juice"},
        "outcomes[1].comparator": {"value": "water"},
        "outcomes[1].events_intervention": {"value": 3},
    }
    second = {  # B lists the outcomes in the other order, reads one number otherwise and misses the funding
        "n_treatment": {"value": "30"},
        "n_control": {"value": 28},
        "study_design": {"value": "Parallel  RCT"},
        "outcomes[0].outcome": {"value": "nausea"},
        "outcomes[0].time_point": {"value": "6 weeks"},
        "outcomes[0].intervention": {"value": "Juice"},
        "outcomes[0].comparator": {"value": "water"},
        "outcomes[0].events_intervention": {"value": 3},
        "outcomes[1].outcome": {"value": "pain at rest"},
        "outcomes[1].time_point": {"value": "6 weeks"},
        "outcomes[1].intervention": {"value": "juice"},
        "outcomes[1].comparator": {"value": "water"},
        "outcomes[1].mean_intervention": {"value": 2.4},
        "outcomes[2].outcome": {"value": "Dropouts"},
    }
    values = {value.field: value for value in compare_extractions(first, second, template)}
    assert values["n_treatment"].state == "agreed" and values["study_design"].state == "agreed"
    assert values["n_control"].state == "disagreed" and (values["n_control"].first, values["n_control"].second) == (
        29,
        28,
    )
    assert values["funding_source"].state == "only_one" and values["nct_number"].state == "neither"
    pain = values["outcomes[0].mean_intervention"]
    assert pain.state == "disagreed" and pain.second_field == "outcomes[1].mean_intervention"  # matched by identity
    assert values["outcomes[1].events_intervention"].state == "agreed"
    assert values["outcomes[1].outcome"].second_field == "outcomes[0].outcome"
    dropouts = values["outcomes[2].outcome"]  # an entry only B found: numbered after A's, B's own name beside it
    assert dropouts.state == "only_one" and dropouts.second_field == "outcomes[2].outcome"

    statistics = {row.field: row for row in agreement_statistics([list(values.values())], template)}
    assert (statistics["n_control"].compared, statistics["n_control"].agreed) == (1, 0)
    outcome = statistics["outcomes.outcome"]
    assert (outcome.compared, outcome.agreed, outcome.only_one, outcome.percent_agreement) == (2, 2, 1, 100.0)
    assert statistics["nct_number"].percent_agreement is None


def test_cohen_kappa_on_known_data():
    # 50 items rated yes/no by two raters: 20 both yes, 15 both no, 5 and 10 apart — kappa 0.4 (observed 0.7,
    # chance 0.5), the textbook example
    pairs = [("yes", "yes")] * 20 + [("yes", "no")] * 5 + [("no", "yes")] * 10 + [("no", "no")] * 15
    assert cohen_kappa(pairs) == 0.4
    assert cohen_kappa([("low", "low"), ("high", "high"), ("unclear", "unclear")]) == 1.0
    assert cohen_kappa([("low", "high"), ("high", "low")]) == -1.0
    assert cohen_kappa([("low", "low")] * 4) is None  # chance agreement is certain: kappa says nothing
    assert cohen_kappa([]) is None


def test_kappa_per_field_for_judgments_not_for_numbers(template):
    documents = []
    for first, second in [("low", "low"), ("high", "high"), ("low", "high"), ("unclear", "unclear")]:
        documents.append(
            compare_extractions(
                {"rob_blinding": {"value": first}, "n_control": {"value": 10}},
                {"rob_blinding": {"value": second}, "n_control": {"value": 10}},
                template,
            )
        )
    statistics = {row.field: row for row in agreement_statistics(documents, template)}
    blinding = statistics["rob_blinding"]
    assert (blinding.compared, blinding.agreed, blinding.percent_agreement) == (4, 3, 75.0)
    # observed 0.75; chance (2·1 + 1·2 + 1·1) / 16 = 5/16; kappa = (0.75 − 0.3125) / 0.6875
    assert blinding.kappa == round((0.75 - 5 / 16) / (1 - 5 / 16), 4)
    assert statistics["n_control"].kappa is None and statistics["n_control"].percent_agreement == 100.0
