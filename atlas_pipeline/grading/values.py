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
- a label (an enum option, a short code) must be written in the quote as a whole word, with its case where the case
  carries meaning (``OR``, ``RR``, ``HR``, ``MD``), or as one of the synonyms the template agrees for it ("odds
  ratio");
- a judgment (risk of bias, a design classification — ``judgment: true`` in the template) is never written verbatim:
  its quote can be in the document, the judgment itself is a person's to confirm (at most ``approximate``);
- a free text must have its content words close together in the quote (not scattered through it), and one common
  word alone ("high", "patients") does not make a long quote support it;
- a value with no content — stop-words, punctuation, markup, whitespace — is supported by nothing (``unverified``).

Values are cleaned of the markup a model copies from the markdown before they are graded and exported
(``clean_value``); the raw answer stays in the record.
"""

from __future__ import annotations

import contextlib
import math
import re
from dataclasses import dataclass
from datetime import date

from atlas_pipeline.grading.meaning import is_negation
from atlas_pipeline.grading.text import BOUNDARY, NUMBER, SYMBOL, TAG_NAMES, WORD, Token, tokenize_once

_STOPWORD_TEXT = "a an the of and or in on at to for with by vs versus from as per"
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
# words so common in trial reports that one of them alone, somewhere in a long quote, says nothing about a value
_COMMON_TEXT = (
    "all also any are be been both but can could did do does each had has have he her his if into is it its may more "
    "most no none not one only other our she some such than that their them then there these they this those two "
    "was we were which who will would yes high low higher lower some concerns unclear moderate serious critical "
    "risk bias group groups arm arms patient patients participant participants subject subjects people study studies "
    "trial trials treatment treatments control controls intervention interventions usual care standard outcome "
    "outcomes result results data analysis method methods table figure baseline follow up day days week weeks "
    "month months year years time total mean median number rate ratio score level levels effect effects difference "
    "significant significantly randomised randomized random adequate inadequate open label blind blinded"
)
COMMON_WORDS = frozenset(_COMMON_TEXT.split())
_SHORT_QUOTE = 6  # content words: a quote this short is about its value
_SLACK = 4  # beyond two tokens a word, what a quote may put between a text value's words ("Singh and … (2016)")
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


_MEANINGFUL_SYMBOLS = frozenset(["+", "-", "<", ">", "≤", "≥", "≮", "≯", "≠", "≈", "±"])


def _is_code(token: Token, original: str) -> bool:
    """An abbreviation written in capitals (``OR``, ``RR``, ``HR``, ``MD``): its case carries its meaning."""
    written = original[token.start : token.end]
    return token.kind == WORD and len(written) >= 2 and written.isupper()


def _content(text: str) -> list[Token]:
    """The tokens that carry a text's meaning: words (stopwords left out, unless written as a code such as ``OR``),
    numbers, and ``+``/``−`` marks."""
    view = tokenize_once(text)
    return [
        token
        for token in view.tokens
        if (token.kind == WORD and (token.text not in STOPWORDS or _is_code(token, text)))
        or token.kind == NUMBER
        or (token.kind == SYMBOL and token.text in _MEANINGFUL_SYMBOLS)
    ]


def has_content(text: str) -> bool:
    """Whether a text value says anything: not only stop-words, punctuation, markup or whitespace."""
    return bool(_content(text))


def _same_word(word: str, other: str) -> bool:
    """The same word, or its singular/plural (``arm``/``arms``, ``study``/``studies``)."""
    if word == other:
        return True
    short, long = sorted((word, other), key=len)
    return len(short) >= 3 and long in (short + "s", short + "es", short[:-1] + "ies")


def _same_number(numbers: list[float], token: Token) -> bool:
    return any(math.isclose(n, q, abs_tol=1e-9) for n in numbers for q in _as_numbers(token.text))


def _window(positions: list[list[int]]) -> tuple[int, int]:
    """The shortest run of quote tokens (first, last) that holds one occurrence of every value token (positions
    per value token)."""
    best: tuple[int, int] | None = None
    for anchor in positions[0]:
        nearest = [min(found, key=lambda at, anchor=anchor: abs(at - anchor)) for found in positions[1:]]
        first, last = min([anchor, *nearest]), max([anchor, *nearest])
        if best is None or last - first < best[1] - best[0]:
            best = (first, last)
    return best or (0, 0)


def text_supported(value: str, quote: str) -> list[str]:
    """The words (and numbers, and +/− marks and comparators) of ``value`` that its quote does not have, or has only
    under a negation the value leaves out, or only scattered through it; empty when the quote supports it."""
    all_quote = list(tokenize_once(quote).tokens)
    quote_numbers = numbers_in(quote)
    value_tokens = _content(value)
    if not value_tokens:
        return ["(the value has no content: only stop-words, punctuation or markup)"]
    value_negated = any(is_negation(token.text) for token in tokenize_once(value).tokens)
    missing: list[str] = []
    positions: list[list[int]] = []
    for token in value_tokens:
        if token.kind == NUMBER:
            numbers = _as_numbers(token.text)
            if not any(math.isclose(n, q, abs_tol=1e-9) for n in numbers for q in quote_numbers):
                missing.append(token.text)
                continue
            found = [i for i, other in enumerate(all_quote) if other.kind == NUMBER and _same_number(numbers, other)]
            if not found:  # written across tokens ("12 500"): in the quote, its place unknown
                continue
        elif token.kind == SYMBOL:
            found = [i for i, other in enumerate(all_quote) if other.kind == SYMBOL and other.text == token.text]
        else:
            found = [i for i, o in enumerate(all_quote) if o.kind == WORD and _same_word(token.text, o.text)]
        if not found:
            missing.append(token.text)
        else:
            positions.append(found)
    if missing:
        return missing
    first, last = _window(positions) if positions else (0, 0)
    if positions and last - first + 1 > 2 * len(value_tokens) + _SLACK:
        return [f"(its words are scattered through the quote: {' '.join(t.text for t in value_tokens)})"]
    quote_content = [token for token in all_quote if token.kind in (WORD, NUMBER)]
    only = value_tokens[0]
    if (
        len(value_tokens) == 1
        and only.kind == WORD
        and not _is_code(only, value)  # an abbreviation (BMI, IQR) is specific
        and (len(only.text) < 4 or only.text in COMMON_WORDS)
        and len(quote_content) > _SHORT_QUOTE
    ):
        return [f"(a single common word of a long quote: {only.text!r})"]
    if not value_negated and positions:
        around = all_quote[max(0, first - 3) : last + 1]  # the value's words and the few before them
        if any(is_negation(token.text) for token in around):
            missing.append(f"(negated in the quote: {' '.join(token.text for token in around)})")
    return missing


def _phrase_spans(phrase: str, quote: str, tokens: list[Token]) -> list[tuple[int, int]]:
    """(first, last) token indexes where ``phrase`` is written in the quote as a run of whole words — with its case
    where the case carries meaning (``OR`` is the odds ratio, "or" a conjunction) —, or as one hyphenated word
    ("double-blind" for "double blind")."""
    wanted = [t for t in tokenize_once(phrase).tokens if t.kind != BOUNDARY]
    if not wanted:
        return []
    joined = "".join(t.text for t in wanted) if len(wanted) > 1 and all(t.kind == WORD for t in wanted) else None
    spans = []
    for first in range(len(tokens)):
        window = tokens[first : first + len(wanted)]
        if len(window) == len(wanted) and all(
            _label_token_matches(w, phrase, t, quote) for w, t in zip(wanted, window, strict=True)
        ):
            spans.append((first, first + len(wanted) - 1))
        elif joined is not None and tokens[first].text == joined:
            spans.append((first, first))
    return spans


def _label_token_matches(wanted: Token, phrase: str, token: Token, quote: str) -> bool:
    if wanted.kind != token.kind:
        return False
    if _is_code(wanted, phrase):
        return quote[token.start : token.end] == phrase[wanted.start : wanted.end] and not _in_capitals(token, quote)
    return wanted.text == token.text or (wanted.kind == WORD and _same_word(wanted.text, token.text))


def _in_capitals(token: Token, quote: str) -> bool:
    """Is a capitalised word part of a line set in capitals ("DEATH OR DISABILITY"), where case says nothing?"""
    line_start = quote.rfind("\n", 0, token.start) + 1
    line_end = quote.find("\n", token.end)
    line = quote[line_start : line_end if line_end >= 0 else len(quote)]
    words = [word for word in re.findall(r"[^\W\d_]{4,}", line)]
    return bool(words) and all(word.isupper() for word in words)


def label_supported(label: str, quote: str, synonyms: dict[str, list[str]] | None = None) -> bool:
    """A label (an enum option, a short code) is supported by its own words — whole, in order, with their case where
    it carries meaning — or by a synonym the template agrees for it (``synonyms``: option → phrases, for every
    option), not under a negation and not as part of another option's longer phrase ("mean difference" inside
    "standardized mean difference"); a label with no content by nothing."""
    if not has_content(label):
        return False
    synonyms = synonyms or {}
    tokens = [t for t in tokenize_once(quote).tokens if t.kind != BOUNDARY]
    others = [
        span
        for option, phrases in synonyms.items()
        if option != label
        for phrase in [option, *phrases]
        if has_content(phrase)
        for span in _phrase_spans(phrase, quote, tokens)
    ]
    for phrase in [label, *synonyms.get(label, [])]:
        if not has_content(phrase):
            continue
        for first, last in _phrase_spans(phrase, quote, tokens):
            inside = any(a <= first and last <= b and (b - a) > (last - first) for a, b in others)
            negated = any(is_negation(token.text) for token in tokens[max(0, first - 3) : first])
            if not inside and not negated:
                return True
    return False


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


@dataclass(frozen=True, slots=True)
class Support:
    """Whether a quote supports a value: ``problem`` says why not (empty when it does), ``cap`` is the best tier the
    field can then have — ``approximate`` (a person looks) or ``unverified`` (nothing supports it)."""

    problem: str = ""
    cap: str = "verified"


_KIND_OF = {"integer": "number", "enum": "label", "string": "text", "list": "text"}


def support_of(value: object, quote: str, kind: str, synonyms: dict[str, list[str]] | None = None) -> Support:
    """How ``quote`` supports ``value`` for a field of this value kind (``TemplateField.kind``; a field type is read
    as its kind). Booleans are not checked: a quote says yes or no in too many ways."""
    kind = _KIND_OF.get(kind, kind)
    if kind == "judgment":
        if not has_content(" ".join(map(str, value)) if isinstance(value, list) else str(value)):
            return Support("value has no content: only stop-words, punctuation or markup", "unverified")
        return Support(
            f"a judgment ({value!r}): its quote is evidence for it, not the judgment itself — a person decides",
            "approximate",
        )
    if isinstance(value, bool) or kind == "boolean":
        return Support()
    if isinstance(value, int | float):
        if number_in_quote(float(value), quote):
            return Support()
        return Support(f"value not in its quote: {value:g} is not written in the quote", "unverified")
    if isinstance(value, list):
        problems = [support_of(item, quote, "text") for item in value]
        if not value or all(not has_content(str(item)) for item in value):
            return Support("value has no content", "unverified")
        worst = "unverified" if any(p.cap == "unverified" for p in problems) else "approximate"
        said = "; ".join(p.problem for p in problems if p.problem)
        return Support(said, worst) if said else Support()
    text = str(value)
    if not has_content(text):
        return Support("value has no content: only stop-words, punctuation or markup", "unverified")
    if kind == "number":  # a number field answered with text ("12.5 (3.1)"): every number must be in the quote
        numbers = numbers_in(text)
        if numbers and all(number_in_quote(number, quote) for number in numbers):
            return Support()
        return Support(f"value not in its quote: {text!r} is not a number written in the quote", "unverified")
    quote = str(clean_value(quote))  # words compare without footnote marks ("Valois<sup>1</sup>"); numbers never do
    if kind == "label":
        options = (synonyms or {}).get(text, [])
        if label_supported(text, quote, synonyms):
            return Support()
        agreed = f" (nor its agreed synonyms: {', '.join(options)})" if options else ""
        return Support(f"value not in its quote: the quote does not say {text!r}{agreed}", "approximate")
    if kind == "date" and re.fullmatch(r"\d{4}-\d{2}(-\d{2})?", text):
        if _date_supported(text, quote):
            return Support()
        return Support(f"value not in its quote: the date {text} is not in the quote", "approximate")
    missing = text_supported(text, quote)
    if not missing:
        return Support()
    return Support(
        f"value not in its quote: {', '.join(repr(word) for word in missing[:5])} not in the quote", "approximate"
    )


def value_support(value: object, quote: str, kind: str, synonyms: dict[str, list[str]] | None = None) -> str:
    """Why ``quote`` does not support ``value`` (empty when it does); see ``support_of``."""
    return support_of(value, quote, kind, synonyms).problem


# a footnote mark: a superscript after a word — letters or symbols ("Mean<sup>a</sup>", "Lifshitz<sup>*</sup>"), or
# digits after a name ("Melville<sup>1</sup>") — not a unit's power ("kg/m<sup>2</sup>") nor a power ("10<sup>9</sup>")
_SUPERSCRIPT = re.compile(r"(?<=[^\W\d_]|\*)<sup>\s*([\d,*†‡§¶#a-z\s–-]{1,12}?)\s*</sup>", re.IGNORECASE)
_POWER = re.compile(r"(?<=\b10)<sup>\s*([-−+]?\d{1,3})\s*</sup>", re.IGNORECASE)  # 10⁹; other digits: a mark
_MARK_AFTER_NUMBER = re.compile(r"(?<=\d)<sup>\s*[\d,*†‡§¶#a-z\s–-]{1,12}?\s*</sup>", re.IGNORECASE)
_NAME_BEFORE = re.compile(r"(?:^|[\s(])[A-Z][\w'-]*\*?$")
_SCRIPT_TAG = re.compile(r"</?(?:sup|sub)>", re.IGNORECASE)
_TAG = re.compile(rf"</?(?:{TAG_NAMES}|script|style|iframe|object|embed)(?:\s[^<>\n]{{0,200}})?/?>", re.IGNORECASE)
_EMPHASIS = re.compile(r"\*\*|__|`+|(?<!\w)[*_](?=\w)|(?<=\w)[*_](?!\w)")
_HEADING = re.compile(r"^#{1,6}\s+")
_SPACES = re.compile(r"\s+")


def _without_footnote_marks(text: str) -> str:
    def drop(match: re.Match[str]) -> str:
        mark = match.group(1)
        if not mark.replace(",", "").replace(" ", "").isdigit():
            return ""  # letters or symbols: a footnote mark
        return "" if _NAME_BEFORE.search(text[: match.start()]) else match.group(0)  # digits: after a name only

    text = _POWER.sub(lambda match: "^" + match.group(1), _SUPERSCRIPT.sub(drop, text))
    return _MARK_AFTER_NUMBER.sub("", text)


def clean_value(value: object) -> object:
    """A text value without the markup a model copies from the markdown — footnote marks after a name
    (``Melville<sup>1</sup>``), HTML tags (``<sub>1c</sub>`` keeps its text: ``HbA1c``), ``**bold**``, ``_italic_``,
    backticks, a heading's ``#`` — with its spacing made plain; comparators (``<ULN``, ``> 65``) and other values
    stay as they are."""
    if isinstance(value, list):
        return [clean_value(item) for item in value]
    if not isinstance(value, str):
        return value
    text = _without_footnote_marks(value)
    text = _SCRIPT_TAG.sub("", text)
    text = _TAG.sub(" ", text)
    text = _EMPHASIS.sub("", text)
    text = _HEADING.sub("", text.lstrip())
    return _SPACES.sub(" ", text).strip()
