"""The Cochrane Handbook's conversions (chapter 6): the number an analysis needs, computed from the numbers a paper
wrote, each with its arithmetic written out so that a person can check it.

Every function takes plain numbers and returns a :class:`Conversion` — the result, the formula's name, the inputs by
role and the arithmetic as text ("SD = SE × √n = 1.2 × √30 = 6.573"). Conversions the Handbook warns against (an SD
from a range, from a median and IQR) are here too but marked ``caution``: they are offered only to a team that opted
in to the named method, and otherwise only flagged (``review.derived_values``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from scipy import stats

# below this many participants (in a group, or both groups for a difference) a CI was computed with a t value
SMALL_SAMPLE = 60
Z_95 = 3.92  # the width of a 95% CI in standard errors, as the Handbook rounds it (2 × 1.96)


class ConversionError(ValueError):
    """The inputs cannot give the value (a CI upper below its lower, a ratio ≤ 0, a p of 0 …): said in words."""


@dataclass(frozen=True)
class Conversion:
    formula: str  # the name (``FORMULAS``)
    value: float
    inputs: dict[str, float]  # role → the number used
    arithmetic: str  # the computation written out, with the numbers
    source: str  # where the method is described
    caution: str = ""  # why the Handbook warns against it (empty: a sound conversion)
    notes: list[str] = field(default_factory=list)


def _g(number: float, digits: int = 4) -> str:
    """A number as it reads best in arithmetic: no trailing zeros, ``digits`` significant figures."""
    return f"{number:.{digits}g}" if abs(number) < 10**digits else f"{number:.0f}"


def _positive(name: str, number: float) -> None:
    if not number > 0:
        raise ConversionError(f"{name} must be greater than 0 (got {_g(number)})")


def _interval(lower: float, upper: float) -> None:
    if not upper > lower:
        raise ConversionError(f"the interval's upper limit ({_g(upper)}) must be above its lower ({_g(lower)})")


def t_multiplier(degrees_of_freedom: float, level: float = 0.95) -> float:
    """Half the width of a ``level`` CI in standard errors on a t distribution (2.0639 for 24 df at 95%)."""
    return float(stats.t.ppf(1 - (1 - level) / 2, degrees_of_freedom))


def _width_in_se(n_total: float, degrees_of_freedom: float, level: float) -> tuple[float, str]:
    """How many standard errors wide a ``level`` CI is: 3.92 (95%, large samples) or 2 × t for small ones."""
    if n_total < SMALL_SAMPLE:
        t = t_multiplier(degrees_of_freedom, level)
        return 2 * t, f"2 × t({_g(degrees_of_freedom)} df) = 2 × {t:.4f}"
    z = float(stats.norm.ppf(1 - (1 - level) / 2))
    width = Z_95 if level == 0.95 else 2 * z
    return width, f"{width:.2f}"


def sd_from_se(se: float, n: float) -> Conversion:
    """SD of a group from the standard error of its mean: SD = SE × √n (Handbook 6.5.2.2)."""
    _positive("the standard error", se)
    _positive("the group size", n)
    value = se * math.sqrt(n)
    return Conversion(
        "sd_from_se",
        value,
        {"se": se, "n": n},
        f"SD = SE × √n = {_g(se)} × √{_g(n)} = {_g(value)}",
        "Cochrane Handbook 6.5.2.2",
    )


def sd_from_ci(lower: float, upper: float, n: float, level: float = 0.95) -> Conversion:
    """SD of a group from the CI of its mean: SD = √n × (upper − lower) / 3.92, with 2 × t(n − 1) in place of 3.92
    for a group under 60 (Handbook 6.5.2.2)."""
    _interval(lower, upper)
    _positive("the group size", n)
    if n < 2:
        raise ConversionError("a group of one has no confidence interval")
    width, said = _width_in_se(n, n - 1, level)
    value = math.sqrt(n) * (upper - lower) / width
    return Conversion(
        "sd_from_ci",
        value,
        {"lower": lower, "upper": upper, "n": n},
        f"SD = √n × (upper − lower) / ({said}) = √{_g(n)} × ({_g(upper)} − {_g(lower)}) / {width:.4g} = {_g(value)}",
        "Cochrane Handbook 6.5.2.2",
    )


def se_of_difference_from_ci(lower: float, upper: float, n1: float, n2: float, level: float = 0.95) -> Conversion:
    """SE of a mean difference from its CI: (upper − lower) / 3.92, or 2 × t(n1 + n2 − 2) for small trials
    (Handbook 6.5.2.3)."""
    _interval(lower, upper)
    width, said = _width_in_se(n1 + n2, n1 + n2 - 2, level)
    value = (upper - lower) / width
    return Conversion(
        "se_from_ci",
        value,
        {"lower": lower, "upper": upper, "n1": n1, "n2": n2},
        f"SE = (upper − lower) / ({said}) = ({_g(upper)} − {_g(lower)}) / {width:.4g} = {_g(value)}",
        "Cochrane Handbook 6.5.2.3",
    )


def se_of_difference_from_p(difference: float, p: float, n1: float, n2: float) -> Conversion:
    """SE of a mean difference from its exact two-sided p (a t test): t = the t value with n1 + n2 − 2 df whose
    two-sided p is ``p``; SE = |MD| / t (Handbook 6.5.2.3). A p written as a bound ("p < 0.05") is not exact."""
    if not 0 < p < 1:
        raise ConversionError(f"an exact p value between 0 and 1 is needed (got {_g(p)})")
    if difference == 0:
        raise ConversionError("a difference of 0 gives no standard error from its p value")
    degrees = n1 + n2 - 2
    t = float(stats.t.ppf(1 - p / 2, degrees))
    value = abs(difference) / t
    return Conversion(
        "se_from_p",
        value,
        {"difference": difference, "p": p, "n1": n1, "n2": n2},
        f"t = t⁻¹(1 − {_g(p)}/2, {_g(degrees)} df) = {t:.4f}; SE = |MD| / t = {_g(abs(difference))} / {t:.4f} "
        f"= {_g(value)}",
        "Cochrane Handbook 6.5.2.3",
    )


def sd_from_se_of_difference(se: float, n1: float, n2: float) -> Conversion:
    """The within-group SD (the same for both groups) from the SE of a mean difference: SD = SE / √(1/n1 + 1/n2)
    (Handbook 6.5.2.3)."""
    _positive("the standard error", se)
    _positive("the first group's size", n1)
    _positive("the second group's size", n2)
    root = math.sqrt(1 / n1 + 1 / n2)
    value = se / root
    return Conversion(
        "sd_from_se_of_difference",
        value,
        {"se": se, "n1": n1, "n2": n2},
        f"SD = SE / √(1/n1 + 1/n2) = {_g(se)} / √(1/{_g(n1)} + 1/{_g(n2)}) = {_g(se)} / {root:.4f} = {_g(value)}",
        "Cochrane Handbook 6.5.2.3",
    )


def _sd_from_difference(
    formula: str, inputs: dict[str, float], se: float, said: str, n1: float, n2: float
) -> Conversion:
    """The within-group SD once the SE of the mean difference is known (``said``: how it was found)."""
    then = sd_from_se_of_difference(se, n1, n2)
    return Conversion(formula, then.value, inputs, f"{said}; {then.arithmetic}", "Cochrane Handbook 6.5.2.3")


def sd_from_ci_of_difference(lower: float, upper: float, n1: float, n2: float, level: float = 0.95) -> Conversion:
    """The within-group SD from the CI of a mean difference: its SE from the CI, then SD = SE / √(1/n1 + 1/n2)."""
    se = se_of_difference_from_ci(lower, upper, n1, n2, level)
    inputs = {"lower": lower, "upper": upper, "n1": n1, "n2": n2}
    return _sd_from_difference("sd_from_ci_of_difference", inputs, se.value, se.arithmetic, n1, n2)


def sd_from_t(t: float, difference: float, n1: float, n2: float) -> Conversion:
    """The within-group SD from a two-sample t statistic: SE = |MD| / |t|, then SD = SE / √(1/n1 + 1/n2)."""
    if t == 0:
        raise ConversionError("a t of 0 gives no standard error")
    se = abs(difference) / abs(t)
    said = f"SE = |MD| / |t| = {_g(abs(difference))} / {_g(abs(t))} = {_g(se)}"
    inputs = {"t": t, "difference": difference, "n1": n1, "n2": n2}
    return _sd_from_difference("sd_from_t", inputs, se, said, n1, n2)


def sd_from_p(p: float, difference: float, n1: float, n2: float) -> Conversion:
    """The within-group SD from an exact p of a t test: the SE from p, then SD = SE / √(1/n1 + 1/n2)."""
    se = se_of_difference_from_p(difference, p, n1, n2)
    inputs = {"p": p, "difference": difference, "n1": n1, "n2": n2}
    return _sd_from_difference("sd_from_p", inputs, se.value, se.arithmetic, n1, n2)


def events_from_percentage(percentage: float, n: float) -> Conversion:
    """Events from a percentage of a known group size: round(percentage × n / 100). Refused when no whole number of
    events gives the percentage as written (to its last digit): the percentage is then of another denominator."""
    _positive("the group size", n)
    if not 0 <= percentage <= 100:
        raise ConversionError(f"a percentage between 0 and 100 is needed (got {_g(percentage)})")
    exact = percentage * n / 100
    value = round(exact)
    written = repr(float(percentage)).removesuffix(".0")  # 42.0 is written "42": its precision is a whole percent
    decimals = len(written.split(".")[1]) if "." in written else 0
    half_step = 0.5 * 10**-decimals  # the percentage as written stands for anything within half its last digit
    if abs(100 * value / n - percentage) > half_step + 1e-9:
        raise ConversionError(
            f"{_g(percentage)}% of {_g(n)} is {_g(exact)}: no whole number of events gives {written}% "
            "(a percentage of another denominator?)"
        )
    return Conversion(
        "events_from_percentage",
        value,
        {"percentage": percentage, "n": n},
        f"events = round(% × n / 100) = round({_g(percentage)} × {_g(n)} / 100) = round({_g(exact)}) = {value}",
        "Cochrane Handbook 6.4.1",
    )


def log_ratio_from_ci(estimate: float, lower: float, upper: float, level: float = 0.95) -> Conversion:
    """A ratio (RR, OR, HR) on the log scale with its SE from the CI: ln(estimate), SE = (ln upper − ln lower) /
    3.92 (Handbook 6.3.2). The value is the log ratio; ``notes`` carries its SE."""
    for name, number in (("the ratio", estimate), ("the lower limit", lower), ("the upper limit", upper)):
        _positive(name, number)
    _interval(lower, upper)
    if not lower <= estimate <= upper:
        raise ConversionError(f"the ratio {_g(estimate)} is outside its interval {_g(lower)} to {_g(upper)}")
    width = Z_95 if level == 0.95 else 2 * float(stats.norm.ppf(1 - (1 - level) / 2))
    log_value = math.log(estimate)
    se = (math.log(upper) - math.log(lower)) / width
    return Conversion(
        "log_ratio_from_ci",
        log_value,
        {"estimate": estimate, "lower": lower, "upper": upper},
        f"ln(ratio) = ln({_g(estimate)}) = {log_value:.4f}; SE = (ln {_g(upper)} − ln {_g(lower)}) / {width:.2f} "
        f"= {se:.4f}",
        "Cochrane Handbook 6.3.2",
        notes=[f"se={se}"],
    )


def se_from_ci(lower: float, upper: float, level: float = 0.95) -> float:
    """The SE of an estimate on a normal scale (a mean difference, a log ratio) from its CI, large samples."""
    _interval(lower, upper)
    width = Z_95 if level == 0.95 else 2 * float(stats.norm.ppf(1 - (1 - level) / 2))
    return (upper - lower) / width


def n_from_arms(*arms: float) -> Conversion:
    """A total from its arms: n = n1 + n2 (+ …)."""
    for number in arms:
        _positive("an arm's size", number)
    value = sum(arms)
    return Conversion(
        "n_from_arms",
        value,
        {f"n{i}": number for i, number in enumerate(arms, 1)},
        f"n = {' + '.join(_g(a) for a in arms)} = {_g(value)}",
        "arithmetic",
    )


def sd_from_iqr(q1: float, q3: float) -> Conversion:
    """SD ≈ IQR / 1.35 — only for a normal distribution; a median and IQR usually mean a skewed one (Handbook
    6.5.2.5). Marked ``caution``."""
    _interval(q1, q3)
    value = (q3 - q1) / 1.35
    return Conversion(
        "sd_from_iqr",
        value,
        {"q1": q1, "q3": q3},
        f"SD ≈ (Q3 − Q1) / 1.35 = ({_g(q3)} − {_g(q1)}) / 1.35 = {_g(value)}",
        "Cochrane Handbook 6.5.2.5",
        caution="a median and IQR are reported for skewed data, for which IQR / 1.35 is not the SD",
    )


def sd_from_range(low: float, high: float) -> Conversion:
    """SD ≈ range / 4 — the Handbook advises against it (the range depends on the extremes and the sample size).
    Marked ``caution``."""
    _interval(low, high)
    value = (high - low) / 4
    return Conversion(
        "sd_from_range",
        value,
        {"low": low, "high": high},
        f"SD ≈ (max − min) / 4 = ({_g(high)} − {_g(low)}) / 4 = {_g(value)}",
        "Cochrane Handbook 6.5.2.6",
        caution="the Handbook advises against estimating an SD from a range",
    )


FORMULAS = {
    "sd_from_se": sd_from_se,
    "sd_from_ci": sd_from_ci,
    "sd_from_t": sd_from_t,
    "sd_from_p": sd_from_p,
    "sd_from_se_of_difference": sd_from_se_of_difference,
    "sd_from_ci_of_difference": sd_from_ci_of_difference,
    "events_from_percentage": events_from_percentage,
    "log_ratio_from_ci": log_ratio_from_ci,
    "n_from_arms": n_from_arms,
    "sd_from_iqr": sd_from_iqr,
    "sd_from_range": sd_from_range,
}
CAUTIONED = frozenset({"sd_from_iqr", "sd_from_range"})  # only with the team's opt-in (ATLAS_DERIVE_OPT_IN)
