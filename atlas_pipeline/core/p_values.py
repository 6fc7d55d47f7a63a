"""A p value with its comparator: "p = 0.008" is a number to compute with, "p < 0.001" is a threshold — no t value
corresponds to it, and an SD derived from it as if it were exact comes out wrong (2.4 times the paper's in one trial).

The comparator is data, read wherever the p was written: a typed value ("<0.001", "≤ .05"), the quote it rests on
("P value less than 0.001", "p-value ‹ 0·001", "NS") — symbols, their look-alikes and the words papers use. Only a p
every source says is exact (``=`` or a bare number) is one a derivation may use.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Comparator = Literal["=", "<", "≤", ">", "≥"]

_LESS = r"(?:<|‹|＜|﹤|≺|≪|«|\u2039|&lt;)"
_MORE = r"(?:>|›|＞|﹥|≻|≫|»|\u203a|&gt;)"
_SYMBOLS: list[tuple[re.Pattern[str], Comparator]] = [
    (re.compile(rf"(?:≤|⩽|≦|{_LESS}\s*=|=\s*{_LESS})"), "≤"),
    (re.compile(rf"(?:≥|⩾|≧|{_MORE}\s*=|=\s*{_MORE})"), "≥"),
    (re.compile(_LESS), "<"),
    (re.compile(_MORE), ">"),
]
_FEWER = "(?:less|lower|below|fewer|smaller)"
_LARGER = "(?:more|greater|higher|above|larger)"
_WORDS: list[tuple[re.Pattern[str], Comparator]] = [
    (re.compile(rf"\b(?:at most|no (?:more|greater|higher) than|not exceeding|up to|or {_FEWER})\b", re.I), "≤"),
    (re.compile(rf"\b(?:at least|no (?:less|lower|smaller) than|or {_LARGER})\b", re.I), "≥"),
    (re.compile(r"\b(?:less|lower|smaller|fewer) than\b|\bbelow\b|\bunder\b|\binferior to\b", re.I), "<"),
    (re.compile(r"\b(?:greater|more|higher|larger) than\b|\babove\b|\bexceed(?:s|ing|ed)?\b", re.I), ">"),
    (re.compile(r"\b(?:n\.?s\.?|not significant|non-?significant)\b", re.I), ">"),
]
_P_NEAR = re.compile(r"\bp(?:[\s-]*values?)?\b|\bprobability\b|\bsignifican", re.I)
_NUMBER = re.compile(
    r"[-−]?(?:\d+(?:[.,]\d+)?\s*[×x·]\s*10\s*[-−⁻]\s*\d+|\d+(?:[.,·]\d+)?(?:e[-−]?\d+)?|[.,·]\d+)"
)  # 0.008, .008, 0·001, 5·10−4, 3 × 10-4, 1e-4


@dataclass(frozen=True)
class PValue:
    """A p as written: its comparator and its number (None when no number was written, as in "NS")."""

    comparator: Comparator
    value: float | None

    @property
    def exact(self) -> bool:
        return self.comparator == "=" and self.value is not None

    def __str__(self) -> str:
        number = "" if self.value is None else f"{self.value:g}"
        return number if self.comparator == "=" else f"{self.comparator}{number}"


def comparator_in(text: str | None) -> Comparator | None:
    """The comparator a text gives a p (a symbol or the words for one), or None when it gives none."""
    if not text:
        return None
    for pattern, comparator in (*_SYMBOLS, *_WORDS):
        if pattern.search(text):
            return comparator
    return None


def p_comparator_near(quote: str | None, value: float | None = None) -> Comparator | None:
    """The comparator a quote gives its p: next to the number when the number is found in the quote (a quote with
    other numbers — a mean, a CI — beside the p), else anywhere the quote speaks of a p."""
    if not quote:
        return None
    text = " ".join(quote.split())
    if value is not None:
        said: list[Comparator] = []
        for match in _NUMBER.finditer(text):
            if _as_number(match.group(0)) != value:
                continue
            before = text[max(0, match.start() - 40) : match.start()]
            after = text[match.end() : match.end() + 20]
            near = re.split(r"[;,()\[\]]|\band\b", before)[-1]
            trailing = re.split(r"[;,()\[\]]|\band\b", after)[0]
            found = comparator_in(near) or comparator_in(trailing)
            said.append(found or "=")
        bounds = [comparator for comparator in said if comparator != "="]
        if bounds:  # any place the quote gives this number as a threshold makes it one
            return bounds[0]
        if said:
            return "="
    return comparator_in(text) if _P_NEAR.search(text) or re.search(r"\bn\.?s\.?\b", text, re.I) else None


def _as_number(written: str) -> float | None:
    """A number as papers write it: a decimal point or comma or middle dot, a minus sign, ``5·10−4`` or ``3 × 10-4``,
    ``1e-4``."""
    text = written.replace(" ", "").replace("−", "-").replace("⁻", "-")
    power = re.fullmatch(r"(-?[\d.,·]+)[×x·]10(-?\d+)", text)
    try:
        if power:
            return float(power.group(1).replace("·", ".").replace(",", ".")) * 10 ** int(power.group(2))
        return float(text.replace("·", ".").replace(",", "."))
    except ValueError:
        return None


def parse_p(written: object) -> PValue | None:
    """A p typed or given as a value: ``0.008``, ``=0.008``, ``<0.001``, ``p < .001``, ``less than 0.001``, ``NS``."""
    if written is None or isinstance(written, bool):
        return None
    if isinstance(written, int | float):
        return PValue("=", float(written))
    text = " ".join(str(written).split())
    if not text:
        return None
    comparator = comparator_in(text) or "="
    number = _NUMBER.search(re.sub(r"(?i)\bp(?:[\s-]*values?)?\b", " ", text))
    if number is None:
        return PValue(comparator, None) if comparator != "=" else None
    value = _as_number(number.group(0))
    if value is None:
        return None
    return PValue(comparator, value)


def exactness(value: object, quotes: list[str | None]) -> str | None:
    """Why a p cannot be used as exact — a threshold in its value or in any quote it rests on — or None when every
    source gives it as an exact number."""
    parsed = parse_p(value)
    if parsed is None:
        return f"{value!r} is not a p value"
    if not parsed.exact:
        return f"the p is written as a threshold ({parsed}), not an exact value: no t value corresponds to it"
    for quote in quotes:
        said = p_comparator_near(quote, parsed.value)
        if said is not None and said != "=":
            shown = " ".join((quote or "").split())[:80]
            return f"the quote gives the p as a threshold ({said} in {shown!r}), not an exact value"
    return None
