"""Gold files as teams have them: Atlas's own lines (one value a line), or the outcome rows of Yun et al. (2024) — the
format of the shared corpus's human extraction — read as they are.

A Yun row is one outcome of one trial: intervention, comparator, outcome type, each arm's events or mean and SD, and
group sizes, with the annotator's notes. The notes say when a value was worked out rather than read ("Used percent to
calculate outcomes for binary variables", "Have to use CI to calculate the SDs"): such values are ``derived`` — the
paper does not print them — and an evaluation reports them apart from the written ones.
"""

from __future__ import annotations

import re
from typing import Any

YUN_KEYS = frozenset({"pmcid", "outcome", "intervention", "comparator", "outcome_type"})
_ARMS = {  # Yun column → the rct_base template's outcomes field (group sizes depend on the outcome type)
    "intervention_events": "events_intervention",
    "comparator_events": "events_comparator",
    "intervention_mean": "mean_intervention",
    "intervention_standard_deviation": "sd_intervention",
    "comparator_mean": "mean_comparator",
    "comparator_standard_deviation": "sd_comparator",
}
_SIZES = {
    "binary": {"intervention_group_size": "total_intervention", "comparator_group_size": "total_comparator"},
    "continuous": {"intervention_group_size": "n_intervention", "comparator_group_size": "n_comparator"},
}
# what the annotators' notes say they computed: events from a percentage, SDs from a CI (or an SE)
_DERIVED_EVENTS = re.compile(r"(?i)\b(used|from) (the )?percent(age)?\b.*\bcalculat")
_DERIVED_SDS = re.compile(r"(?i)\b(CI|confidence interval|SE|standard error)s?\b.*\bcalculat\w*\b.*\b(SD|standard dev)")


def is_yun_row(data: dict[str, Any]) -> bool:
    return data.keys() >= YUN_KEYS


def derived_fields(row: dict[str, Any]) -> set[str]:
    """The fields of a Yun row its notes say were computed, not read."""
    notes = str(row.get("notes") or "")
    derived = set()
    if _DERIVED_EVENTS.search(notes):
        derived |= {"events_intervention", "events_comparator"}
    if _DERIVED_SDS.search(notes):
        derived |= {"sd_intervention", "sd_comparator"}
    return derived


def yun_values(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A Yun row as gold lines of the ``outcomes`` group (a null is "not reported": kept, so a value extracted where
    the paper reports none counts as wrong)."""
    pdf = str(row.get("pdf_path") or "")
    document = pdf.rsplit("/", 1)[-1] if pdf else f"PMC{row['pmcid']}.pdf"
    entry = {"outcome": row["outcome"], "intervention": row.get("intervention"), "comparator": row.get("comparator")}
    columns = {**_ARMS, **_SIZES.get(str(row.get("outcome_type")), {})}
    derived = derived_fields(row)
    kind = str(row.get("outcome_type") or "")
    wanted = {  # an arm's events belong to a binary outcome, its mean and SD to a continuous one
        "binary": ("events_", "total_"),
        "continuous": ("mean_", "sd_", "n_"),
    }.get(kind, ("",))
    return [
        {
            "document": document,
            "group": "outcomes",
            "entry": entry,
            "field": field,
            "value": row.get(column),
            "derived": field in derived,
        }
        for column, field in columns.items()
        if field.startswith(wanted)
    ]
