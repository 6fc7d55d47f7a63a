"""The Cochrane Handbook's worked conversions (chapter 6), and the refusals that keep a wrong number out."""

import math
import statistics

import pytest

from atlas_pipeline.core.conversions import (
    CAUTIONED,
    ConversionError,
    combined_mean,
    combined_sd,
    events_from_percentage,
    hr_ci_from_p,
    hr_from_o_minus_e,
    log_ratio_from_ci,
    mean_from_median_iqr,
    mean_from_median_range,
    n_from_arms,
    sd_from_ci,
    sd_from_ci_of_difference,
    sd_from_iqr,
    sd_from_median_iqr,
    sd_from_median_range,
    sd_from_p,
    sd_from_range,
    sd_from_se,
    sd_from_t,
    sd_of_change,
    se_from_ci,
    se_of_difference_from_p,
    t_multiplier,
)


def test_sd_from_the_standard_error_of_a_group_mean():
    conversion = sd_from_se(se=2.0, n=25)  # SD = SE × √n
    assert conversion.value == pytest.approx(10.0)
    assert conversion.arithmetic == "SD = SE × √n = 2 × √25 = 10"
    assert conversion.formula == "sd_from_se" and conversion.inputs == {"se": 2.0, "n": 25}


def test_sd_from_a_ci_of_a_mean_large_and_small_groups():
    # large group: SD = √n × (upper − lower) / 3.92
    large = sd_from_ci(lower=10.0, upper=13.92, n=100)
    assert large.value == pytest.approx(10.0)
    assert "/ 3.92" in large.arithmetic
    # the Handbook's small-sample example: n = 25 uses 2 × t(24 df) = 2 × 2.0639 = 4.128 instead of 3.92
    assert round(t_multiplier(24), 4) == 2.0639
    small = sd_from_ci(lower=1.2, upper=6.4, n=25)
    assert small.value == pytest.approx(math.sqrt(25) * 5.2 / (2 * t_multiplier(24)))
    assert "2 × t(24 df) = 2 × 2.0639" in small.arithmetic and small.value == pytest.approx(6.299, abs=1e-3)


def test_the_handbook_mean_difference_example_from_its_p_value():
    # Handbook 6.5.2.3: MD 3.8, exact P = 0.008, groups of 25 and 22 → t(45 df) = 2.78, SE = 3.8 / 2.78 = 1.37
    se = se_of_difference_from_p(difference=3.8, p=0.008, n1=25, n2=22)
    assert round(se.value, 2) == 1.37 and "2.7755" in se.arithmetic
    sd = sd_from_p(p=0.008, difference=3.8, n1=25, n2=22)
    assert sd.value == pytest.approx(se.value / math.sqrt(1 / 25 + 1 / 22))
    assert round(sd.value, 2) == 4.68
    assert sd.arithmetic.endswith("= 4.683")


def test_the_handbook_mean_difference_example_from_its_ci_and_t():
    # the same trial's 95% CI of the difference, small groups: SE = width / (2 × t(45 df)) with t = 2.0141
    assert round(t_multiplier(45), 4) == 2.0141
    sd = sd_from_ci_of_difference(lower=1.2, upper=6.4, n1=25, n2=22)
    se = 5.2 / (2 * t_multiplier(45))
    assert sd.value == pytest.approx(se / math.sqrt(1 / 25 + 1 / 22))
    # large trials: 3.92
    big = sd_from_ci_of_difference(lower=-1.0, upper=2.92, n1=100, n2=100)
    assert big.value == pytest.approx(1.0 / math.sqrt(0.02)) and "/ 3.92" in big.arithmetic
    t = sd_from_t(t=2.78, difference=3.8, n1=25, n2=22)
    assert t.value == pytest.approx((3.8 / 2.78) / math.sqrt(1 / 25 + 1 / 22))


def test_events_from_a_percentage_of_a_known_group():
    # a corpus trial (PMC1475568): 42% of 59 intervention patients, 61% of 64 controls were hospitalised or died
    assert events_from_percentage(42, 59).value == 25
    assert events_from_percentage(61, 64).value == 39
    assert events_from_percentage(33.3, 30).value == 10
    assert (
        events_from_percentage(42, 59).arithmetic
        == "events = round(% × n / 100) = round(42 × 59 / 100) = round(24.78) = 25"
    )
    # no whole number of events out of 59 is 42.9% (25 → 42.37, 26 → 44.07): a percentage of another denominator
    with pytest.raises(ConversionError, match="another denominator"):
        events_from_percentage(42.9, 59)
    with pytest.raises(ConversionError, match="between 0 and 100"):
        events_from_percentage(142, 59)


def test_a_ratio_on_the_log_scale_with_its_standard_error():
    conversion = log_ratio_from_ci(estimate=0.69, lower=0.40, upper=1.19)  # PMC1475568's crude IRR
    assert conversion.value == pytest.approx(math.log(0.69))
    se = float(conversion.notes[0].removeprefix("se="))
    assert se == pytest.approx((math.log(1.19) - math.log(0.40)) / 3.92)
    with pytest.raises(ConversionError, match="outside its interval"):
        log_ratio_from_ci(estimate=1.5, lower=0.4, upper=1.19)
    with pytest.raises(ConversionError, match="greater than 0"):
        log_ratio_from_ci(estimate=0.0, lower=-0.1, upper=1.0)


def test_refusals_are_said_in_words():
    with pytest.raises(ConversionError, match=r"upper limit .* must be above its lower"):
        sd_from_ci(lower=5, upper=2, n=30)
    with pytest.raises(ConversionError, match="exact p value"):
        se_of_difference_from_p(difference=1.0, p=0.0, n1=10, n2=10)
    with pytest.raises(ConversionError, match="difference of 0"):
        se_of_difference_from_p(difference=0.0, p=0.5, n1=10, n2=10)
    assert n_from_arms(59, 64).value == 123


def test_conversions_the_handbook_warns_against_carry_their_caution():
    assert {"sd_from_iqr", "sd_from_range"} < CAUTIONED
    assert {"mean_from_median_iqr", "sd_from_median_iqr", "mean_from_median_range", "sd_from_median_range"} < CAUTIONED
    assert sd_from_iqr(10, 23.5).value == pytest.approx(10.0) and "skewed" in sd_from_iqr(10, 23.5).caution
    assert sd_from_range(0, 40).value == 10 and "advises against" in sd_from_range(0, 40).caution
    assert sd_from_se(1, 4).caution == ""


def test_the_small_sample_rule_is_per_group():
    # Handbook 6.5.2.3: t in place of 1.96 when the groups are small, "say fewer than 60 participants in each group"
    small = sd_from_ci_of_difference(lower=1.2, upper=6.4, n1=50, n2=40)
    assert "t(88 df)" in small.arithmetic
    mixed = sd_from_ci_of_difference(lower=1.2, upper=6.4, n1=100, n2=30)  # 130 in all, one group under 60
    assert "/ 3.92" in mixed.arithmetic and "t(" not in mixed.arithmetic
    assert se_from_ci(1.2, 6.4) == pytest.approx(5.2 / 3.92)
    assert se_from_ci(1.2, 6.4, 95, 25, 22) == pytest.approx(5.2 / (2 * t_multiplier(45)))
    # a CI of another level says so, and is as wide as its level says
    ninety = sd_from_ci(lower=10.0, upper=13.29, n=100, level=90)
    assert ninety.value == pytest.approx(10 * 3.29 / (2 * 1.644854), rel=1e-5) and "90% CI" in ninety.arithmetic


def test_mean_and_sd_from_a_median_with_quartiles_or_range():
    # Wan et al. 2014: SD ≈ IQR / (2 Φ⁻¹((0.75n − 0.125)/(n + 0.25))) — IQR / 1.349 for a large sample of a normal
    assert sd_from_median_iqr(q1=10, q3=20, n=100_000).value == pytest.approx(10 / 1.34898, rel=1e-3)
    small = sd_from_median_iqr(q1=10, q3=20, n=20)  # Φ⁻¹((15 − 0.125)/20.25) = Φ⁻¹(0.734568) = 0.62669
    assert small.value == pytest.approx(10 / (2 * 0.62669), rel=1e-4) and "Wan et al. 2014" in small.source
    # range: (b − a) / (2 Φ⁻¹((n − 0.375)/(n + 0.25))); n = 50: Φ⁻¹(0.98756) = 2.2433
    assert sd_from_median_range(low=0, high=40, n=50).value == pytest.approx(40 / (2 * 2.2433), rel=1e-4)
    # Luo et al. 2018: mean ≈ w (q1 + q3)/2 + (1 − w) m, w = 0.7 + 0.39/n; n = 100: w = 0.7039
    assert mean_from_median_iqr(q1=1, median=2, q3=4, n=100).value == pytest.approx(0.7039 * 2.5 + 0.2961 * 2)
    # range: w = 4 / (4 + n^0.75); n = 16: w = 4 / (4 + 8) = 1/3
    assert mean_from_median_range(low=0, median=3, high=12, n=16).value == pytest.approx(6 / 3 + 3 * 2 / 3)
    with pytest.raises(ConversionError, match="outside its quartiles"):
        mean_from_median_iqr(q1=5, median=2, q3=8, n=30)


def test_two_groups_combined_as_the_handbook_table_6_5_a_says():
    first, second = [12.0, 15.0, 9.0, 11.0, 14.0], [20.0, 18.0, 25.0, 22.0]
    both = first + second
    mean = combined_mean(len(first), statistics.mean(first), len(second), statistics.mean(second))
    assert mean.value == pytest.approx(statistics.mean(both))
    sd = combined_sd(
        len(first), statistics.mean(first), statistics.stdev(first),
        len(second), statistics.mean(second), statistics.stdev(second),
    )  # fmt: skip
    assert sd.value == pytest.approx(statistics.stdev(both))  # the SD of every participant, pooled by hand


def test_the_sd_of_a_change_from_baseline_with_its_correlation():
    baseline, final = [110.0, 121.0, 98.0, 130.0, 115.0, 104.0], [104.0, 118.0, 99.0, 121.0, 108.0, 100.0]
    change = [f - b for b, f in zip(baseline, final, strict=True)]
    correlation = statistics.correlation(baseline, final)
    sd = sd_of_change(statistics.stdev(baseline), statistics.stdev(final), correlation)
    assert sd.value == pytest.approx(statistics.stdev(change))  # Handbook 6.5.2.8, checked on the raw changes
    with pytest.raises(ConversionError, match="between −1 and 1"):
        sd_of_change(10, 10, 1.2)


def test_a_hazard_ratio_from_log_rank_o_minus_e_and_from_its_p():
    # Tierney et al. 2007: ln HR = (O − E)/V, SE = 1/√V; O − E = −8.5, V = 20 → HR 0.654 [0.4218, 1.0134]
    assert hr_from_o_minus_e(-8.5, 20).value == pytest.approx(math.exp(-0.425))
    assert hr_from_o_minus_e(-8.5, 20, part="lower").value == pytest.approx(0.4218, abs=1e-4)
    assert hr_from_o_minus_e(-8.5, 20, part="upper").value == pytest.approx(1.0133, abs=1e-4)
    # from the HR and its exact p: the CI found gives back the same p
    lower, upper = hr_ci_from_p(0.8, 0.04, "lower").value, hr_ci_from_p(0.8, 0.04, "upper").value
    se = (math.log(upper) - math.log(lower)) / 3.92
    z = abs(math.log(0.8)) / se
    assert 2 * (1 - statistics.NormalDist().cdf(z)) == pytest.approx(0.04, rel=1e-3)
