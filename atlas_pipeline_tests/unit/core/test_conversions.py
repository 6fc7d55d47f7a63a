"""The Cochrane Handbook's worked conversions (chapter 6), and the refusals that keep a wrong number out."""

import math

import pytest

from atlas_pipeline.core.conversions import (
    CAUTIONED,
    ConversionError,
    events_from_percentage,
    log_ratio_from_ci,
    n_from_arms,
    sd_from_ci,
    sd_from_ci_of_difference,
    sd_from_iqr,
    sd_from_p,
    sd_from_range,
    sd_from_se,
    sd_from_t,
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
    assert {"sd_from_iqr", "sd_from_range"} == CAUTIONED
    assert sd_from_iqr(10, 23.5).value == pytest.approx(10.0) and "skewed" in sd_from_iqr(10, 23.5).caution
    assert sd_from_range(0, 40).value == 10 and "advises against" in sd_from_range(0, 40).caution
    assert sd_from_se(1, 4).caution == ""
