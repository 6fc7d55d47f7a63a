"""The token view of a text that quotes are compared in: typography folded away, meaning kept.

Folded away (never matters): case; whitespace and line breaks; hyphenation at line ends and hyphens inside words;
ligatures and compatibility forms (NFKC: ``ﬁ`` → ``fi``, full-width → ASCII); accents on Latin letters, split
accents (``Ste´phane``) included; dash, minus and middle-dot variants; markup — HTML tags and comments (``<sup>``,
page markers), ``**``, ``_``, ``#``, ``>`` quote marks, ``|`` table cell separators —; punctuation; a ``+`` sign.

Kept (always matters): every letter of every script (Greek ``μ`` is not ``u``), whole words, numbers as written —
digits, decimal point or comma, a minus sign attached to the number, and the number's boundaries (``12`` is not in
``2012``, ``0.05`` not in ``0.054``) —, comparators (``<``, ``>``, ``≤``, ``≥``, ``=``, ``±``, ``≠``, ``≈``, ``~``),
``%``, ``/``, ``×``, and the dash of a range (``60–69``). Characters a PDF's text layer could not map (U+FFFD, control
characters, private-use glyphs) become ``unreadable`` tokens, so a quote across one is never taken as exact.

Each token keeps its span in the original text; page markers (``<!-- page N -->``, written by the PDF parser at the
start of every page) give the page of any offset.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

WORD, NUMBER, SYMBOL, UNREADABLE = "word", "number", "symbol", "unreadable"
UNREADABLE_CHAR = "\ufffd"
PAGE_MARKER = "<!-- page {number} -->"

_PAGE_MARKER = re.compile(r"<!--\s*page\s+(\d+)\s*-->")
# HTML tags and comments, and a markdown quote mark at a line start: markup, not comparators
_MARKUP = re.compile(r"<!--.*?-->|</?[A-Za-z][A-Za-z0-9]*(?:\s[^<>\n]{0,200})?/?>", re.S)
# a markdown quote mark (pymupdf4llm writes footnotes as "> …") opens a block; a ">" inside a paragraph compares
_QUOTE_MARK = re.compile(r"(?:\A|\n[ \t]*\n)[ \t]*(>)(?=[ \t])")
_DASHES = frozenset("-\u2010\u2011\u2012\u2013\u2014\u2015\u2043\u2212\ufe58\ufe63\uff0d")
_REMOVED = frozenset("\u00ad\u200b\u200c\u200d\u2060\ufeff")  # soft hyphen and zero-width characters
_DECIMAL_DOTS = frozenset("\u00b7\u2219\u22c5\u2027")
_APOSTROPHES = frozenset("\u2019\u2018\u02bc\u2032")
_COMPARATORS = {"\u2266": "≤", "\u2a7d": "≤", "\u2267": "≥", "\u2a7e": "≥", "\u2264": "≤", "\u2265": "≥"}
_TOKEN = re.compile(
    r"(?P<unreadable>\ufffd+)"
    r"|(?P<number>(?:(?<![\w.·])[.·](?=\d))?\d+(?:[.,·]\d+)*)"
    r"|(?P<word>[^\W\d_](?:[^\W_]|'(?=[^\W\d_]))*)"
    r"|(?P<symbol><=|>=|=<|\+/-|\+-|[<>≤≥=±≠≈~×%‰/])"
    r"|(?P<dash>-)"
)
_DIGRAPHS = {"<=": "≤", "=<": "≤", ">=": "≥", "+/-": "±", "+-": "±"}
# scripts written without spaces between words: every character is a token of its own
_UNSPACED = re.compile(r"[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_JOINED_HYPHEN = re.compile(r"(?<=[^\W\d_])-[ \n]*(?=[^\W\d_])")
_RULE = re.compile(r"-{2,}")


@dataclass(frozen=True, slots=True)
class Token:
    """One unit of meaning: its normalised text, kind, and span in the original text (end-exclusive)."""

    text: str
    kind: str  # word | number | symbol | unreadable
    start: int
    end: int


@lru_cache(maxsize=8192)
def _fold_char(char: str) -> str:
    """One character → its folded form ("" when it disappears, " " when it only separates)."""
    if char in _DASHES:
        return "-"
    if char in _REMOVED:
        return ""
    if char in _DECIMAL_DOTS:
        return "·"
    if char in _APOSTROPHES:
        return "'"
    if char in _COMPARATORS:
        return _COMPARATORS[char]
    code = ord(char)
    if char == UNREADABLE_CHAR or (code < 32 and char not in "\t\n\r") or code == 0x7F or 0xE000 <= code <= 0xF8FF:
        return UNREADABLE_CHAR
    if char == "\n":
        return "\n"
    category = unicodedata.category(char)
    if char.isspace() or category.startswith("Z") or char == "^":
        return " "
    if category == "Sk":  # spacing accents of split characters ("Ste´phane"): nothing
        return ""
    folded = unicodedata.normalize("NFKC", char).casefold()
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
    masked = set()
    for match in _MARKUP.finditer(original):
        masked.update(range(match.start(), match.end()))
    masked.update(match.start(1) for match in _QUOTE_MARK.finditer(original))
    chars: list[str] = []
    offsets: list[int] = []
    previous_latin = False
    for index, char in enumerate(original):
        if index in masked:
            chars.append(" ")
            offsets.append(index)
            previous_latin = False
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
    if before.isalnum() or before in ")]":
        return spaced  # "CI −2.05", "(95% CI) −1.7" are signs; "IL-6", "(1)-(2)" are not
    return True  # after "(", "=", ":", "|", a comparator, …


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
            if raw and raw[-1][0] == "dash" and not text[raw[-1][3] : start].strip() and _is_sign(text, raw[-1][2]):
                _, _, dash_start, _ = raw.pop()
                raw.append((NUMBER, "-" + value, dash_start, end))
                continue
            raw.append((NUMBER, value, start, end))
        elif kind == "word":
            if _UNSPACED.search(value):
                raw.extend((WORD, char, start + i, start + i + 1) for i, char in enumerate(value))
            else:
                raw.append((WORD, value, start, end))
        elif kind == "symbol":
            raw.append((SYMBOL, _DIGRAPHS.get(value, value), start, end))
        elif kind == "unreadable":
            raw.append((UNREADABLE, UNREADABLE_CHAR, start, end))
        else:
            raw.append(("dash", "-", start, end))
    tokens: list[Token] = []
    for index, (kind, value, start, end) in enumerate(raw):
        if kind == "dash":
            before, _ = _previous_visible(text, start)
            follows_number = index + 1 < len(raw) and raw[index + 1][0] == NUMBER
            if not (before.isdigit() or before in ")]%‰") or not follows_number:
                continue  # a dash between words is punctuation; between numbers it is a range
            kind = SYMBOL
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
