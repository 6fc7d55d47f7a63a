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
# what the annotators' notes say they computed: events from a percentage ("Used percent to calculate outcomes",
# "calculated from the percentages", "back-calculated from %"), SDs from a CI, an SE, a p or a t ("Have to use CI to
# calculate the SDs", "Back calculated SD from SE", "SD derived from the standard error", "SE converted to SD")
_WORKED = r"(?:back[- ]?)?(?:calculat|comput|deriv|convert|estimat|work)\w*"
_SOURCES = r"(?:CI|confidence interval|SE|SEM|standard error|p[- ]?value|p|t[- ]?value|t[- ]?test|t)s?"
_SD = r"(?:SD|std|standard deviation)s?"
_DERIVED_EVENTS = re.compile(
    rf"(?i)\b(?:used|from|using) (?:the )?(?:percent(?:age)?s?|%).*\b{_WORKED}|\b{_WORKED}\b.*\bfrom (?:the )?"
    r"(?:percent(?:age)?s?|%)"
)
_DERIVED_SDS = re.compile(
    rf"(?i)\b{_SOURCES}\b.*\b{_WORKED}\b.*\b{_SD}\b|\b{_WORKED}\b.*\b{_SD}\b.*\bfrom\b[^.;]*?\b{_SOURCES}\b"
    rf"|\b{_SD}\b.*\b{_WORKED}\b.*\bfrom\b[^.;]*?\b{_SOURCES}\b|\b{_SOURCES}\b.*\bconverted to {_SD}\b"
)
# a median (with its IQR or range) written where the mean and SD go: neither written as asked nor derived
_MEDIAN = re.compile(r"(?i)\bmedians?\b|\bIQ(?:R|s)?\b|\binter-?quartile|\bIQ (?:range|scores?)")


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


def median_fields(row: dict[str, Any]) -> set[str]:
    """The fields of a Yun row whose notes say a median and IQR (or range) stand where the mean and SD go."""
    if _MEDIAN.search(str(row.get("notes") or "")):
        return {"mean_intervention", "sd_intervention", "mean_comparator", "sd_comparator"}
    return set()


def yun_values(row: dict[str, Any]) -> list[dict[str, Any]]:
    """A Yun row as gold lines of the ``outcomes`` group (a null is "not reported": kept, so a value extracted where
    the paper reports none counts as wrong)."""
    pdf = str(row.get("pdf_path") or "")
    document = pdf.rsplit("/", 1)[-1] if pdf else f"PMC{row['pmcid']}.pdf"
    entry = {"outcome": row["outcome"], "intervention": row.get("intervention"), "comparator": row.get("comparator")}
    columns = {**_ARMS, **_SIZES.get(str(row.get("outcome_type")), {})}
    derived, medians = derived_fields(row), median_fields(row)
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
            "median": field in medians,
        }
        for column, field in columns.items()
        if field.startswith(wanted)
    ]
