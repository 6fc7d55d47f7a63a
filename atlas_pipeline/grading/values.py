"""Value ↔ quote: is the extracted value written in (supported by) its own quote?

A quote can be in the document and still not say the value: ``31`` with the quote "30 were given water", ``placebo``
with a quote about the intervention. The rules:

- a number must be one of the numbers written in the quote — signs, decimal points or commas, thousands separators
  (``1,234``, ``1 234``), both ends of ranges (``0.60–0.94``), percentages (``45%`` gives 45);
- a text (string, date, list item) must have its words in the quote (small slips such as ``randomised`` /
  ``randomized`` pass, words of opposite meaning do not);
- an enum value must be supported by its label's words, or by one of the synonyms the template agrees for it.
"""

from __future__ import annotations

import contextlib
import math
import re

from rapidfuzz.distance import Levenshtein

from atlas_pipeline.grading.quotes import opposed
from atlas_pipeline.grading.text import NUMBER, WORD, tokenize_once

STOPWORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "of",
        "and",
        "or",
        "in",
        "on",
        "at",
        "to",
        "for",
        "with",
        "by",
        "vs",
        "versus",
        "from",
        "as",
        "per",
    ]
)
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_THIN_SPACE = re.compile(r"[ \u00a0\u2009\u202f]")


def _as_numbers(raw: str) -> list[float]:
    """The values a number token can stand for (``1,234`` → 1234; ``0,5`` → 0.5)."""
    values: list[float] = []
    if "," in raw:
        if _THOUSANDS.fullmatch(raw):
            values.append(float(raw.replace(",", "")))
        if raw.count(",") == 1 and "." not in raw:
            values.append(float(raw.replace(",", ".")))
        return values
    with contextlib.suppress(ValueError):
        values.append(float(raw))
    return values


def numbers_in(text: str) -> list[float]:
    """Every number written in ``text``, as the token view reads it (signs and number boundaries kept)."""
    view = tokenize_once(text)
    tokens = view.tokens
    found: list[float] = []
    for index, token in enumerate(tokens):
        if token.kind != NUMBER:
            continue
        found.extend(_as_numbers(token.text))
        following = tokens[index + 1] if index + 1 < len(tokens) else None
        if (  # thousands written with a (thin) space: "1 234"
            following is not None
            and following.kind == NUMBER
            and re.fullmatch(r"\d{3}", following.text)
            and re.fullmatch(r"-?\d{1,3}", token.text)
            and _THIN_SPACE.fullmatch(view.original[token.end : following.start])
        ):
            found.extend(_as_numbers(token.text + following.text))
    return found


def number_in_quote(value: float, quote: str) -> bool:
    return any(math.isclose(value, number, rel_tol=1e-9, abs_tol=1e-9) for number in numbers_in(quote))


def _content_tokens(text: str) -> list[tuple[str, str]]:
    return [
        (t.kind, t.text) for t in tokenize_once(text).tokens if t.kind in (WORD, NUMBER) and t.text not in STOPWORDS
    ]


def _word_supported(word: str, quote_words: set[str]) -> bool:
    if word in quote_words:
        return True
    for candidate in quote_words:
        if opposed(word, candidate):
            continue
        longest = max(len(word), len(candidate))
        slip = longest >= 5 and not any(c.isdigit() for c in word + candidate)
        if slip and Levenshtein.distance(word, candidate) / longest <= 0.2:
            return True
    return False


def text_supported(value: str, quote: str) -> list[str]:
    """The words (and numbers) of ``value`` that its quote does not have; empty when the quote supports it."""
    quote_tokens = _content_tokens(quote)
    quote_words = {text for kind, text in quote_tokens if kind == WORD}
    quote_numbers = numbers_in(quote)
    missing = []
    for kind, text in _content_tokens(value):
        if kind == NUMBER:
            numbers = _as_numbers(text)
            if not any(math.isclose(n, q, abs_tol=1e-9) for n in numbers for q in quote_numbers):
                missing.append(text)
        elif not _word_supported(text, quote_words):
            missing.append(text)
    return missing


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
        missing = [problem for problem in problems if problem]
        return "; ".join(missing)
    text = str(value)
    if field_type == "enum":
        options = [text, *((synonyms or {}).get(text, []))]
        if any(not text_supported(option, quote) for option in options):
            return ""
        agreed = f" (nor its agreed synonyms: {', '.join(options[1:])})" if len(options) > 1 else ""
        return f"value not in its quote: the quote does not say {text!r}{agreed}"
    if field_type == "date":
        years = re.findall(r"\b(1[89]\d\d|20\d\d)\b", text)
        if years and all(year in quote for year in years):
            return ""
    missing = text_supported(text, quote)
    if not missing:
        return ""
    return f"value not in its quote: {', '.join(repr(word) for word in missing[:5])} not in the quote"
