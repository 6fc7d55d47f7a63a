"""Whether a number can be what its field says it is — a group size above 0, events between 0 and the group, an SD
above 0, a percentage between 0 and 100, a CI around its estimate — checked where a value enters (the page, the grid,
a workbook: a clear refusal) and again before the analysis files are written (a value that fails is left out and
named, never written and never crashing an export).

The rules go by the field's role, read from its name as the templates write them (``n_intervention``,
``events_comparator``, ``sd_treatment``, ``percent_…``, ``p_value…``): one set of rules for every template that
names its fields so. Every number also stays within what the exports hold exactly (``MAX_MAGNITUDE``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from atlas_pipeline.core.numbers import number_or_none

MAX_MAGNITUDE = 1e15  # no count or measurement is larger; int64 and float64 hold every number up to it exactly
RATIO_MEASURES = frozenset({"RR", "OR", "HR"})
ARMS = ("intervention", "comparator", "treatment", "control")

_SIZE = re.compile(r"^(n|total)_")  # n_intervention, total_comparator, n_treatment_outcome
_EVENTS = re.compile(r"^events?_")
_SPREAD = re.compile(r"^(sd|se)_")
_PERCENT = re.compile(r"(^percent_|_percent$)")
_P = re.compile(r"^p_value")
_LEVEL = re.compile(r"^ci_level$")


def as_number(value: Any) -> float | None:
    """A value as a number (an integer or a float, a numeric string), or None when it is not one."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        number = value if isinstance(value, int | float) else number_or_none(str(value))
        return None if number is None else float(number)
    except OverflowError:  # a whole number past what a float holds: beyond any plausible value, said so
        return math.inf


def value_problem(name: str, value: Any, *, entering: bool = False) -> str | None:
    """Why a single number cannot be the value of the field ``name`` (its bare name), or None. ``entering``: as a
    person types it — an SD of 0 may be what a paper reports (every participant alike), and is refused only where
    the analysis would divide by it."""
    number = as_number(value)
    if number is None:
        return None
    if not math.isfinite(number) or abs(number) > MAX_MAGNITUDE:
        return f"{_g(number)} is beyond any plausible {name} (at most {MAX_MAGNITUDE:.0e} in size)"
    if _SIZE.match(name) and not number > 0:
        return f"a group size is above 0 ({name} = {_g(number)})"
    if (_SIZE.match(name) or _EVENTS.match(name)) and number != int(number):
        return f"a count is a whole number ({name} = {_g(number)})"
    if _EVENTS.match(name) and number < 0:
        return f"a number of events is 0 or more ({name} = {_g(number)})"
    if _SPREAD.match(name) and (number < 0 if entering else not number > 0):
        return f"a standard deviation or error is {'0 or more' if entering else 'above 0'} ({name} = {_g(number)})"
    if _PERCENT.search(name) and not 0 <= number <= 100:
        return f"a percentage is between 0 and 100 ({name} = {_g(number)})"
    if _P.match(name) and not 0 < number <= 1:
        return f"a p value is above 0 and at most 1 ({name} = {_g(number)})"
    if _LEVEL.match(name) and not 50 <= number < 100:
        return f"a confidence level is a percentage such as 95 ({name} = {_g(number)})"
    return None


def entry_problems(cells: Mapping[str, Any]) -> list[tuple[tuple[str, ...], str]]:
    """What is inconsistent between the values of one entry (or one document's single fields), each with the fields
    it concerns: events above the group, an estimate outside its CI, a ratio at or below 0, a median outside its
    quartiles or range."""
    numbers = {name: as_number(value) for name, value in cells.items()}
    problems: list[tuple[tuple[str, ...], str]] = []

    def check(names: tuple[str, ...], ok: bool, said: str) -> None:
        if not ok:
            shown = ", ".join(f"{name} = {_g(numbers[name])}" for name in names)  # type: ignore[arg-type]
            problems.append((names, f"{said} ({shown})"))

    def given(*names: str) -> bool:
        return all(numbers.get(name) is not None for name in names)

    for arm in ARMS:
        events = next((f"{p}_{arm}" for p in ("events", "event") if given(f"{p}_{arm}")), None)
        total = next((f"{p}_{arm}" for p in ("total", "n") if given(f"{p}_{arm}")), None)
        if events and total:
            check((events, total), numbers[events] <= numbers[total], "more events than participants")  # type: ignore[operator]
        for low, high, what in (
            (f"q1_{arm}", f"q3_{arm}", "the first quartile is above the third"),
            (f"min_{arm}", f"max_{arm}", "the minimum is above the maximum"),
            (f"ci_lower_{arm}", f"ci_upper_{arm}", "the CI's lower limit is above its upper"),
        ):
            if given(low, high):
                check((low, high), numbers[low] <= numbers[high], what)  # type: ignore[operator]
        for low, high in ((f"q1_{arm}", f"q3_{arm}"), (f"min_{arm}", f"max_{arm}")):
            if given(low, f"median_{arm}", high):
                middle = numbers[f"median_{arm}"]
                ok = numbers[low] <= middle <= numbers[high]  # type: ignore[operator]
                check((low, f"median_{arm}", high), ok, "the median is outside its quartiles or range")
        if given(f"ci_lower_{arm}", f"mean_{arm}", f"ci_upper_{arm}"):
            ok = numbers[f"ci_lower_{arm}"] <= numbers[f"mean_{arm}"] <= numbers[f"ci_upper_{arm}"]  # type: ignore[operator]
            check((f"ci_lower_{arm}", f"mean_{arm}", f"ci_upper_{arm}"), ok, "the mean is outside its CI")
    for estimate, lower, upper in (
        ("effect_estimate", "ci_lower", "ci_upper"),
        ("hr_value", "hr_ci_lower", "hr_ci_upper"),
    ):
        if given(lower, upper):
            check((lower, upper), numbers[lower] <= numbers[upper], "the CI's lower limit is above its upper")  # type: ignore[operator]
            width, scale = numbers[upper] - numbers[lower], max(1.0, abs(numbers[lower]), abs(numbers[upper]))  # type: ignore[operator]
            if 0 <= width < 1e-9 * scale:  # a variance of ~0 would outweigh every other study in a pooling
                check((lower, upper), False, "a confidence interval has (almost) no width")
        if given(lower, estimate, upper) and numbers[lower] <= numbers[upper]:  # type: ignore[operator]
            ok = numbers[lower] <= numbers[estimate] <= numbers[upper]  # type: ignore[operator]
            check((lower, estimate, upper), ok, "the estimate is outside its CI")
    ratio = str(cells.get("effect_measure") or "") in RATIO_MEASURES
    for names, is_ratio, measure in (
        (("effect_estimate", "ci_lower", "ci_upper"), ratio, ("effect_measure",)),
        (("hr_value", "hr_ci_lower", "hr_ci_upper"), True, ()),
    ):
        for name in names:
            if is_ratio and given(name) and not numbers[name] > 0:  # type: ignore[operator]
                problems.append(((name, *measure), f"a ratio is above 0 ({name} = {_g(numbers[name])})"))
    return problems


def _g(number: float | None) -> str:
    if number is None:
        return "—"
    return f"{number:.6g}" if math.isfinite(number) and abs(number) < 1e15 else f"{number:.3g}"
