"""The juice trial (PMC1216327) as a careful model answers it — what the scripted OpenAI-compatible server says in
the LLM extraction and review tests (the ``run`` fixture in ``conftest.py`` materialises it in llm mode)."""

import json

KEY = "PMC1216327.pdf"
API_KEY = "sk-atlas-test-d41d8cd98f00b204"
NOT_REPORTED = {"value": None, "quote": None}
# What a careful model answers for the juice trial (White Grape Juice vs water): every field answered, values and
# quotes as the document states them, the rest explicitly not reported.
CORRECT = {
    "study_id": {"value": "Valois 2005", "quote": "© 2005 Valois et al"},
    "nct_number": NOT_REPORTED,
    "study_design": {
        "value": "double-blind, randomized clinical trial",
        "quote": "Controlled, double-blind, randomized clinical trial to evaluate the impact of fruit juice",
    },
    "funding_source": NOT_REPORTED,
    "treatment_name": {"value": "White Grape Juice", "quote": "30 received White Grape Juice (WGJ)"},
    "control_name": {"value": "colored and flavored water", "quote": "30 were given colored and flavored water (WA)"},
    "n_treatment": {"value": 30, "quote": "30 received White Grape Juice (WGJ)"},
    "n_control": {"value": 30, "quote": "30 were given colored and flavored water (WA)"},
    "age_treatment": {"value": 10.27, "quote": "Age (months) 10.27 4.75 10.27 4.14 11.09 4.00"},
    "age_control": {"value": 11.09, "quote": "Age (months) 10.27 4.75 10.27 4.14 11.09 4.00"},
    "male_percent": NOT_REPORTED,
    "rob_randomization": NOT_REPORTED,
    "rob_allocation": NOT_REPORTED,
    "rob_blinding": NOT_REPORTED,
    "rob_attrition": NOT_REPORTED,
    "endpoint_name": {"value": "Duration of diarrhea", "quote": "Duration of diarrhea in hours after randomization"},
    "hr_value": NOT_REPORTED,
    "hr_ci_lower": NOT_REPORTED,
    "hr_ci_upper": NOT_REPORTED,
    "p_value": {
        "value": 0.006,
        "quote": "The duration of the illness was longer in the infants fed juice as compared with those given WA "
        "(p = 0.006)",
    },
    "event_treatment": NOT_REPORTED,
    "total_treatment": NOT_REPORTED,
    "event_control": NOT_REPORTED,
    "total_control": NOT_REPORTED,
    "mean_treatment": {"value": 47.5, "quote": "White Grape Juice | 47.5 | 38.9"},
    "sd_treatment": {"value": 38.9, "quote": "White Grape Juice | 47.5 | 38.9"},
    "n_treatment_outcome": NOT_REPORTED,
    "mean_control": {"value": 26.5, "quote": "Water * | 26.5 | 27.4"},
    "sd_control": {"value": 27.4, "quote": "Water * | 26.5 | 27.4"},
    "n_control_outcome": NOT_REPORTED,
}


def answer(**overrides) -> str:
    return json.dumps({**CORRECT, **overrides})


# Outcome entries of the juice trial as a model gives them (the template's repeating ``outcomes`` group).
# what the trial does not write instead of an SD or a count (the inputs of derived values): said not reported
NOT_WRITTEN = (
    *("se_intervention", "se_comparator", "percent_intervention", "percent_comparator"),
    *(
        f"{name}_{arm}"
        for arm in ("intervention", "comparator")
        for name in (
            "ci_lower",
            "ci_upper",
            "median",
            "q1",
            "q3",
            "min",
            "max",
            "sd_baseline",
            "mean_change",
            "sd_change",
        )
    ),
    *("ci_level", "p_value_test", "t_value", "correlation", "o_minus_e", "variance_v"),
)


def entry(**values) -> dict:
    """One outcome entry as the model answers it: ``name=(value, quote)``; the inputs of derivations not reported,
    the rest left out."""
    given = {name: {"value": value, "quote": quote} for name, (value, quote) in values.items()}
    return {**dict.fromkeys(NOT_WRITTEN, NOT_REPORTED), **given}


DURATION = entry(
    outcome=("Duration of diarrhea", "Duration of diarrhea in hours after randomization"),
    intervention=("White Grape Juice", "White Grape Juice | 47.5 | 38.9"),
    comparator=("Water", "Water * | 26.5 | 27.4"),
    outcome_type=("continuous", None),
    mean_intervention=(47.5, "White Grape Juice | 47.5 | 38.9"),
    sd_intervention=(38.9, "White Grape Juice | 47.5 | 38.9"),
    mean_comparator=(26.5, "Water * | 26.5 | 27.4"),
    sd_comparator=(27.4, "Water * | 26.5 | 27.4"),
    p_value_comparison=(0.006, "compared with those given WA (p = 0.006)"),
)
FECAL = entry(
    outcome=("Fecal losses", "The fecal losses were also increased among the juice fed patients"),
    intervention=("White Grape Juice", None),
    comparator=("Water", None),
    mean_intervention=(3.59, "White Grape Juice | 3.59 | 2.35"),
    sd_intervention=(2.35, "White Grape Juice | 3.59 | 2.35"),
    mean_comparator=(2.19, "Waterx | 2.19* | 1.63"),
    sd_comparator=(1.63, "Waterx | 2.19* | 1.63"),
)
ANEMIA = entry(  # events above the arm's total: a consistency violation inside the entry
    outcome=("Mild anemia", "Mild Anemia"),
    intervention=("White Grape Juice", None),
    comparator=("Water", None),
    events_intervention=(26, "Mild Anemia † | 20(n) | 66.7 % | 26(n) | 86.6%"),
    total_intervention=(20, "Mild Anemia † | 20(n) | 66.7 %"),
)
