"""Quote validation: is a quote the LLM gave really in the document, where, and how sure are we?

``match_quote(quote, scope)`` grades a quote against the search scope (markdown + table text):

1. **exact** — the normalised quote is contained in the normalised scope: confidence 1.0.
2. **segmented** — the quote is there verbatim but interrupted (a page header/footer or a figure between its parts):
   2 parts → 0.95, 3 parts → 0.90. Parts are long, in order, close together, and never split inside a number.
3. **fuzzy** — the best rapidfuzz alignment within ``ceil(5% of the quote)`` edits: 1 − distance/length. Typography,
   hyphenation, ligatures and OCR slips are absorbed — digits never are: the numbers of the quote must equal the
   numbers of the matched source text, so a one-digit change makes the quote unverified.

Anything else is unverified (0.0): a person has to look. (Matching a table row whose cells came out in another order
as a bag of tokens was tried and dropped: on the corpus it accepted ~2% of digit-altered quotes and found no extra
genuine one.)

Normalisation (both sides): NFKC, lower case, unicode minus signs and dashes unified to ``-``, middle-dot decimals
to ``.``; then only ``a-z``, ``0-9`` and CJK are kept, plus ``-`` before a digit (a minus sign) and ``.`` between
digits (a decimal point), so ``-1.13`` never matches ``1.13`` or ``11.3``.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

VERIFIED = 0.95
APPROXIMATE = 0.80
MAX_EDIT_SHARE = 0.05
MIN_SEGMENT = 12  # normalised characters: shorter parts match by chance
MAX_SEGMENTS = 3
MAX_GAP = 4000  # normalised characters between two parts of a segmented quote
MIN_GAP = 8  # a shorter gap is a slip inside the quote, left to the fuzzy match

_DASHES = dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d", "-")
_DECIMAL_DOTS = dict.fromkeys("\u00b7\u2219\u22c5\u2027", ".")
_DIGITS = re.compile(r"\d+")


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    """How well a quote is grounded: confidence 0–1, its tier, and its span in the scope (end-exclusive)."""

    confidence: float
    tier: str
    start: int | None
    end: int | None
    method: str  # exact | segmented | fuzzy | none

    @property
    def found(self) -> bool:
        return self.start is not None


def tier_for(confidence: float) -> str:
    if confidence >= VERIFIED:
        return "verified"
    if confidence >= APPROXIMATE:
        return "approximate"
    return "unverified"


def _is_cjk(char: str) -> bool:
    return "\u3040" <= char <= "\u30ff" or "\u3400" <= char <= "\u9fff" or "\uac00" <= char <= "\ud7af"


@lru_cache(maxsize=4096)
def _fold(char: str) -> str:
    """One source character → its normalised characters (before the context rules for ``-`` and ``.``)."""
    char = _DASHES.get(char, _DECIMAL_DOTS.get(char, char))
    folded = unicodedata.normalize("NFKC", char).lower()
    return "".join(c for c in folded if ("a" <= c <= "z") or (c.isdigit() and c.isascii()) or c in "-." or _is_cjk(c))


@dataclass(frozen=True)
class NormalizedText:
    text: str
    offsets: tuple[int, ...]  # offsets[i] = index in the original of normalised character i


@lru_cache(maxsize=64)
def normalize(original: str) -> NormalizedText:
    """The normalised text and, for each of its characters, where it came from (cached: scopes are reused)."""
    chars: list[str] = []
    offsets: list[int] = []
    for index, char in enumerate(original):
        for folded in _fold(char):
            chars.append(folded)
            offsets.append(index)
    # context rules: keep "-" only as a minus sign (before a digit), "." only as a decimal point (digit.digit)
    kept_chars: list[str] = []
    kept_offsets: list[int] = []
    count = len(chars)
    for position, char in enumerate(chars):
        if char == "-":
            if position + 1 >= count or not chars[position + 1].isdigit():
                continue
        elif char == ".":
            previous_digit = bool(kept_chars) and kept_chars[-1].isdigit()
            if not previous_digit or position + 1 >= count or not chars[position + 1].isdigit():
                continue
        kept_chars.append(char)
        kept_offsets.append(offsets[position])
    return NormalizedText("".join(kept_chars), tuple(kept_offsets))


def _span(norm: NormalizedText, start: int, end: int, original: str) -> tuple[int, int]:
    """Original-text span of normalised ``[start, end)``."""
    begin = norm.offsets[start]
    last = norm.offsets[end - 1]
    # extend over the rest of a folded character (a ligature maps one original char to several normalised ones)
    return begin, min(last + 1, len(original))


def _result(confidence: float, method: str, span: tuple[int, int] | None) -> QuoteMatch:
    confidence = round(max(0.0, min(1.0, confidence)), 4)
    if span is None:
        return QuoteMatch(confidence, tier_for(confidence), None, None, method)
    return QuoteMatch(confidence, tier_for(confidence), span[0], span[1], method)


def _longest_prefix_at(needle: str, haystack: str, start: int, stop: int) -> tuple[int, int]:
    """(length, position) of the longest prefix of ``needle`` found in ``haystack[start:stop]``.

    Presence of a prefix is monotone in its length, so a binary search over lengths needs O(log n) finds.
    """
    low, high, found_at = 0, len(needle), -1
    while low < high:
        middle = (low + high + 1) // 2
        position = haystack.find(needle[:middle], start, stop)
        if position >= 0:
            low, found_at = middle, position
        else:
            high = middle - 1
    return low, found_at


def _segmented(quote: NormalizedText, scope: str) -> list[tuple[int, int]] | None:
    """Cover the quote by up to MAX_SEGMENTS exact parts found in order in ``scope``; their spans, or None.

    A part may only end where the original quote had a space or punctuation (a word boundary, so never inside a
    number), and every part is at least MIN_SEGMENT long: an interruption is a page break, not a coincidence.
    """
    needle = quote.text
    boundaries = {cut for cut in range(1, len(needle)) if quote.offsets[cut] - quote.offsets[cut - 1] > 1}
    parts: list[tuple[int, int]] = []
    done, cursor, stop = 0, 0, len(scope)
    while done < len(needle):
        if len(parts) == MAX_SEGMENTS:
            return None
        length, position = _longest_prefix_at(needle[done:], scope, cursor, stop)
        if done + length < len(needle):
            cuts = [cut - done for cut in boundaries if done < cut <= done + length]
            if not cuts:
                return None
            length = max(cuts)
            position = scope.find(needle[done : done + length], cursor, stop)
        if length < MIN_SEGMENT:
            return None
        parts.append((position, position + length))
        done += length
        cursor, stop = position + length + MIN_GAP, min(len(scope), position + length + MAX_GAP)
    return parts


def _numbers(text: str) -> list[str]:
    return _DIGITS.findall(text)


def _fuzzy(quote: str, scope: str) -> tuple[float, int, int] | None:
    """Best alignment of ``quote`` in ``scope`` within the edit budget, with identical numbers; or None."""
    budget = math.ceil(MAX_EDIT_SHARE * len(quote))
    alignment = fuzz.partial_ratio_alignment(quote, scope, score_cutoff=100 * (1 - 2 * MAX_EDIT_SHARE) - 1)
    if alignment is None:
        return None
    start, end = alignment.dest_start, alignment.dest_end

    def distance(begin: int, finish: int) -> int:
        return Levenshtein.distance(quote, scope[begin:finish], score_cutoff=budget + 1)

    # partial_ratio aligns on indel similarity over a fixed-width window: move each edge within the budget
    # (first the start, then the end) to the closest Levenshtein alignment
    starts = range(max(0, start - budget), min(len(scope), start + budget) + 1)
    begin = min(starts, key=lambda b: (distance(b, end), abs(b - start)))
    ends = range(max(begin + 1, end - budget), min(len(scope), end + budget) + 1)
    finish = min(ends, key=lambda f: (distance(begin, f), abs(f - end)))
    best = (distance(begin, finish), begin, finish)
    if best[0] > budget:
        best = None
    if best is None:
        return None
    distance, begin, finish = best
    if _numbers(quote) != _numbers(scope[begin:finish]):
        return None
    return 1 - distance / len(quote), begin, finish


def match_quote(quote: str, scope: str) -> QuoteMatch:
    """Grade ``quote`` against ``scope`` (see the module docstring); spans index into ``scope``."""
    needle = normalize(quote).text
    if not needle:
        return _result(0.0, "none", None)
    haystack = normalize(scope)
    position = haystack.text.find(needle)
    if position >= 0:
        return _result(1.0, "exact", _span(haystack, position, position + len(needle), scope))
    parts = _segmented(normalize(quote), haystack.text)
    if parts:
        confidence = VERIFIED - 0.05 * (len(parts) - 2)
        return _result(
            confidence, "segmented", (_span(haystack, *parts[0], scope)[0], _span(haystack, *parts[-1], scope)[1])
        )
    fuzzy = _fuzzy(needle, haystack.text)
    if fuzzy is not None:
        confidence, begin, finish = fuzzy
        return _result(confidence, "fuzzy", _span(haystack, begin, finish, scope))
    return _result(0.0, "none", None)
