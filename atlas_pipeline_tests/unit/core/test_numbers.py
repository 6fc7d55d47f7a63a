"""Numbers as a reviewer writes them: one reading for the page, the grid, a workbook and a model's answer."""

import pytest

from atlas_pipeline.core.numbers import NotANumber, number_or_none, read_number
from atlas_pipeline.core.plausibility import as_number


@pytest.mark.parametrize(
    ("written", "number"),
    [
        ("12", 12),
        (" 12 ", 12),
        ("-0", 0),
        ("+4", 4),
        ("−2.5", -2.5),  # the minus sign a word processor writes
        ("1,234,567", 1234567),
        ("1,234.5", 1234.5),
        ("12.", 12.0),
        ("+.5", 0.5),
        ("1.5e-3", 0.0015),
        ("9" * 29, int("9" * 29)),  # exact: the plausibility check names it
    ],
)
def test_what_a_reviewer_writes_is_read_exactly(written, number):
    value = read_number(written)
    assert value == number and type(value) is type(number)


@pytest.mark.parametrize(
    ("written", "reason"),
    [
        ("1_000", "without underscores"),
        ("١٢٣", "with the digits 0–9"),  # Arabic-Indic
        ("１２", "with the digits 0–9"),  # full-width
        ("1,5", "a decimal comma is not read"),
        ("12 500", "is not a number"),
        ("nan", "is not a number"),
        ("inf", "is not a number"),
        ("0x10", "is not a number"),
        ("e5", "is not a number"),
        ("-e2", "is not a number"),
        ("45%", "is not a number"),
        ("", "empty"),
    ],
)
def test_other_forms_are_refused_with_the_reason(written, reason):
    with pytest.raises(NotANumber, match=reason):
        read_number(written)
    assert number_or_none(written) is None
    assert as_number(written) is None  # a stored value in such a form is no number anywhere


def test_a_number_past_a_float_is_infinite_for_the_plausibility_check_to_name():
    assert as_number("1e400") == float("inf") and as_number(10**400) == float("inf")
