"""`atlas settings`: every `ATLAS_*` variable with its current value, group by group."""

from __future__ import annotations

import argparse

from atlas_pipeline.config.review_folder import REVIEW_FILE, find_review
from atlas_pipeline.config.settings import SETTING_GROUPS, describe_settings, load_settings


def command_settings(args: argparse.Namespace) -> int:
    """Every ATLAS_* variable with its current value, group by group."""
    current = load_settings()
    review = find_review()
    if review is not None:  # where the values that no ATLAS_* variable sets come from
        print(f"# review {review.root}: its {REVIEW_FILE} under the ATLAS_* variables\n")
    group = None
    for row in describe_settings():
        if row.group != group:
            print(f"{'' if group is None else chr(10)}# {row.group}: {SETTING_GROUPS[row.group][0]}")
            group = row.group
        value = current.value(row.variable.removeprefix("ATLAS_").lower())
        if hasattr(value, "get_secret_value"):
            value = "(set)" if value.get_secret_value() else "(empty)"
        print(f"{row.variable:<34} {value!s:<40} {row.description}")
    return 0
