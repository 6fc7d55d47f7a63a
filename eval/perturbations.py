"""Ways to change a real quote: ones that change its meaning (never ``verified``) and ones that only change its
typography (always ``verified``). Used by ``make eval`` (per-kind counts) and by ``test_quotes.py``.

Each perturbation takes a quote (and a random generator, and the quotes of the same document for stitching) and
returns the altered quote, or None when the quote has nothing to alter that way.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable

_SIGNED = re.compile(r"(?<![\w\d.)\]])([-−–])\s?(?=\d)")
_NUMBER = re.compile(r"(?<![\d.,])\d+(?:[.,·]\d+)?(?![\d])")
_DECIMAL = re.compile(r"(?<![\d.])(\d+)[.·](\d{2,})(?!\d)")
_LONG_INTEGER = re.compile(r"(?<![\d.,])(\d)(\d{2,})(?![\d.,])")
_RANGE = re.compile(r"(\d+(?:[.·]\d+)?)(\s*[-–—]\s*|\s+to\s+)(\d+(?:[.·]\d+)?)")
_COMPARATOR = re.compile(r"<=|>=|[<>≤≥]|(?<=\bp)\s*=|(?<=\bP)\s*=")
_FLIP = {"<": ">", ">": "<", "≤": "≥", "≥": "≤", "<=": ">=", ">=": "<="}
_NEGATION = re.compile(r"\b(no|not|non-?|without|neither|nor|never)\s*(?=\w)", re.IGNORECASE)
_VERB = re.compile(r"\b(was|were|is|are|did|does|had)\b\s+", re.IGNORECASE)
_POLARITY = {
    "increased": "decreased",
    "increase": "decrease",
    "higher": "lower",
    "greater": "smaller",
    "more": "less",
    "larger": "smaller",
    "improved": "worsened",
    "improvement": "deterioration",
    "above": "below",
    "before": "after",
    "longer": "shorter",
    "superior": "inferior",
    "positive": "negative",
    "maximum": "minimum",
    "reduced": "increased",
    "reduction": "increase",
    "significant": "insignificant",
    "hypertension": "hypotension",
    "preoperative": "postoperative",
    "with": "without",
}
_ARMS = {"intervention": "control", "treatment": "placebo", "experimental": "control", "metformin": "placebo"}


def _replace_at(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _pick(rng: random.Random, matches: list[re.Match[str]]) -> re.Match[str] | None:
    return rng.choice(matches) if matches else None


def comparator_flipped(quote: str, rng: random.Random) -> str | None:
    match = _pick(rng, list(_COMPARATOR.finditer(quote)))
    if match is None:
        return None
    found = match.group(0)
    new = _FLIP.get(found.strip(), " <")
    return _replace_at(quote, match.start(), match.end(), new)


def sign_dropped(quote: str, rng: random.Random) -> str | None:
    match = _pick(rng, list(_SIGNED.finditer(quote)))
    return None if match is None else _replace_at(quote, match.start(), match.end(), "")


def sign_added(quote: str, rng: random.Random) -> str | None:
    candidates = [m for m in _NUMBER.finditer(quote) if not re.search(r"[-−–]\s?$", quote[: m.start()])]
    match = _pick(rng, candidates)
    return None if match is None else _replace_at(quote, match.start(), match.start(), "−")


def number_truncated(quote: str, rng: random.Random) -> str | None:
    """0.054 → 0.05 (a decimal cut short), 2012 → 12 (leading digits dropped)."""
    options = [("decimal", m) for m in _DECIMAL.finditer(quote)] + [
        ("integer", m) for m in _LONG_INTEGER.finditer(quote)
    ]
    if not options:
        return None
    kind, match = rng.choice(options)
    if kind == "decimal":
        return _replace_at(quote, match.end() - 1, match.end(), "")
    return _replace_at(quote, match.start(), match.start(1) + 1, "")


def number_extended(quote: str, rng: random.Random) -> str | None:
    """0.05 → 0.054: a digit appended (the quote's number is longer than the source's)."""
    match = _pick(rng, list(_NUMBER.finditer(quote)))
    return None if match is None else _replace_at(quote, match.end(), match.end(), str(rng.randint(1, 9)))


def digit_changed(quote: str, rng: random.Random) -> str | None:
    positions = [i for i, char in enumerate(quote) if char.isdigit()]
    if not positions:
        return None
    position = rng.choice(positions)
    digit = rng.choice([d for d in "0123456789" if d != quote[position]])
    return _replace_at(quote, position, position + 1, digit)


def decimal_moved(quote: str, rng: random.Random) -> str | None:
    """0.038 → 0.38: the decimal point one place to the right."""
    match = _pick(rng, list(_DECIMAL.finditer(quote)))
    if match is None:
        return None
    whole, fraction = match.group(1), match.group(2)
    moved = f"{int(whole + fraction[0])}.{fraction[1:]}"
    return _replace_at(quote, match.start(), match.end(), moved)


def range_end_changed(quote: str, rng: random.Random) -> str | None:
    match = _pick(rng, list(_RANGE.finditer(quote)))
    if match is None:
        return None
    end = match.group(3)
    last = end[-1]
    changed = end[:-1] + rng.choice([d for d in "0123456789" if d != last])
    return _replace_at(quote, match.start(3), match.end(3), changed)


def negation_removed(quote: str, rng: random.Random) -> str | None:
    match = _pick(rng, list(_NEGATION.finditer(quote)))
    return None if match is None else _replace_at(quote, match.start(), match.end(), "")


def negation_added(quote: str, rng: random.Random) -> str | None:
    if _NEGATION.search(quote):
        return None
    match = _pick(rng, list(_VERB.finditer(quote)))
    if match is not None:
        return _replace_at(quote, match.end(), match.end(), "not ")
    significant = re.search(r"\bsignificant", quote, re.IGNORECASE)
    return None if significant is None else _replace_at(quote, significant.start(), significant.start(), "no ")


def _swap_word(quote: str, rng: random.Random, table: dict[str, str]) -> str | None:
    both = {**table, **{v: k for k, v in table.items()}}
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, both), key=len, reverse=True)) + r")\b", re.I)
    match = _pick(rng, list(pattern.finditer(quote)))
    if match is None:
        return None
    word = match.group(0)
    new = both[word.lower()]
    new = new.capitalize() if word[0].isupper() else new
    return _replace_at(quote, match.start(), match.end(), new)


def polarity_swapped(quote: str, rng: random.Random) -> str | None:
    return _swap_word(quote, rng, _POLARITY)


def arms_swapped(quote: str, rng: random.Random) -> str | None:
    return _swap_word(quote, rng, _ARMS)


def word_replaced(quote: str, rng: random.Random, others: list[str] | None = None) -> str | None:
    """Any other word: a word of the quote replaced by a different word of the same document."""
    words = list(re.finditer(r"\b[A-Za-z]{5,}\b", quote))
    pool = sorted({w for text in (others or []) for w in re.findall(r"\b[a-z]{5,}\b", text)})
    match = _pick(rng, words)
    if match is None or not pool:
        return None
    replacement = rng.choice([w for w in pool if w != match.group(0).lower()] or pool)
    return _replace_at(quote, match.start(), match.end(), replacement)


def stitched(quote: str, rng: random.Random, others: list[str] | None = None) -> str | None:
    """The start of this quote joined to the end of another quote of the same document (cut between words)."""
    words = quote.split()
    mine = {w.lower() for w in words}
    candidates = [  # another statement, not another annotator's copy of the same sentence
        other
        for other in (others or [])
        if len(other.split()) >= 6 and len(mine & {w.lower() for w in other.split()}) < 0.5 * len(mine)
    ]
    if not candidates or len(words) < 6:
        return None
    other = rng.choice(candidates).split()
    return " ".join(words[: len(words) // 2] + other[len(other) // 2 :])


MEANING_CHANGES: dict[str, Callable[..., str | None]] = {
    "comparator flipped": comparator_flipped,
    "minus sign dropped": sign_dropped,
    "minus sign added": sign_added,
    "number cut short": number_truncated,
    "number extended": number_extended,
    "digit changed": digit_changed,
    "decimal point moved": decimal_moved,
    "range end changed": range_end_changed,
    "negation removed": negation_removed,
    "negation added": negation_added,
    "polarity word swapped": polarity_swapped,
    "arms swapped": arms_swapped,
    "other word replaced": word_replaced,
    "sentences stitched": stitched,
}
NEEDS_OTHERS = {"other word replaced", "sentences stitched"}


def _dash_variants(quote: str, rng: random.Random) -> str | None:
    changed = re.sub(r"[−–]", "-", quote)
    return changed if changed != quote else None


TYPOGRAPHY_CHANGES: dict[str, Callable[[str, random.Random], str | None]] = {
    "case changed": lambda q, rng: q.upper(),
    "line breaks and spaces": lambda q, rng: re.sub(r" ", lambda m: rng.choice([" ", "\n", "  "]), q),
    "dash and minus variants": _dash_variants,
    "markup added": lambda q, rng: "**" + q.replace(" ", " <sup></sup>", 1) + "**",
    "ligatures": lambda q, rng: q.replace("fi", "\ufb01").replace("fl", "\ufb02") if re.search("f[il]", q) else None,
    "hyphenated at a line end": lambda q, rng: (
        re.sub(r"\b([a-z]{4})([a-z]{4,})\b", r"\1-\n\2", q, count=1) if re.search(r"\b[a-z]{8,}\b", q) else None
    ),
}
