"""Quote validation: is a quote really in the document — up to typography only — and where?

``match_quote(quote, scope)`` compares the two as tokens (``grading.text``: case, spacing, hyphenation, ligatures,
dash variants and markup are folded away; words, numbers, signs and comparators are kept) and grades the quote:

1. **exact** — the quote's tokens are a run of the scope's tokens: 1.0, ``verified``.
2. **segmented** — the quote is there in up to three parts, cut only by a real interruption: a page break (the page
   header/footer that comes with it), or blocks that are figure/table captions, tables, footnotes or picture text —
   or the text of a figure the column flow put inside a sentence (short lines, no sentence, and the sentence visibly
   going on after it with a lower-case word).
   Each cut falls at a block boundary, so a quote is never stitched from the document's own sentences: 0.98 (two
   parts) or 0.96 (three), ``verified``.
3. **close** — the best alignment differs only by what an OCR slip or a copy makes: letters inside a word
   (``patlents``), word spacing, an article, a character the PDF could not map (``unreadable``), a decimal point the
   text layer lost (``0 038``). At most 0.94, ``approximate`` from 0.80: a person looks. Never when what differs is
   a number, a sign, a comparator, a negation, or a word of opposite meaning (``lower``/``higher``,
   ``increased``/``decreased``, ``hyper``/``hypo``).

A match that leaves out a negation or a comparator standing just before it in the same sentence ("significant
difference" out of "no significant difference", "0.001" out of "p < 0.001") is ``unverified`` with that reason; an
exact match across an unreadable character is ``approximate``. Anything else is ``unverified`` (0.0), with what
differs in ``note`` when a near miss was found.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from rapidfuzz import fuzz
from rapidfuzz.distance import Levenshtein

from atlas_pipeline.grading.interruptions import MAX_GAP_CHARS, block_ends_after, is_interruption
from atlas_pipeline.grading.meaning import (
    NEGATION_PREFIXES,
    NUMBER_WORDS,
    OPPOSITE_PREFIXES,
    is_negation,
    opposed,
    words,
)
from atlas_pipeline.grading.text import (
    BOUNDARY,
    NUMBER,
    SYMBOL,
    UNREADABLE,
    WORD,
    Token,
    TokenizedText,
    normalize,
    tokenize,
    tokenize_once,
)

__all__ = ["APPROXIMATE", "VERIFIED", "QuoteMatch", "match_quote", "normalize", "tier_for"]

VERIFIED = 0.95
APPROXIMATE = 0.80
CLOSE_CAP = 0.94  # a close match is never verified
LEFT_OUT = 0.5  # found, but the quote leaves out a negation or comparator just before it: unverified
CUT_WORD = 0.9  # found, but starting or ending inside a word: approximate
SEGMENT_CONFIDENCE = {2: 0.98, 3: 0.96}
MIN_PART_TOKENS = 3
MIN_PART_CHARS = 12
MAX_OCCURRENCES = 4096  # exact occurrences looked at (each is one str.find)
MAX_PART_OCCURRENCES = 16  # per part of a segmented quote
MAX_SEGMENT_STEPS = 500  # parts tried in all, so a pathological scope cannot make one quote slow


UNREADABLE_NOTE = "the source text has an unreadable character here"
DECIMAL_NOTE = "the source text seems to have lost a decimal point here"

_ARTICLES = frozenset({"the"})  # "a few" is not "few"
_OCR_PAIRS = (("rn", "m"), ("cl", "d"), ("vv", "w"), ("li", "h"), ("ri", "n"))


@dataclass(frozen=True, slots=True)
class QuoteMatch:
    """How well a quote is grounded: confidence 0–1, its tier, its span in the scope (end-exclusive), and why."""

    confidence: float
    tier: str
    start: int | None
    end: int | None
    method: str  # exact | segmented | close | none
    note: str = ""

    @property
    def found(self) -> bool:
        return self.start is not None


def tier_for(confidence: float) -> str:
    if confidence >= VERIFIED:
        return "verified"
    if confidence >= APPROXIMATE:
        return "approximate"
    return "unverified"


def _result(confidence: float, method: str, span: tuple[int, int] | None, note: str = "") -> QuoteMatch:
    confidence = round(max(0.0, min(1.0, confidence)), 4)
    tier = tier_for(confidence)
    if span is None or tier == "unverified":
        return QuoteMatch(confidence, tier, None, None, method if tier != "unverified" else "none", note)
    return QuoteMatch(confidence, tier, span[0], span[1], method, note)


def _describe(tokens: list[Token]) -> str:
    return " ".join(token.text for token in tokens) or "nothing"


def _judge(quote: list[Token], source: list[Token], gap: str) -> tuple[float, str] | str:
    """One region where quote and source differ: (edit cost, approximate note) when it may be a slip, else the reason
    it may not (a meaning-bearing difference)."""
    q_text = "".join(token.text for token in quote)
    s_text = "".join(token.text for token in source)
    if any(token.kind == UNREADABLE for token in source):
        # an unreadable glyph stands for a sign, a symbol or a letter — never for a digit
        pattern = "".join("[^0-9]{0,2}" if t.kind == UNREADABLE else re.escape(t.text) for t in source)
        if re.fullmatch(pattern, q_text):
            return 0.0, UNREADABLE_NOTE  # no edit cost: the tier is capped below instead
        return f"it differs from the source where the source has an unreadable character ({_describe(source)})"
    if (
        len(quote) == 1
        and len(source) == 2
        and quote[0].kind == NUMBER
        and all(token.kind == NUMBER for token in source)
        and re.fullmatch(r"[ \t]*[.·,]?[ \t]*", gap)
        and q_text == f"{source[0].text}.{source[1].text}"
    ):
        return 0.0, DECIMAL_NOTE
    if any(token.kind == BOUNDARY for token in (*quote, *source)):
        return f"a sentence boundary differs: '{_describe(quote)}' where the source has '{_describe(source)}'"
    protected = [
        token
        for token in (*quote, *source)
        if token.kind in (NUMBER, SYMBOL) or any(c.isdigit() for c in token.text) or token.text in NUMBER_WORDS
    ]
    if protected:
        return f"a number, sign or comparator differs: '{_describe(quote)}' where the source has '{_describe(source)}'"
    negations = [token.text for token in (*quote, *source) if is_negation(token.text)]
    if negations:
        return f"a negation differs: '{_describe(quote)}' where the source has '{_describe(source)}'"
    if not quote or not source:
        extra = quote or source
        if len(extra) == 1 and extra[0].text in _ARTICLES:
            return float(len(extra[0].text)), "close to the source but not identical (an article differs)"
        return f"a word differs: '{_describe(quote)}' where the source has '{_describe(source)}'"
    if q_text == s_text:
        return 1.0, "close to the source but not identical (word spacing)"
    if len(quote) == len(source):
        pairs = list(zip(quote, source, strict=True))
    else:
        pairs = [(Token(q_text, WORD, 0, 0), Token(s_text, WORD, 0, 0))]
    for q_token, s_token in pairs:
        if q_token.text == s_token.text:
            continue
        if opposed(q_token.text, s_token.text):
            return f"a word of different meaning: '{q_token.text}' where the source has '{s_token.text}'"
        if not _slip(q_token.text, s_token.text):
            return f"a word differs: '{q_token.text}' where the source has '{s_token.text}'"
    cost = float(Levenshtein.distance(q_text, s_text))
    return cost, f"close to the source but not identical ('{_describe(quote)}' / source '{_describe(source)}')"


def _slip(a: str, b: str) -> bool:
    """Could ``a`` be ``b`` with an OCR or copying slip: one letter inserted, dropped or replaced (or a glyph pair
    read as one, ``rn``/``m``) — not at the word's start, which would make another word (``tid``/``bid``,
    ``mcg``/``mg``), and not more (``prednisolone``/``prednisone`` are two drugs)?"""
    if len(a) < 3 or len(b) < 3 or a[0] != b[0]:
        return False
    if Levenshtein.distance(a, b) <= 1:
        return not (len(a) <= 4 and a[:2] != b[:2])
    return any(a.replace(pair, single) == b.replace(pair, single) for pair, single in _OCR_PAIRS)


def _edges(doc: TokenizedText, first: int, last: int) -> tuple[float, str] | None:
    """What stands at the edges of a match and changes what the quote says: a negation shortly before it in the same
    clause, or a comparator or the rest of a number right before it (left out: unverified), or an unreadable character
    touching it (a sign or symbol the PDF could not give: approximate). None when the edges are clean."""
    tokens = doc.tokens
    if first > 0:
        before = tokens[first - 1]
        between = doc.original[before.end : tokens[first].start]
        if before.kind == UNREADABLE and not re.search(r"\s", between):
            return 0.9, UNREADABLE_NOTE
        if before.kind == SYMBOL and before.text in "<>≤≥≠≈~≮≯≰≱" and tokens[first].kind == NUMBER:
            return LEFT_OUT, f"the quote leaves out the comparator '{before.text}' just before it in the source"
        if _thousands(doc, first - 1, first):
            return LEFT_OUT, f"the number goes on before the quote ('{before.text} {tokens[first].text}')"
        for back in range(first - 1, max(-1, first - 5), -1):  # the same clause, a few words back
            token, after = tokens[back], tokens[back + 1]
            if token.kind == BOUNDARY or re.search(r"[,;:|]|\n\s*\n", doc.original[token.end : after.start]):
                break
            if token.kind == WORD and is_negation(token.text):
                return LEFT_OUT, f"the quote leaves out the negation '{token.text}' just before it in the source"
    if last + 1 < len(tokens):
        after = tokens[last + 1]
        between = doc.original[tokens[last].end : after.start]
        if after.kind == UNREADABLE and not re.search(r"\s", between):
            return 0.9, UNREADABLE_NOTE
        if _thousands(doc, last, last + 1):
            return LEFT_OUT, f"the number goes on after the quote ('{tokens[last].text} {after.text}')"
    return None


def _thousands(doc: TokenizedText, left: int, right: int) -> bool:
    """Are tokens ``left`` and ``right`` one number written with a thousands space (``12 500``)?"""
    a, b = doc.tokens[left], doc.tokens[right]
    return (
        a.kind == NUMBER
        and b.kind == NUMBER
        and re.fullmatch(r"-?\d{1,3}", a.text) is not None
        and re.fullmatch(r"\d{3}(?:[.,]\d+)?", b.text) is not None
        and re.fullmatch(r"[ \u00a0\u2009\u202f]", doc.original[a.end : b.start]) is not None
    )


# -- the three ways of finding a quote ----------------------------------------------------------------------------


def _occurrences(
    doc: TokenizedText,
    needle: list[str],
    start_token: int = 0,
    stop_char: int | None = None,
    limit: int = MAX_OCCURRENCES,
):
    """Token indices where ``needle`` (token texts) occurs, from ``start_token`` on (and starting before the original
    offset ``stop_char``), at most ``limit`` of them."""
    pattern = " " + " ".join(needle) + " "
    position = doc.positions[start_token] - 1 if start_token < len(doc.positions) else len(doc.joined)
    end = len(doc.joined)
    if stop_char is not None:  # search only up to the first token past stop_char
        stop_token = bisect.bisect_right(doc.starts, stop_char, lo=start_token)
        end = doc.positions[stop_token] + len(pattern) if stop_token < len(doc.positions) else end
    found = 0
    while found < limit:
        position = doc.joined.find(pattern, position, end)
        if position < 0:
            return
        yield doc.token_index(position + 1)
        found += 1
        position += 1


CUT_PREFIXES = words("a ab an anti contra counter de di dis dys il im in ir mal mis non un under over")
CUT_SUFFIXES = ("less", "free", "n't")


def _edge_word(part: str, whole: str, at_start: bool) -> bool:
    """Is the quote's edge word ``part`` a cut-off piece of the source word ``whole`` that changes no meaning? Not
    when the piece is a word that means something by itself at the end (``not`` of ``noted``), when what was cut is
    a prefix that turns the word around (``normal`` of ``abnormal``, ``indicated`` of ``contraindicated``) or a
    suffix that does (``harm`` of ``harmless``), or when digits are involved (``CD4`` of ``CD40``)."""
    if part == whole or any(char.isdigit() for char in part + whole) or is_negation(part):
        return False
    if at_start:
        head = whole[: len(whole) - len(part)]
        return (
            whole.endswith(part)
            and len(head) <= 2
            and head not in CUT_PREFIXES
            and head not in NEGATION_PREFIXES
            and not _opposite_prefix(head)
        )
    rest = whole[len(part) :]
    return whole.startswith(part) and len(part) >= 4 and not rest.startswith(CUT_SUFFIXES)


def _opposite_prefix(head: str) -> bool:
    return any(head in pair for pair in OPPOSITE_PREFIXES)


def _cut_words(quote: list[Token], doc: TokenizedText) -> QuoteMatch | None:
    """The quote found with its first and/or last word cut off in the middle (a copy that started or stopped
    inside a word: "licked on …" of "clicked on …"): approximate, with a note — the words are the document's, but a
    person checks what the cut left out."""
    if len(quote) < 4:
        return None
    for cut_start, cut_end in ((True, True), (True, False), (False, True)):
        inner = quote[int(cut_start) : len(quote) - int(cut_end)]
        if (cut_start and quote[0].kind != WORD) or (cut_end and quote[-1].kind != WORD):
            continue
        for first in _occurrences(doc, [token.text for token in inner]):
            last = first + len(inner) - 1
            if cut_start and (first == 0 or not _edge_word(quote[0].text, doc.tokens[first - 1].text, True)):
                continue
            if cut_end and (
                last + 1 >= len(doc.tokens) or not _edge_word(quote[-1].text, doc.tokens[last + 1].text, False)
            ):
                continue
            begin = doc.tokens[first - 1].end - len(quote[0].text) if cut_start else doc.tokens[first].start
            end = doc.tokens[last + 1].start + len(quote[-1].text) if cut_end else doc.tokens[last].end
            if any(token.kind == UNREADABLE for token in doc.tokens[first : last + 1]):
                return _result(0.9, "exact", (begin, end), UNREADABLE_NOTE)
            edge = _edges(doc, first - int(cut_start), last + int(cut_end))
            if edge:
                return _result(edge[0], "exact", (begin, end), edge[1])
            return _result(CUT_WORD, "exact", (begin, end), "the quote starts or ends inside a word of the source")
    return None


def _exact(quote: list[Token], doc: TokenizedText) -> QuoteMatch | None:
    texts = [token.text for token in quote]
    fallback: QuoteMatch | None = None
    for first in _occurrences(doc, texts):
        last = first + len(texts) - 1
        span = (doc.tokens[first].start, doc.tokens[last].end)
        if any(token.kind == UNREADABLE for token in doc.tokens[first : last + 1]):
            fallback = fallback or _result(0.9, "exact", span, UNREADABLE_NOTE)
            continue
        edge = _edges(doc, first, last)
        if edge:
            fallback = fallback or _result(edge[0], "exact", span, edge[1])
            continue
        return _result(1.0, "exact", span)
    return fallback


def _long_enough(doc: TokenizedText, begin: int, end: int) -> bool:
    """A part of a segmented quote is long enough not to be found by chance."""
    return end - begin >= MIN_PART_TOKENS and sum(len(t.text) for t in doc.tokens[begin:end]) >= MIN_PART_CHARS


def _segmented(quote: list[Token], doc: TokenizedText) -> QuoteMatch | None:
    texts = [token.text for token in quote]
    steps = [0]

    def search(done: int, start_token: int, parts: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
        if done == len(texts):
            return parts if len(parts) > 1 else None
        if len(parts) == max(SEGMENT_CONFIDENCE) or steps[0] > MAX_SEGMENT_STEPS:
            return None
        stop = None if not parts else doc.tokens[parts[-1][1] - 1].end + MAX_GAP_CHARS
        head = texts[done : done + MIN_PART_TOKENS]
        for first in _occurrences(doc, head, start_token, stop, MAX_PART_OCCURRENCES):
            steps[0] += 1
            if steps[0] > MAX_SEGMENT_STEPS:
                return None
            if parts and not (
                block_ends_after(doc, first - 1)
                and is_interruption(doc, doc.tokens[parts[-1][1] - 1].end, doc.tokens[first].start)
            ):
                continue
            length = 0
            while (
                done + length < len(texts)
                and first + length < len(doc.tokens)
                and doc.tokens[first + length].text == texts[done + length]
            ):
                length += 1
            if done + length == len(texts) and parts and _long_enough(doc, first, first + length):
                return [*parts, (first, first + length)]
            for cut in range(length, MIN_PART_TOKENS - 1, -1):
                if (
                    done + cut < len(texts)
                    and block_ends_after(doc, first + cut - 1)
                    and _long_enough(doc, first, first + cut)
                ):
                    found = search(done + cut, first + cut, [*parts, (first, first + cut)])
                    if found:
                        return found
        return None

    parts = search(0, 0, [])
    if not parts:
        return None
    tokens = [token for begin, end in parts for token in doc.tokens[begin:end]]
    span = (doc.tokens[parts[0][0]].start, doc.tokens[parts[-1][1] - 1].end)
    if any(token.kind == UNREADABLE for token in tokens):
        return _result(0.9, "segmented", span, UNREADABLE_NOTE)
    edge = _edges(doc, parts[0][0], parts[-1][1] - 1)
    if edge:
        return _result(edge[0], "segmented", span, edge[1])
    return _result(SEGMENT_CONFIDENCE[len(parts)], "segmented", span)


def _close(quote: list[Token], doc: TokenizedText) -> QuoteMatch:
    """The best alignment within a small window, judged region by region (see the module docstring)."""
    q_joined = " ".join(token.text for token in quote)
    alignment = fuzz.partial_ratio_alignment(q_joined, doc.joined, score_cutoff=70)
    if alignment is None:
        return _result(0.0, "none", None)
    first = max(0, doc.token_index(alignment.dest_start) - 3)
    last = min(len(doc.tokens), doc.token_index(max(alignment.dest_end - 1, 0)) + 4)
    window = list(doc.tokens[first:last])
    if not window:
        return _result(0.0, "none", None)
    q_texts = [t.text for t in quote]
    w_texts = [t.text for t in window]
    # which stretch of the window is the quote? the closest few, judged in turn (the first acceptable one wins)
    candidates = sorted(
        (Levenshtein.distance(q_texts, w_texts[begin:end]), abs(end - begin - len(q_texts)), begin, end)
        for begin in range(min(7, len(window)))
        for end in range(max(begin + 1, len(window) - 7), len(window) + 1)
    )
    rejection = ""
    for _, _, begin, end in candidates:
        verdict = _judge_alignment(quote, window[begin:end], doc, first + begin)
        if isinstance(verdict, QuoteMatch):
            return verdict
        rejection = rejection or verdict
    return _result(0.0, "none", None, rejection)


def _judge_alignment(quote: list[Token], window: list[Token], doc: TokenizedText, first: int) -> QuoteMatch | str:
    """The quote aligned with a stretch of source tokens: an approximate match, or why it is not one."""
    opcodes = Levenshtein.opcodes([t.text for t in quote], [t.text for t in window])
    regions: list[tuple[int, int, int, int]] = []
    for op in opcodes:
        if op.tag == "equal":
            continue
        if regions and regions[-1][1] == op.src_start and regions[-1][3] == op.dest_start:
            regions[-1] = (regions[-1][0], op.src_end, regions[-1][2], op.dest_end)
        else:
            regions.append((op.src_start, op.src_end, op.dest_start, op.dest_end))
    cost, notes = 0.0, []
    for q_start, q_end, s_start, s_end in regions:
        source = window[s_start:s_end]
        gap = doc.original[source[0].end : source[-1].start] if len(source) == 2 else ""
        verdict = _judge(quote[q_start:q_end], source, gap)
        if isinstance(verdict, str):
            return f"not in the source: {verdict}"
        cost += verdict[0]
        if verdict[1] not in notes:
            notes.append(verdict[1])
    length = len(" ".join(token.text for token in quote))
    confidence = min(CLOSE_CAP, 1 - cost / max(length, 1))
    if UNREADABLE_NOTE in notes or DECIMAL_NOTE in notes:
        confidence = min(confidence, 0.9)
    edge = _edges(doc, first, first + len(window) - 1)
    if edge and edge[0] == LEFT_OUT:
        return _result(LEFT_OUT, "close", (window[0].start, window[-1].end), edge[1])
    if edge:
        confidence = min(confidence, edge[0])
        if edge[1] not in notes:
            notes.append(edge[1])
    if confidence < APPROXIMATE:
        return "not in the source: too many differences"
    return _result(confidence, "close", (window[0].start, window[-1].end), "; ".join(notes))


def match_quote(quote: str, scope: str) -> QuoteMatch:
    """Grade ``quote`` against ``scope`` (see the module docstring); spans index into ``scope``."""
    quote_tokens = list(tokenize_once(quote).tokens)
    while quote_tokens and quote_tokens[0].kind == BOUNDARY:  # a quote may start or end with its sentence's stop
        quote_tokens.pop(0)
    while quote_tokens and quote_tokens[-1].kind == BOUNDARY:
        quote_tokens.pop()
    if not quote_tokens:
        return _result(0.0, "none", None, "empty quote")
    doc = tokenize(scope)
    return (
        _exact(quote_tokens, doc)
        or _cut_words(quote_tokens, doc)
        or _segmented(quote_tokens, doc)
        or _close(quote_tokens, doc)
    )
