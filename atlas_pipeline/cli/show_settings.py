"""`atlas settings`: every `ATLAS_*` variable with its current value."""

from __future__ import annotations

import argparse

from atlas_pipeline.config.settings import describe_settings, load_settings


def command_settings(args: argparse.Namespace) -> int:
    """Every ATLAS_* variable with its current value."""
    current = load_settings()
    for variable, _default, description in describe_settings():
        value = getattr(current, variable.removeprefix("ATLAS_").lower())
        if hasattr(value, "get_secret_value"):
            value = "(set)" if value.get_secret_value() else "(empty)"
        print(f"{variable:<34} {value!s:<40} {description}")
    return 0
