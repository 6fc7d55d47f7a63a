"""Value ↔ quote: is the extracted value written in (supported by) its own quote?

A quote can be in the document and still not say the value: ``31`` with the quote "30 were given water", ``placebo``
with a quote about the intervention. The rules:

- a number must be one of the numbers written in the quote — signs, decimal points or commas, thousands separators
  (``1,234``, ``1 234``: then one number, not two), both ends of ranges (``0.60–0.94``), lists (``1,2,3``),
  percentages (``45%`` gives 45), powers of ten (``1.5 × 10⁹``);
- a text (string, list item) must have its words, numbers and ``+``/``−`` marks in the quote — the same words, or
  their singular or plural (``randomised``/``randomized`` is a different spelling, so a person looks) — and not under
  a negation the value leaves out ("significant difference" is not supported by "no significant difference");
- a date must have its year, month and day in the quote, as whole tokens;
- an enum value must be supported by its label's words, or by one of the synonyms the template agrees for it.
"""

from __future__ import annotations

import contextlib
import math
import re
from datetime import date

from atlas_pipeline.grading.quotes import is_negation
from atlas_pipeline.grading.text import NUMBER, SYMBOL, WORD, Token, tokenize_once

_STOPWORD_TEXT = "a an the of and or in on at to for with by vs versus from as per"
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_GROUP_SPACE = re.compile(r"[ \u00a0\u2009\u202f]")
_MONTH_TEXT = "january february march april may june july august september october november december"
_MONTHS = _MONTH_TEXT.split()


def _as_numbers(raw: str) -> list[float]:
    """The values a number token can stand for: ``1,234`` → 1234, ``0,5`` → 0.5, ``1,2,3`` → 1, 2, 3."""
    if "," in raw:
        if _THOUSANDS.fullmatch(raw):
            return [float(raw.replace(",", ""))]
        parts = raw.split(",")
        if len(parts) == 2 and "." not in raw and len(parts[1]) != 3:
            return [float(raw.replace(",", "."))]  # a decimal comma (0,5)
        values = []
        for part in parts:  # a list written without spaces: 1,2,3 or 0.01,0.04
            with contextlib.suppress(ValueError):
                values.append(float(part))
        return values
    with contextlib.suppress(ValueError):
        return [float(raw)]
    return []


def _grouped(view, tokens: tuple[Token, ...], index: int) -> bool:
    """Is token ``index`` a number whose thousands go on in the next token (``12 500``)?"""
    if index + 1 >= len(tokens):
        return False
    token, following = tokens[index], tokens[index + 1]
    return (
        token.kind == NUMBER
        and following.kind == NUMBER
        and re.fullmatch(r"-?\d{1,3}", token.text) is not None
        and re.fullmatch(r"\d{3}(?:\.\d+)?", following.text) is not None
        and _GROUP_SPACE.fullmatch(view.original[token.end : following.start]) is not None
    )


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text``, as the token view reads it (signs and number boundaries kept)."""
    view = tokenize_once(text)
    tokens = view.tokens
    found: list[float] = []
    skip = False
    for index, token in enumerate(tokens):
        if skip:
            skip = False
            continue
        if token.kind != NUMBER or token.text.startswith("^"):
            continue
        if _grouped(view, tokens, index):  # "12 500" is twelve thousand five hundred, not 12 and 500
            found.extend(_as_numbers(token.text + tokens[index + 1].text))
            skip = True
            continue
        values = _as_numbers(token.text)
        found.extend(values)
        power = tokens[index + 3] if index + 3 < len(tokens) else None
        if (  # 1.5 × 10⁹ (or 10^9)
            len(values) == 1
            and power is not None
            and tokens[index + 1].text in ("×", "x")
            and tokens[index + 2].text == "10"
            and power.text.startswith("^")
        ):
            with contextlib.suppress(ValueError, OverflowError):
                found.append(values[0] * 10 ** int(power.text[1:]))
    return found


def number_in_quote(value: float, quote: str) -> bool:
    return any(math.isclose(value, number, rel_tol=1e-9, abs_tol=1e-9) for number in numbers_in(quote))


def _content(text: str) -> list[Token]:
    """The tokens that carry a text's meaning: words (stopwords left out), numbers, and ``+``/``−`` marks."""
    return [
        token
        for token in tokenize_once(text).tokens
        if (token.kind == WORD and token.text not in STOPWORDS)
        or token.kind == NUMBER
        or (token.kind == SYMBOL and token.text in "+-")
    ]


def _same_word(word: str, other: str) -> bool:
    """The same word, or its singular/plural (``arm``/``arms``, ``study``/``studies``)."""
    if word == other:
        return True
    short, long = sorted((word, other), key=len)
    return len(short) >= 3 and long in (short + "s", short + "es", short[:-1] + "ies")


def text_supported(value: str, quote: str) -> list[str]:
    """The words (and numbers, and +/− marks) of ``value`` that its quote does not have, or has only under a
    negation the value leaves out; empty when the quote supports it."""
    quote_tokens = _content(quote)
    all_quote = list(tokenize_once(quote).tokens)
    quote_numbers = numbers_in(quote)
    value_tokens = _content(value)
    value_negated = any(is_negation(token.text) for token in tokenize_once(value).tokens)
    missing = []
    for token in value_tokens:
        if token.kind == NUMBER:
            numbers = _as_numbers(token.text)
            if not any(math.isclose(n, q, abs_tol=1e-9) for n in numbers for q in quote_numbers):
                missing.append(token.text)
        elif token.kind == SYMBOL:
            if not any(other.kind == SYMBOL and other.text == token.text for other in quote_tokens):
                missing.append(token.text)
        elif not any(other.kind == WORD and _same_word(token.text, other.text) for other in quote_tokens):
            missing.append(token.text)
    if not missing and not value_negated and value_tokens:
        first = next((i for i, t in enumerate(all_quote) if t.text == value_tokens[0].text), None)
        if first is not None and any(is_negation(t.text) for t in all_quote[max(0, first - 3) : first]):
            missing.append(f"(negated in the quote: {' '.join(t.text for t in all_quote[max(0, first - 3) : first])})")
    return missing


def _date_supported(value: str, quote: str) -> bool:
    try:
        when = date.fromisoformat(value[:10])
    except ValueError:
        return False
    words = {token.text for token in tokenize_once(quote).tokens}
    month_name = _MONTHS[when.month - 1]
    has_year = str(when.year) in words
    has_month = (
        month_name in words or month_name[:3] in words or f"{when.month:02d}" in words or str(when.month) in words
    )
    has_day = len(value) < 10 or str(when.day) in words or f"{when.day:02d}" in words
    return has_year and has_month and has_day


def value_support(value: object, quote: str, field_type: str, synonyms: dict[str, list[str]] | None = None) -> str:
    """Why ``quote`` does not support ``value`` (empty when it does). Booleans are not checked: a quote says yes or
    no in too many ways."""
    if isinstance(value, bool) or field_type == "boolean":
        return ""
    if isinstance(value, int | float):
        if number_in_quote(float(value), quote):
            return ""
        return f"value not in its quote: {value:g} is not written in the quote"
    if isinstance(value, list):
        problems = [value_support(item, quote, "string") for item in value]
        return "; ".join(problem for problem in problems if problem)
    text = str(value)
    if field_type == "enum":
        options = [text, *((synonyms or {}).get(text, []))]
        if any(not text_supported(option, quote) for option in options):
            return ""
        agreed = f" (nor its agreed synonyms: {', '.join(options[1:])})" if len(options) > 1 else ""
        return f"value not in its quote: the quote does not say {text!r}{agreed}"
    if field_type == "date" and re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", text):
        return "" if _date_supported(text, quote) else f"value not in its quote: the date {text} is not in the quote"
    missing = text_supported(text, quote)
    if not missing:
        return ""
    return f"value not in its quote: {', '.join(repr(word) for word in missing[:5])} not in the quote"
