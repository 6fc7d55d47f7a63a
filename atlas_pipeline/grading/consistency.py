"""Consistency checks between extracted values evaluated (declared in the template: ``core.consistency_rules``).

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

import itertools
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from atlas_pipeline.core.consistency_rules import ConsistencyCheck


class Violation(BaseModel):
    """A rule that does not hold: the rule, the fields it involves and their values, and a message saying so."""

    rule: str
    fields: list[str]
    values: dict[str, float]
    message: str


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or math.isnan(value):
        return None
    return float(value)


def _show(value: float) -> str:
    return f"{value:g}"


def evaluate(checks: list[ConsistencyCheck], values: Mapping[str, Any]) -> list[Violation]:
    """Every violation of ``checks`` by ``values`` (field → value; absent or non-numeric values are skipped)."""
    violations: list[Violation] = []
    for check in checks:
        present = [(name, number) for name in check.fields if (number := _number(values.get(name))) is not None]
        if check.rule in ("le", "lt"):
            for (left, a), (right, b) in itertools.pairwise(present):
                if a > b or (check.rule == "lt" and a == b):
                    sign = "≤" if check.rule == "le" else "<"
                    message = f"{check.label()} does not hold: {left} = {_show(a)} is not {sign} {right} = {_show(b)}"
                    violations.append(
                        Violation(rule=check.label(), fields=[left, right], values={left: a, right: b}, message=message)
                    )
            continue
        for name, number in present:
            broken = (
                (check.rule == "positive" and number <= 0)
                or (check.rule == "integer" and not number.is_integer())
                or (check.rule == "range" and check.min is not None and number < check.min)
                or (check.rule == "range" and check.max is not None and number > check.max)
            )
            if broken:
                message = f"{check.label()} does not hold: {name} = {_show(number)}"
                violations.append(Violation(rule=check.label(), fields=[name], values={name: number}, message=message))
    return violations
