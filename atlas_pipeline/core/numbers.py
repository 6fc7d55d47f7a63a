"""Numbers as a reviewer writes them, read one way everywhere a person's number enters (the page, the grid, a
workbook) and wherever a stored number is read back.

Python's ``float`` is far more generous than a reviewer means to be: ``1_000``, Arabic-Indic or full-width digits,
``nan``, ``infinity`` all parse. A value that enters the decision log is written with ASCII digits 0–9, an optional
sign, a decimal *point*, a comma only between groups of three digits (``1,234.5``) and an optional exponent
(``1e-4``); anything else is refused with the reason, never guessed (``1,5`` is not read as 15 or as 1.5).
"""

from __future__ import annotations

import re
import unicodedata

from atlas_pipeline.core.errors import AtlasError

_NUMBER = re.compile(r"[+-]?(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d{1,4})?")
_MINUS = str.maketrans({"−": "-", "–": "-"})  # the minus sign and the en dash a word processor puts for it


class NotANumber(AtlasError, ValueError):
    """A text that is not a number as a reviewer writes one; the message says what is wrong with it."""


def read_number(text: str) -> int | float:
    """The number ``text`` writes — an ``int`` when it has no decimal point or exponent (exact at any length),
    else a ``float`` (which may be ``inf`` for a value past a float's range: the caller's plausibility check
    names it) — or ``NotANumber`` with the reason."""
    written = text.strip().translate(_MINUS)
    if not written:
        raise NotANumber("an empty value is not a number")
    if any(not char.isascii() and unicodedata.digit(char, None) is not None for char in written):
        raise NotANumber(f"{text!r}: write numbers with the digits 0–9")
    if "_" in written:
        raise NotANumber(f"{text!r}: write a number without underscores (1000 or 1,000)")
    if not any(char.isdigit() for char in written) or not _NUMBER.fullmatch(written):
        if re.fullmatch(r"[+-]?\d+,\d+", written):
            raise NotANumber(
                f"{text!r}: a decimal comma is not read — write a decimal point (a comma only separates thousands: "
                "1,000)"
            )
        raise NotANumber(f"{text!r} is not a number")
    plain = written.replace(",", "")
    if re.fullmatch(r"[+-]?\d+", plain):
        return int(plain)
    return float(plain)


def number_or_none(text: str) -> int | float | None:
    """``read_number``, or None for a text that is not a number."""
    try:
        return read_number(text)
    except ValueError:  # NotANumber, and anything float() would still refuse
        return None
