"""The token view of a text that quotes are compared in: typography folded away, meaning kept.

Folded away (never matters): case; whitespace and line breaks; hyphenation at line ends and hyphens inside words;
ligatures and compatibility forms (NFKC: ``ﬁ`` → ``fi``, full-width → ASCII); accents on Latin letters, split
accents (``Ste´phane``) included; dash variants; markup — HTML comments (page markers) and tags (``<b>``, ``<br>``,
``<sup>``: a superscript keeps its place, see below), ``**``, ``_``, ``#``, ``>`` quote marks, ``|`` table cell
separators —; punctuation inside a sentence; a ``+`` sign in front of a number.

Kept (always matters): every letter of every script (Greek ``μ`` is not ``u``), whole words, numbers as written —
digits, decimal point or comma, a minus sign attached to the number, and the number's boundaries (``12`` is not in
``2012``, ``0.05`` not in ``0.054``) —, comparators (``<``, ``>``, ``≤``, ``≥``, ``≮``, ``=``, ``±``, ``≠``, ``≈``,
``~``), ``%``, ``/``, ``×``, the dash of a range (``60–69``), a ``+`` or ``−`` after a word (``HER2+`` is not
``HER2−``), the end of a sentence (``.``, ``;``, ``!``, ``?``: two sentences are not one), and superscripts: after a
letter they join the word (``m²`` = ``m<sup>2</sup>`` = ``m2``), after a number they stay apart (``10³`` is ``10 ^3``,
never ``103``; a footnote mark ``0.04²`` is never ``0.042``). Characters a PDF's text layer could not map (U+FFFD,
control characters, private-use glyphs) become ``unreadable`` tokens, so a quote across one is never taken as exact;
so does a vulgar fraction standing where a symbol must be, between a statistic's name and a number (``p ¼ 0.05``:
a text layer that mapped ``=`` to ``¼``).

Each token keeps its span in the original text; page markers (``<!-- page N -->``, written by the PDF parser at the
start of every page) give the page of any offset. ``BOUNDARY_CHAR`` separates texts that must never be read as one
(the markdown and each table of a document's evidence scope).
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

WORD, NUMBER, SYMBOL, UNREADABLE, BOUNDARY = "word", "number", "symbol", "unreadable", "boundary"
UNREADABLE_CHAR = "\ufffd"
BOUNDARY_CHAR = "\u241e"  # ␞: a hard boundary between two texts of one scope

_PAGE_MARKER = re.compile(r"<!--\s*page\s+(\d+)\s*-->")
TAG_NAMES = (
    "a|abbr|b|big|blockquote|body|br|caption|center|cite|code|col|colgroup|dd|del|dfn|div|dl|dt|em|figcaption|"
    "figure|font|h[1-6]|head|hr|html|i|img|ins|kbd|label|li|mark|ol|p|pre|q|s|samp|section|small|span|strike|"
    "strong|sub|sup|table|tbody|td|tfoot|th|thead|tr|tt|u|ul|var|wbr"
)
# HTML comments (bounded: an unclosed "<!--" costs nothing) and known tags — a "<" before other letters compares
_MARKUP = re.compile(rf"<!--[^\n]{{0,500}}?-->|</?(?:{TAG_NAMES})(?:\s[^<>\n]{{0,200}})?/?>", re.IGNORECASE)
_SUPERSCRIPT_TAG = re.compile(r"<(sup|sub)(?:\s[^<>\n]{0,100})?>([^<>\n]{0,40})</\1>", re.IGNORECASE)
# a markdown quote mark (pymupdf4llm writes footnotes as "> …") opens a block; a ">" inside a paragraph compares
_QUOTE_MARK = re.compile(r"\n[ \t]*\n[ \t]*(>)(?=[ \t])")
_DASHES = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2015\u2043\ufe58\ufe63\uff0d")
_MINUS = frozenset("\u2212\u2796")  # a minus sign is never a hyphen
_REMOVED = frozenset("\u00ad\u200b\u200c\u200d\u2060\ufeff")  # soft hyphen and zero-width characters
_DECIMAL_DOTS = frozenset("\u00b7\u2219\u22c5\u2027")
_APOSTROPHES = frozenset("\u2019\u2018\u02bc\u2032")
_COMPARATORS = {
    "\u2266": "≤",
    "\u2a7d": "≤",
    "\u2264": "≤",
    "\u2267": "≥",
    "\u2a7e": "≥",
    "\u2265": "≥",
    "\u223c": "~",
    "\u2248": "≈",
}
_SUPERSCRIPTS = {
    **{
        chr(c): str(d) for d, c in enumerate((0x2070, 0xB9, 0xB2, 0xB3, 0x2074, 0x2075, 0x2076, 0x2077, 0x2078, 0x2079))
    },
    **{chr(0x2080 + d): str(d) for d in range(10)},
    "\u207a": "+",
    "\u207b": "−",
    "\u208a": "+",
    "\u208b": "−",
}
_TOKEN = re.compile(
    r"(?P<unreadable>\ufffd+)"
    r"|(?P<boundary>\u241e)"
    r"|(?P<power>\^[+−]?\d+)"
    r"|(?P<number>(?:(?<![\w.·])[.·](?=\d))?\d+(?:[.,·]\d+)*)"
    r"|(?P<word>[^\W\d_](?:[^\W_]|'(?=[^\W\d_]))*)"
    r"|(?P<symbol><=|>=|=<|\+/-|\+-|[<>≤≥≮≯≰≱=±∓≠≈~×%‰/])"
    r"|(?P<dash>[-−])"
    r"|(?P<plus>\+)"
    r"|(?P<stop>[.!?;](?=[*_]*(?:\s|$|[^\W\d_])))"  # "**Table 1.** Baseline": the stop is kept inside markup
)
_DIGRAPHS = {"<=": "≤", "=<": "≤", ">=": "≥", "+/-": "±", "+-": "±"}
# scripts written without spaces between words: every character is a token of its own
_UNSPACED = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")
# a symbol glyph a PDF's text layer mapped to a vulgar fraction — "p ¼ 0.05" for "p = 0.05", "n ½ 12" — is known
# to be wrong where it stands between a statistic's name and a number: it is read as unreadable, never as ¼
_MISMAPPED_FRACTION = re.compile(
    r"(?<![\w.])(?:[A-Za-z]{1,4}|χ2|χ²|I2|I²)\)?[ \u00a0]?([¼½¾])(?=[ \u00a0]?[-−–]?\.?\d)"
)
_JOINED_HYPHEN = re.compile(r"(?<=[^\W\d_])-[ \n]*(?=[^\W\d_])")
_RULE = re.compile(r"-{2,}")


@dataclass(frozen=True, slots=True)
class Token:
    """One unit of meaning: its normalised text, kind, and span in the original text (end-exclusive)."""

    text: str
    kind: str  # word | number | symbol | unreadable | boundary
    start: int
    end: int


@lru_cache(maxsize=8192)
def _fold_char(char: str) -> str:
    """One character → its folded form ("" when it disappears, " " when it only separates)."""
    if char in _DASHES:
        return "-"
    if char in _MINUS:
        return "−"
    if char in _REMOVED:
        return ""
    if char in _DECIMAL_DOTS:
        return "·"
    if char in _APOSTROPHES:
        return "'"
    if char in _COMPARATORS:
        return _COMPARATORS[char]
    if char in "≮≯≰≱∓":
        return char
    code = ord(char)
    if char == UNREADABLE_CHAR or (code < 32 and char not in "\t\n\r") or code == 0x7F or 0xE000 <= code <= 0xF8FF:
        return UNREADABLE_CHAR
    if char == BOUNDARY_CHAR or char == "\n":
        return char
    category = unicodedata.category(char)
    if char.isspace() or category.startswith("Z"):
        return " "
    if char == "^":
        return "^"
    if category == "Sk":  # spacing accents of split characters ("Ste´phane"): nothing
        return ""
    folded = unicodedata.normalize("NFKC", char).casefold()
    if "\u2044" in folded:  # a vulgar fraction (½): its own number, never glued to the digits before it
        return " " + folded.replace("\u2044", "/") + " "
    out = []
    for part in folded:
        decomposed = unicodedata.normalize("NFD", part)
        if len(decomposed) > 1 and decomposed[0].isascii() and decomposed[0].isalpha():
            part = decomposed[0]  # Latin accents are typography here; other scripts keep their marks
        out.append(part if part not in _DASHES else "-")
    return "".join(out)


def _is_latin_letter(char: str) -> bool:
    return char.isalpha() and ord(char) < 0x250


@dataclass(frozen=True)
class TokenizedText:
    """A text as tokens, plus a boundary-safe string of them for fast exact search."""

    original: str
    tokens: tuple[Token, ...]
    joined: str  # " t0 t1 … tn " — a quote's joined form is found here only at token boundaries
    positions: tuple[int, ...]  # index in ``joined`` where each token begins
    starts: tuple[int, ...]  # original offset where each token begins
    page_offsets: tuple[int, ...]  # original offsets of the page markers, in order
    page_numbers: tuple[int, ...]

    def token_index(self, joined_index: int) -> int:
        """The token that begins at (or contains) ``joined_index``."""
        return max(0, bisect.bisect_right(self.positions, joined_index) - 1)

    def page_of(self, offset: int) -> int | None:
        """The page an original offset lies on (None when the text has no page markers)."""
        if not self.page_offsets:
            return None
        at = bisect.bisect_right(self.page_offsets, offset) - 1
        return self.page_numbers[max(at, 0)]

    def pages_between(self, start: int, end: int) -> bool:
        """True when a page begins between the original offsets ``start`` and ``end``."""
        at = bisect.bisect_right(self.page_offsets, start)
        return at < len(self.page_offsets) and self.page_offsets[at] < end


def _fold(original: str) -> tuple[str, list[int]]:
    """Folded text and, per folded character, the index of the original character it came from."""
    masked: set[int] = set()  # markup: a separator
    silent: set[int] = set()  # the <sup>/<sub> tags themselves: nothing (their content keeps its place)
    superscript: set[int] = set()  # characters inside <sup>/<sub>: written as superscripts
    for match in _SUPERSCRIPT_TAG.finditer(original):
        silent.update(range(match.start(), match.start(2)))
        silent.update(range(match.end(2), match.end()))
        superscript.update(range(match.start(2), match.end(2)))
    for match in _MARKUP.finditer(original):
        if match.start() not in silent:
            masked.update(range(match.start(), match.end()))
    masked.update(match.start(1) for match in _QUOTE_MARK.finditer(original))
    mismapped = (
        {match.start(1) for match in _MISMAPPED_FRACTION.finditer(original)}
        if "¼" in original or ("½" in original or "¾" in original)
        else set()
    )
    chars: list[str] = []
    offsets: list[int] = []
    previous_latin = False
    for index, char in enumerate(original):
        if index in silent:
            continue
        if index in mismapped:
            chars.append(UNREADABLE_CHAR)
            offsets.append(index)
            previous_latin = False
            continue
        if index in masked:
            if not chars or chars[-1] != " ":
                chars.append(" ")
                offsets.append(index)
            previous_latin = False
            continue
        if index in superscript or char in _SUPERSCRIPTS:
            digit = _SUPERSCRIPTS.get(char) or _fold_char(char)
            after_number = bool(chars) and (chars[-1].isdigit() or chars[-1] == "·")
            if after_number and (digit[:1].isdigit() or digit in ("+", "−")) and not _in_power(chars):
                chars.append("^")  # 10³, 0.04²: a power or a footnote mark, never more digits of the number
                offsets.append(index)
            for part in digit:
                chars.append(part)
                offsets.append(index)
            continue
        if unicodedata.category(char) == "Mn":  # a combining mark: typography after a Latin letter
            if previous_latin:
                continue
            chars.append(char)
            offsets.append(index)
            continue
        folded = _fold_char(char)
        for part in folded:
            chars.append(part)
            offsets.append(index)
        if folded:
            previous_latin = _is_latin_letter(folded[-1])
    text = "".join(chars)
    # hyphens inside words and at line ends join the word; runs of dashes (markdown rules) only separate
    drop: set[int] = set()
    for match in _JOINED_HYPHEN.finditer(text):
        drop.update(range(match.start(), match.end()))
    if drop:
        kept = [i for i in range(len(text)) if i not in drop]
        text = "".join(text[i] for i in kept)
        offsets = [offsets[i] for i in kept]
    text = _RULE.sub(lambda m: " " * len(m.group(0)), text)
    return text, offsets


def _in_power(chars: list[str]) -> bool:
    """Is the end of ``chars`` already inside a superscript run (``10^12``: the 2 continues the power)?"""
    index = len(chars) - 1
    while index >= 0 and (chars[index].isdigit() or chars[index] in "+−"):
        index -= 1
    return index >= 0 and chars[index] == "^"


def _previous_visible(text: str, position: int) -> tuple[str, bool]:
    """The nearest non-space character before ``position`` and whether whitespace lies between."""
    index = position - 1
    while index >= 0 and text[index] in " \n":
        index -= 1
    return (text[index] if index >= 0 else ""), index < position - 1


def _is_sign(text: str, dash: int) -> bool:
    """Is the dash at ``dash`` the minus sign of the number after it (not a hyphen, range or subtraction)?"""
    before, spaced = _previous_visible(text, dash)
    if not before or "\n" in text[text.rfind(before, 0, dash) + 1 : dash]:
        return True  # at the start of a line (a table cell, a list): a sign
    if before.isdigit() or before in "%‰":
        return False  # 60–69, 5% - 10%: a range or an operator
    if text[dash] == "−" and before.isalpha():
        return True  # a true minus sign after a word: "was−0.5"
    if before.isalnum() or before in ")]":
        return spaced  # "CI −2.05", "(95% CI) −1.7" are signs; "IL-6", "(1)-(2)" are not
    return True  # after "(", "=", ":", "|", a comparator, …


def _is_suffix(text: str, start: int) -> bool:
    """A ``+`` or ``−`` written right after a word or number and not before one: ``HER2+``, ``CD4−``, ``ER+/``."""
    before = text[start - 1] if start > 0 else ""
    after = text[start + 1] if start + 1 < len(text) else ""
    return before.isalnum() and not after.isalnum()


def _sentence_end(original: str, text: str, offsets: list[int], start: int, end: int) -> bool:
    """Is the stop at ``start`` the end of a sentence? Not inside "e.g." or "I.E.", and not a decimal point the text
    layer split off ("0. 001")."""
    before = text[start - 1] if start > 0 else ""
    while end < len(text) and text[end] in "*_":  # emphasis closing after the stop ("**Table 1.** Baseline")
        end += 1
    rest = text[end:].lstrip(" ")
    if before.isdigit() and text[start] == "." and rest[:1].isdigit():
        return False
    if end >= len(offsets) or text[end].isspace():
        return True
    following, preceding = original[offsets[end]], original[offsets[start - 1]] if start > 0 else ""
    return following.isupper() and not preceding.isupper()  # "end.The" — not "e.g." or "I.E."


def tokenize_once(original: str) -> TokenizedText:
    """The tokens of ``original``, not cached (quotes: each is tokenized once)."""
    text, offsets = _fold(original)
    raw: list[tuple[str, str, int, int]] = []  # kind, text, folded start, folded end
    for match in _TOKEN.finditer(text):
        kind = match.lastgroup or ""
        value = match.group(0)
        start, end = match.span()
        if kind == "number":
            if "·" in value:
                value = value.replace("·", ".")
            if (
                raw
                and raw[-1][0] in ("dash", "plus")
                and not text[raw[-1][3] : start].strip()
                and _is_sign(text, raw[-1][2])
            ):
                sign_kind, _, sign_start, _ = raw.pop()
                raw.append((NUMBER, value if sign_kind == "plus" else "-" + value, sign_start, end))
                continue
            raw.append((NUMBER, value, start, end))
        elif kind == "power":
            raw.append((NUMBER, value.replace("−", "-"), start, end))
        elif kind == "word":
            if _UNSPACED.search(value):
                raw.extend((WORD, char, start + i, start + i + 1) for i, char in enumerate(value))
            else:
                raw.append((WORD, value, start, end))
        elif kind == "symbol":
            raw.append((SYMBOL, _DIGRAPHS.get(value, value), start, end))
        elif kind == "unreadable":
            raw.append((UNREADABLE, UNREADABLE_CHAR, start, end))
        elif kind == "boundary":
            raw.append((BOUNDARY, BOUNDARY_CHAR, start, end))
        elif kind == "stop":
            if _sentence_end(original, text, offsets, start, end):
                raw.append((BOUNDARY, ".", start, end))
        else:
            raw.append((kind, value, start, end))
    tokens: list[Token] = []
    for index, (kind, value, start, end) in enumerate(raw):
        if kind == "plus":  # a "+" that is not a number's sign: HER2+, CD4+CD25+, 10 + 5
            kind = SYMBOL
        elif kind == "dash":
            before, _ = _previous_visible(text, start)
            follows_number = index + 1 < len(raw) and raw[index + 1][0] == NUMBER
            if _is_suffix(text, start):
                kind, value = SYMBOL, "-"  # HER2−, CD25−
            elif (before.isdigit() or before in ")]%‰") and follows_number:
                kind, value = SYMBOL, "-"  # a range or a subtraction: 60–69
            else:
                continue  # a dash between words is punctuation
        tokens.append(Token(value, kind, offsets[start], offsets[end - 1] + 1))
    positions = []
    cursor = 1
    for token in tokens:
        positions.append(cursor)
        cursor += len(token.text) + 1
    joined = " " + " ".join(token.text for token in tokens) + " "
    markers = list(_PAGE_MARKER.finditer(original))
    return TokenizedText(
        original=original,
        tokens=tuple(tokens),
        joined=joined,
        positions=tuple(positions),
        starts=tuple(token.start for token in tokens),
        page_offsets=tuple(m.start() for m in markers),
        page_numbers=tuple(int(m.group(1)) for m in markers),
    )


@lru_cache(maxsize=16)
def tokenize(original: str) -> TokenizedText:
    """The tokens of ``original``, cached: a document's scope is graded against many quotes."""
    return tokenize_once(original)


def normalize(text: str) -> str:
    """The folded token form of ``text`` (tokens joined by single spaces) — what two texts are compared as."""
    return " ".join(token.text for token in tokenize_once(text).tokens)
