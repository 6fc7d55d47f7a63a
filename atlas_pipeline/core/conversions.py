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

from atlas_pipeline.core.errors import AtlasError

# below this many participants in a group (in each group, for a difference) a CI was computed with a t value
# (Handbook 6.5.2.2–3: "if the sample size is small (say fewer than 60 participants in each group)")
SMALL_SAMPLE = 60
Z_95 = 3.92  # the width of a 95% CI in standard errors, as the Handbook rounds it (2 × 1.96)


def _stats():
    """SciPy's distributions, loaded when a quantile is first asked for: importing the template (every process does)
    never pays for SciPy."""
    from scipy import stats

    return stats


class ConversionError(AtlasError, ValueError):
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


def _fraction(level: float) -> float:
    """A CI's level as a fraction, whether written as a percentage (95) or a fraction (0.95)."""
    fraction = level / 100 if level > 1 else level
    if not 0.5 <= fraction < 1:
        raise ConversionError(f"a confidence level between 50% and 100% is needed (got {_g(level)})")
    return fraction


def t_multiplier(degrees_of_freedom: float, level: float = 95) -> float:
    """Half the width of a ``level`` CI in standard errors on a t distribution (2.0639 for 24 df at 95%)."""
    return float(_stats().t.ppf(1 - (1 - _fraction(level)) / 2, degrees_of_freedom))


def z_multiplier(level: float = 95) -> float:
    """Half the width of a ``level`` CI in standard errors on the normal distribution (1.96 at 95%)."""
    return float(_stats().norm.ppf(1 - (1 - _fraction(level)) / 2))


def _width_in_se(small: bool, degrees_of_freedom: float, level: float) -> tuple[float, str]:
    """How many standard errors wide a ``level`` CI is: 3.92 (95%, large samples) or 2 × t for small ones."""
    if small:
        t = t_multiplier(degrees_of_freedom, level)
        return 2 * t, f"2 × t({_g(degrees_of_freedom)} df) = 2 × {t:.4f}"
    width = Z_95 if _fraction(level) == 0.95 else 2 * z_multiplier(level)
    return width, f"{width:.2f}" + ("" if _fraction(level) == 0.95 else f" (a {_g(_fraction(level) * 100)}% CI)")


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


def sd_from_ci(lower: float, upper: float, n: float, level: float = 95) -> Conversion:
    """SD of a group from the CI of its mean: SD = √n × (upper − lower) / 3.92, with 2 × t(n − 1) in place of 3.92
    for a group under 60 (Handbook 6.5.2.2)."""
    _interval(lower, upper)
    _positive("the group size", n)
    if n < 2:
        raise ConversionError("a group of one has no confidence interval")
    width, said = _width_in_se(n < SMALL_SAMPLE, n - 1, level)
    value = math.sqrt(n) * (upper - lower) / width
    return Conversion(
        "sd_from_ci",
        value,
        {"lower": lower, "upper": upper, "n": n},
        f"SD = √n × (upper − lower) / ({said}) = √{_g(n)} × ({_g(upper)} − {_g(lower)}) / {width:.4g} = {_g(value)}",
        "Cochrane Handbook 6.5.2.2",
    )


def se_of_difference_from_ci(lower: float, upper: float, n1: float, n2: float, level: float = 95) -> Conversion:
    """SE of a mean difference from its CI: (upper − lower) / 3.92, or 2 × t(n1 + n2 − 2) when each group is under
    60 (Handbook 6.5.2.3)."""
    _interval(lower, upper)
    width, said = _width_in_se(n1 < SMALL_SAMPLE and n2 < SMALL_SAMPLE, n1 + n2 - 2, level)
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
    t = float(_stats().t.ppf(1 - p / 2, degrees))
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


def sd_from_ci_of_difference(lower: float, upper: float, n1: float, n2: float, level: float = 95) -> Conversion:
    """The within-group SD from the CI of a mean difference: its SE from the CI, then SD = SE / √(1/n1 + 1/n2)."""
    se = se_of_difference_from_ci(lower, upper, n1, n2, level)
    inputs = {"lower": lower, "upper": upper, "n1": n1, "n2": n2, "level": level}
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


def log_ratio_from_ci(estimate: float, lower: float, upper: float, level: float = 95) -> Conversion:
    """A ratio (RR, OR, HR) on the log scale with its SE from the CI: ln(estimate), SE = (ln upper − ln lower) /
    3.92 (Handbook 6.3.2). The value is the log ratio; ``notes`` carries its SE."""
    for name, number in (("the ratio", estimate), ("the lower limit", lower), ("the upper limit", upper)):
        _positive(name, number)
    _interval(lower, upper)
    if not lower <= estimate <= upper:
        raise ConversionError(f"the ratio {_g(estimate)} is outside its interval {_g(lower)} to {_g(upper)}")
    width = Z_95 if _fraction(level) == 0.95 else 2 * z_multiplier(level)
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


def se_from_ci(
    lower: float, upper: float, level: float = 95, n1: float | None = None, n2: float | None = None
) -> float:
    """The SE of an estimate on a normal scale (a mean difference, a log ratio) from its CI: 3.92 wide at 95%, or
    2 × t(n1 + n2 − 2) when both group sizes are known and each is under 60 (Handbook 6.5.2.3)."""
    _interval(lower, upper)
    small = n1 is not None and n2 is not None and n1 < SMALL_SAMPLE and n2 < SMALL_SAMPLE
    width, _ = _width_in_se(small, (n1 or 0) + (n2 or 0) - 2, level)
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


def _normal_quantile(probability: float) -> float:
    return float(_stats().norm.ppf(probability))


def _group_size(n: float) -> None:
    _positive("the group size", n)
    if n < 3:
        raise ConversionError("a median with its quartiles or range needs a group of at least 3")


def mean_from_median_iqr(q1: float, median: float, q3: float, n: float) -> Conversion:
    """The mean estimated from a median and its quartiles: x̄ ≈ w (q1 + q3)/2 + (1 − w) m with w = 0.7 + 0.39/n (Luo
    et al. 2018, Stat Methods Med Res, scenario S3). Only for roughly symmetric data: marked ``caution``."""
    _group_size(n)
    if not q1 <= median <= q3:
        raise ConversionError(f"the median {_g(median)} is outside its quartiles {_g(q1)} to {_g(q3)}")
    weight = 0.7 + 0.39 / n
    value = weight * (q1 + q3) / 2 + (1 - weight) * median
    return Conversion(
        "mean_from_median_iqr",
        value,
        {"q1": q1, "median": median, "q3": q3, "n": n},
        f"w = 0.7 + 0.39/n = 0.7 + 0.39/{_g(n)} = {weight:.4f}; mean ≈ w × (q1 + q3)/2 + (1 − w) × m = {weight:.4f} × "
        f"({_g(q1)} + {_g(q3)})/2 + {1 - weight:.4f} × {_g(median)} = {_g(value)}",
        "Luo et al. 2018 (Stat Methods Med Res 27:1785), scenario S3",
        caution="a median and quartiles are reported for skewed data, for which this mean is an approximation",
    )


def sd_from_median_iqr(q1: float, q3: float, n: float) -> Conversion:
    """The SD estimated from the quartiles: SD ≈ (q3 − q1) / (2 Φ⁻¹((0.75n − 0.125)/(n + 0.25))) (Wan et al. 2014,
    BMC Med Res Methodol, scenario C3). Marked ``caution``."""
    _group_size(n)
    _interval(q1, q3)
    quantile = _normal_quantile((0.75 * n - 0.125) / (n + 0.25))
    value = (q3 - q1) / (2 * quantile)
    return Conversion(
        "sd_from_median_iqr",
        value,
        {"q1": q1, "q3": q3, "n": n},
        f"η = 2 × Φ⁻¹((0.75n − 0.125)/(n + 0.25)) = 2 × Φ⁻¹({(0.75 * n - 0.125) / (n + 0.25):.4f}) = "
        f"{2 * quantile:.4f}; SD ≈ (q3 − q1) / η = ({_g(q3)} − {_g(q1)}) / {2 * quantile:.4f} = {_g(value)}",
        "Wan et al. 2014 (BMC Med Res Methodol 14:135), scenario C3",
        caution="a median and quartiles are reported for skewed data, for which this SD is an approximation",
    )


def mean_from_median_range(low: float, median: float, high: float, n: float) -> Conversion:
    """The mean estimated from a median and its range: x̄ ≈ w (a + b)/2 + (1 − w) m with w = 4 / (4 + n^0.75) (Luo
    et al. 2018, scenario S1). Marked ``caution``."""
    _group_size(n)
    if not low <= median <= high:
        raise ConversionError(f"the median {_g(median)} is outside its range {_g(low)} to {_g(high)}")
    weight = 4 / (4 + n**0.75)
    value = weight * (low + high) / 2 + (1 - weight) * median
    return Conversion(
        "mean_from_median_range",
        value,
        {"low": low, "median": median, "high": high, "n": n},
        f"w = 4 / (4 + n^0.75) = 4 / (4 + {_g(n)}^0.75) = {weight:.4f}; mean ≈ w × (min + max)/2 + (1 − w) × m = "
        f"{weight:.4f} × ({_g(low)} + {_g(high)})/2 + {1 - weight:.4f} × {_g(median)} = {_g(value)}",
        "Luo et al. 2018 (Stat Methods Med Res 27:1785), scenario S1",
        caution="a median and range are reported for skewed data, for which this mean is an approximation",
    )


def sd_from_median_range(low: float, high: float, n: float) -> Conversion:
    """The SD estimated from the range: SD ≈ (b − a) / (2 Φ⁻¹((n − 0.375)/(n + 0.25))) (Wan et al. 2014, scenario
    C1). Marked ``caution``."""
    _group_size(n)
    _interval(low, high)
    quantile = _normal_quantile((n - 0.375) / (n + 0.25))
    value = (high - low) / (2 * quantile)
    return Conversion(
        "sd_from_median_range",
        value,
        {"low": low, "high": high, "n": n},
        f"ξ = 2 × Φ⁻¹((n − 0.375)/(n + 0.25)) = 2 × Φ⁻¹({(n - 0.375) / (n + 0.25):.4f}) = {2 * quantile:.4f}; "
        f"SD ≈ (max − min) / ξ = ({_g(high)} − {_g(low)}) / {2 * quantile:.4f} = {_g(value)}",
        "Wan et al. 2014 (BMC Med Res Methodol 14:135), scenario C1",
        caution="a range depends on the extremes of skewed data, for which this SD is an approximation",
    )


def combined_mean(n1: float, mean1: float, n2: float, mean2: float) -> Conversion:
    """The mean of two groups combined into one: (N1 M1 + N2 M2) / (N1 + N2) (Handbook Table 6.5.a)."""
    _positive("the first group's size", n1)
    _positive("the second group's size", n2)
    value = (n1 * mean1 + n2 * mean2) / (n1 + n2)
    return Conversion(
        "combined_mean",
        value,
        {"n1": n1, "mean1": mean1, "n2": n2, "mean2": mean2},
        f"M = (N1 M1 + N2 M2) / (N1 + N2) = ({_g(n1)} × {_g(mean1)} + {_g(n2)} × {_g(mean2)}) / {_g(n1 + n2)} "
        f"= {_g(value)}",
        "Cochrane Handbook Table 6.5.a",
    )


def combined_sd(n1: float, mean1: float, sd1: float, n2: float, mean2: float, sd2: float) -> Conversion:
    """The SD of two groups combined into one (Handbook Table 6.5.a):
    √(((N1 − 1) SD1² + (N2 − 1) SD2² + N1 N2 / (N1 + N2) × (M1² + M2² − 2 M1 M2)) / (N1 + N2 − 1))."""
    for name, number in (("the first group's size", n1), ("the second group's size", n2)):
        _positive(name, number)
    for name, number in (("the first group's SD", sd1), ("the second group's SD", sd2)):
        _positive(name, number)
    n = n1 + n2
    if n < 2:
        raise ConversionError("two groups of one participant in all have no SD")
    between = n1 * n2 / n * (mean1**2 + mean2**2 - 2 * mean1 * mean2)
    value = math.sqrt(((n1 - 1) * sd1**2 + (n2 - 1) * sd2**2 + between) / (n - 1))
    return Conversion(
        "combined_sd",
        value,
        {"n1": n1, "mean1": mean1, "sd1": sd1, "n2": n2, "mean2": mean2, "sd2": sd2},
        f"SD = √(((N1−1)SD1² + (N2−1)SD2² + N1N2/(N1+N2) × (M1² + M2² − 2M1M2)) / (N1+N2−1)) = "
        f"√(({_g(n1 - 1)} × {_g(sd1)}² + {_g(n2 - 1)} × {_g(sd2)}² + {_g(between)}) / {_g(n - 1)}) = {_g(value)}",
        "Cochrane Handbook Table 6.5.a",
    )


def sd_of_change(sd_baseline: float, sd_final: float, correlation: float) -> Conversion:
    """The SD of the change from baseline from the SDs at baseline and at the end and their correlation:
    √(SD_b² + SD_f² − 2 × Corr × SD_b × SD_f) (Handbook 6.5.2.8). The correlation is rarely reported: a team states
    the one it assumes (from a study that reports all three, or a sensitivity range)."""
    _positive("the baseline SD", sd_baseline)
    _positive("the final SD", sd_final)
    if not -1 <= correlation <= 1:
        raise ConversionError(f"a correlation is between −1 and 1 (got {_g(correlation)})")
    square = sd_baseline**2 + sd_final**2 - 2 * correlation * sd_baseline * sd_final
    value = math.sqrt(max(square, 0.0))
    if value == 0:
        raise ConversionError("these SDs and correlation leave no variation in the change")
    return Conversion(
        "sd_of_change",
        value,
        {"sd_baseline": sd_baseline, "sd_final": sd_final, "correlation": correlation},
        f"SD_change = √(SD_b² + SD_f² − 2 × Corr × SD_b × SD_f) = √({_g(sd_baseline)}² + {_g(sd_final)}² − 2 × "
        f"{_g(correlation)} × {_g(sd_baseline)} × {_g(sd_final)}) = {_g(value)}",
        "Cochrane Handbook 6.5.2.8",
    )


def _hr_from_log(
    formula: str, log_hr: float, se: float, part: str, inputs: dict[str, float], said: str, source: str
) -> Conversion:
    z = Z_95 / 2
    parts = {"estimate": log_hr, "lower": log_hr - z * se, "upper": log_hr + z * se}
    value = math.exp(parts[part])
    shown = {"estimate": f"HR = exp({log_hr:.4f})", "lower": f"lower = exp({log_hr:.4f} − 1.96 × {se:.4f})"}
    shown["upper"] = f"upper = exp({log_hr:.4f} + 1.96 × {se:.4f})"
    return Conversion(formula, value, inputs, f"{said}; {shown[part]} = {_g(value)}", source)


def hr_from_o_minus_e(o_minus_e: float, variance: float, part: str = "estimate") -> Conversion:
    """A hazard ratio (``part``: its estimate, or its 95% CI's lower or upper limit) from the log-rank observed minus
    expected events and its variance: ln HR = (O − E) / V, SE = 1 / √V (Parmar et al. 1998; Tierney et al. 2007)."""
    _positive("the log-rank variance V", variance)
    log_hr, se = o_minus_e / variance, 1 / math.sqrt(variance)
    said = f"ln HR = (O − E) / V = {_g(o_minus_e)} / {_g(variance)} = {log_hr:.4f}; SE = 1/√V = {se:.4f}"
    inputs = {"o_minus_e": o_minus_e, "variance": variance}
    source = "Tierney et al. 2007 (Trials 8:16), method 4"
    return _hr_from_log(f"hr_{part}_from_o_minus_e", log_hr, se, part, inputs, said, source)


def hr_ci_from_p(estimate: float, p: float, part: str = "lower") -> Conversion:
    """A hazard ratio's 95% CI limit (``part``) from the ratio and the exact two-sided p of its test:
    SE = |ln HR| / Φ⁻¹(1 − p/2) (Tierney et al. 2007; Handbook 6.3.2 for any ratio)."""
    _positive("the hazard ratio", estimate)
    if not 0 < p < 1:
        raise ConversionError(f"an exact p value between 0 and 1 is needed (got {_g(p)})")
    if estimate == 1:
        raise ConversionError("a ratio of 1 gives no standard error from its p value")
    z = _normal_quantile(1 - p / 2)
    log_hr = math.log(estimate)
    se = abs(log_hr) / z
    said = f"z = Φ⁻¹(1 − {_g(p)}/2) = {z:.4f}; SE = |ln HR| / z = {abs(log_hr):.4f} / {z:.4f} = {se:.4f}"
    inputs = {"estimate": estimate, "p": p}
    source = "Tierney et al. 2007 (Trials 8:16); Cochrane Handbook 6.3.2"
    return _hr_from_log(f"hr_{part}_from_p", log_hr, se, part, inputs, said, source)


def _bound(function, part: str):
    def bound(**arguments):
        return function(**arguments, part=part)

    bound.__doc__ = function.__doc__
    return bound


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
    "mean_from_median_iqr": mean_from_median_iqr,
    "sd_from_median_iqr": sd_from_median_iqr,
    "mean_from_median_range": mean_from_median_range,
    "sd_from_median_range": sd_from_median_range,
    "combined_mean": combined_mean,
    "combined_sd": combined_sd,
    "sd_of_change": sd_of_change,
    "hr_from_o_minus_e": _bound(hr_from_o_minus_e, "estimate"),
    "hr_lower_from_o_minus_e": _bound(hr_from_o_minus_e, "lower"),
    "hr_upper_from_o_minus_e": _bound(hr_from_o_minus_e, "upper"),
    "hr_lower_from_p": _bound(hr_ci_from_p, "lower"),
    "hr_upper_from_p": _bound(hr_ci_from_p, "upper"),
}
# only with the team's opt-in (ATLAS_DERIVE_OPT_IN): the Handbook's warnings, and estimates that assume a shape
CAUTIONED = frozenset(
    {
        "sd_from_iqr",
        "sd_from_range",
        "mean_from_median_iqr",
        "sd_from_median_iqr",
        "mean_from_median_range",
        "sd_from_median_range",
    }
)  # only with the team's opt-in (ATLAS_DERIVE_OPT_IN)
