"""Consistency checks between extracted values, as a template declares them (``grading.consistency`` evaluates
them).

Each quote can be verified and the values still contradict each other — 45 events out of 30 patients, a hazard ratio
outside its own confidence interval, a p-value of 3. A template declares what must hold, for example::

    {"rule": "le", "fields": ["event_treatment", "total_treatment"]}          events ≤ total
    {"rule": "le", "fields": ["hr_ci_lower", "hr_value", "hr_ci_upper"]}     a chain: lower ≤ estimate ≤ upper
    {"rule": "lt", "fields": ["a", "b"]}                                     strictly less
    {"rule": "range", "fields": ["p_value"], "min": 0, "max": 1}             bounds (either may be left out)
    {"rule": "positive", "fields": ["hr_value"]}                             > 0 (ratios)
    {"rule": "integer", "fields": ["n_treatment"]}                           a whole number

Rules only look at values that are there: a missing value is a completeness matter, not an inconsistency. The
evaluation takes a plain mapping of field → value, so it applies to a document's fields or to one entry of a
repeating group alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field, model_validator

NUMERIC_TYPES = ("integer", "number")


class ConsistencyCheck(BaseModel):
    """One declared rule over numeric fields of a template."""

    rule: Literal["le", "lt", "range", "positive", "integer"]
    fields: list[str] = Field(min_length=1)
    min: float | None = None
    max: float | None = None
    description: str = ""

    @model_validator(mode="after")
    def _complete(self) -> ConsistencyCheck:
        if self.rule in ("le", "lt") and len(self.fields) < 2:
            raise ValueError(f"rule {self.rule!r} compares at least two fields, got {self.fields}")
        if self.rule == "range" and self.min is None and self.max is None:
            raise ValueError(f"rule 'range' on {self.fields} needs a min, a max or both")
        return self

    def label(self) -> str:
        """The rule as a person reads it, e.g. ``event_treatment ≤ total_treatment``."""
        if self.description:
            return self.description
        if self.rule in ("le", "lt"):
            return f" {'≤' if self.rule == 'le' else '<'} ".join(self.fields)
        if self.rule == "positive":
            return ", ".join(self.fields) + " > 0"
        if self.rule == "integer":
            return ", ".join(self.fields) + " whole number(s)"
        low = f"{self.min:g} ≤ " if self.min is not None else ""
        high = f" ≤ {self.max:g}" if self.max is not None else ""
        return f"{low}{', '.join(self.fields)}{high}"


def check_fields_exist(checks: list[ConsistencyCheck], field_types: Mapping[str, str]) -> list[str]:
    """Problems with declared checks: unknown fields, or fields that are not numeric."""
    problems = []
    for check in checks:
        for name in check.fields:
            if name not in field_types:
                problems.append(f"check {check.label()!r} names an unknown field {name!r}")
            elif field_types[name] not in NUMERIC_TYPES:
                problems.append(f"check {check.label()!r} needs numeric fields, {name!r} is {field_types[name]}")
    return problems
