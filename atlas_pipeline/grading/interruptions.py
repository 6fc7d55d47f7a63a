"""What may stand between two parts of a quote without breaking it: a page break with its header and footer, figure
and table captions, tables, footnotes, picture text, and a figure's own text that a PDF's column flow put inside a
sentence — never the document's own running text (``grading.quotes`` joins the parts of a segmented quote)."""

from __future__ import annotations

import re

from atlas_pipeline.grading.meaning import is_negation
from atlas_pipeline.grading.text import NUMBER, SYMBOL, WORD, TokenizedText, tokenize_once

MAX_GAP_CHARS = 6000  # source text between two parts of a quote, at most
# a caption names its figure or table and number, then punctuation or its title in bold ("Table 2 shows…" is text)
_CAPTION = re.compile(
    r"^\W{0,6}(fig(ure)?s?|tables?|tab|box|scheme|chart|panel|plate|supplementa\w*|appendix)\.?\s*[A-Z]?\d+[a-z]?"
    r"\s*(\*\*|[.:|)–—-])"
    # an article's furniture: labelled boxes (funding, competing interests, copyright, …) and contact lines
    r"|^\W{0,6}(notes?|abbreviations?|source|legend|key|keywords|funding|competing interests?|conflicts? of interest|"
    r"copyright|data availability|citation|editor|received|accepted|published|correspondence|corresponding author|"
    r"e-?mail|trial registration)\s*\**\s*[:.]"
    r"|^.{0,300}[\w.+-]+@[\w-]+\.[\w.]+",
    re.IGNORECASE | re.DOTALL,
)
_FOOTNOTE = re.compile(r"^(>\s|<sup>|[†‡§¶]|\*(?![*\s])|\[\^)")
_PICTURE = re.compile(r"^(<!--\s*(start of picture text|page\s+\d+)|!\[|<table|<img)", re.IGNORECASE)
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_FIGURE_LABEL_WORDS = 6  # a line of figure material (an axis label, a legend entry) has a few words, or is numbers
_FUNCTION_TEXT = "a an the of and or in on at to for with by from as than that which who was were is are but"
_FUNCTION_WORDS = frozenset(_FUNCTION_TEXT.split())
_SENTENCE_END = re.compile(r"[.!?:;][\s*_)\]]*$")


def block_ends_after(doc: TokenizedText, index: int) -> bool:
    """Does a block (paragraph, caption, table, page) end after token ``index``?"""
    if index >= len(doc.tokens) - 1:
        return True
    between = doc.original[doc.tokens[index].end : doc.tokens[index + 1].start]
    return bool(_BLANK_LINE.search(between)) or doc.pages_between(doc.tokens[index].end, doc.tokens[index + 1].start)


def is_interruption(doc: TokenizedText, start: int, end: int) -> bool:
    """Is the source text between two parts of a quote a real interruption — a page break with its header and footer,
    figure or table captions, tables, footnotes, picture text — rather than the document's own running text? Every
    block between must be one of those (a short block counts as page furniture only across a page break), and within
    a page an interruption cuts a sentence: a part that ends its sentence is not continued by another one."""
    if end - start > MAX_GAP_CHARS:
        return False
    page_break = doc.pages_between(start, end)
    if not page_break and re.match(r"[\s*_)\]]*[.!?]", doc.original[start : start + 8]):
        return False
    blocks = [block.strip() for block in _BLANK_LINE.split(doc.original[start:end]) if block.strip()]
    if not blocks:
        return False
    continued = re.match(r"[^\W\d_]", doc.original[end : end + 1]) is not None and doc.original[end].islower()
    figure = continued and _figure_material(blocks)
    for block in blocks:
        plain = re.sub(r"^[\s*_]+", "", block)
        is_table = all(line.lstrip().startswith("|") for line in block.splitlines() if line.strip())
        furniture = page_break and len(block.split()) <= 15 and not block.lstrip().startswith("#")
        if not (
            is_table or furniture or figure or _CAPTION.match(plain) or _FOOTNOTE.match(block) or _PICTURE.match(block)
        ):
            return False
    return True


def _figure_lines(block: str) -> list[tuple[int, int]] | None:
    """(words, numbers) of each line of a block that reads as a figure's own text — axis ticks, labels, a legend —,
    or None when it reads as running text: a line of more than a few words that are not numbers, a line that ends
    in a function word ("in the") or is one part in three of them, a sentence, a heading, a negation or a
    comparator (which a quote could otherwise silently skip)."""
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    if not lines or lines[0].startswith("#"):
        return None
    counts = []
    for line in lines:
        tokens = [t for t in tokenize_once(line).tokens if t.kind in (WORD, NUMBER)]
        words = [t.text for t in tokens if t.kind == WORD]
        numbers = len(tokens) - len(words)
        function = sum(word in _FUNCTION_WORDS for word in words)
        if len(words) > _FIGURE_LABEL_WORDS and numbers < len(words):
            return None
        if words and ((tokens[-1].kind == WORD and tokens[-1].text in _FUNCTION_WORDS) or 3 * function >= len(words)):
            return None
        if _SENTENCE_END.search(line) and len(words) > 3:
            return None
        counts.append((len(words), numbers))
    if any(is_negation(t.text) or (t.kind == SYMBOL and t.text in "<>≤≥=≠≮≯") for t in tokenize_once(block).tokens):
        return None
    return counts


def _figure_material(blocks: list[str]) -> bool:
    """Are the blocks between two parts of a quote a figure's own text that a PDF's column flow put inside the
    sentence? Every block reads as figure text (``_figure_lines``) and one line at least is axis ticks (mostly
    numbers): a lone word between two parts ("placebo") is never taken for a figure."""
    counts = [_figure_lines(block) for block in blocks]
    if any(found is None for found in counts):
        return False
    return any(numbers >= 2 and numbers >= words for found in counts for words, numbers in found or [])
