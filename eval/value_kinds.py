"""Value support per kind of value: how many unsupported values are graded ``verified`` (must be 0) and how many
genuine ones are, on the corpus' human evidence quotes.

A quote can be in the document and still not say the value. For every human quote (real sentences of real trial
reports) this builds values of each kind (``TemplateField.kind``) a model gives — genuine ones taken from the quote,
and unsupported ones a model gets wrong — and grades each (value, quote) pair exactly as the pipeline does
(``grade_field`` against the document's evidence scope):

- number: each number written in the quote (genuine); the same number with a digit changed, one more, ten times more
  (unsupported);
- text: a run of two or three of the quote's adjacent words, a noun phrase starting and ending with a content word
  and not under a negation (genuine); stop-words only, punctuation only, one common word of a
  long quote, the first and last content words of a long quote (scattered), words of another document's quote
  (unsupported);
- label: the effect measure the quote names (``OR`` for "odds ratio", …, from the template's synonyms) (genuine); every
  other measure, and the conjunction "or" (unsupported);
- judgment: every risk-of-bias judgment with every quote (unsupported: a judgment is a person's, never verified by a
  word; there is no genuine verified one by design);
- reference list: a run of words of a line of the PDF's reference list (unsupported as study data).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.grading.fields import grade_field
from atlas_pipeline.grading.locations import EvidenceScope
from atlas_pipeline.grading.meaning import NEGATIONS, is_negation
from atlas_pipeline.grading.values import COMMON_WORDS, STOPWORDS, numbers_in
from atlas_pipeline.parsing.regions import reference_list

KINDS = ("number", "text", "label", "judgment", "reference list")
_WORD = re.compile(r"[^\W\d_][\w'-]*")
_JUDGMENTS = ("low", "high", "some concerns", "unclear")


@dataclass
class Tally:
    unsupported: int = 0
    unsupported_verified: int = 0
    genuine: int = 0
    genuine_verified: int = 0
    wrongly_verified: list[str] = field(default_factory=list)
    genuine_missed: list[str] = field(default_factory=list)


def _words(quote: str) -> list[str]:
    return _WORD.findall(quote)


def _changed_number(value: float, rng: random.Random) -> float:
    text = f"{value:g}"
    digits = [i for i, c in enumerate(text) if c.isdigit()]
    at = rng.choice(digits)
    new = str((int(text[at]) + rng.randint(1, 8)) % 10)
    changed = text[:at] + new + text[at + 1 :]
    try:
        return float(changed)
    except ValueError:
        return value + 1


def _numbers(quote: str, rng: random.Random) -> Iterator[tuple[object, bool]]:
    written = numbers_in(quote)
    for number in list(dict.fromkeys(written))[:3]:
        value = int(number) if float(number).is_integer() else number
        yield value, True
        for wrong in (_changed_number(number, rng), number + 1, number * 10):
            if not any(abs(wrong - other) < 1e-9 for other in written):
                yield (int(wrong) if float(wrong).is_integer() else round(wrong, 6)), False


_PLAIN_WORD = re.compile(r"[^\W\d_][\w'-]*")
_VERBS = ("was", "were", "is", "are", "be", "been", "had", "has", "have", "did", "does", "than", "that", "which", "who")
_FUNCTION = STOPWORDS | frozenset(_VERBS) | NEGATIONS


def _phrases(quote: str) -> list[str]:
    """Runs of two or three adjacent words of the quote (no number or punctuation inside) that start and end with a
    content word: the noun phrases a model gives as a text value ("usual care", "probiotic group")."""
    raw = quote.split()
    found = []
    for size in (2, 3):
        for start in range(len(raw) - size + 1):
            run = raw[start : start + size]
            body = [word.rstrip(".,;:)") for word in run]
            if any(not _PLAIN_WORD.fullmatch(word) for word in body) or any(
                w != b for w, b in zip(run[:-1], body[:-1], strict=True)
            ):
                continue
            if body[0].lower() in _FUNCTION or body[-1].lower() in _FUNCTION:
                continue
            if any(is_negation(word.lower().strip(".,;:()/")) for word in raw[max(0, start - 3) : start + size]):
                continue  # the words after a negation, without it, say the opposite: not a genuine value
            found.append(" ".join(body))
    return found


def _texts(quote: str, others: list[str], rng: random.Random) -> Iterator[tuple[object, bool]]:
    words = _words(quote)
    content = [w for w in words if w.lower() not in STOPWORDS]
    phrases = _phrases(quote)
    if phrases:
        yield rng.choice(phrases), True
    yield from ((value, False) for value in ("the", "of the", "and", "....", "-", "*"))
    if len(content) > 6:
        common = [w for w in content if w.lower() in COMMON_WORDS]
        if common:
            yield common[0], False
        far = [w for w in content if len(w) > 3]
        first, last = (far[0].lower().removesuffix("s"), far[-1].lower().removesuffix("s")) if far else ("", "")
        lowered = [w.lower().removesuffix("s") for w in words]
        apart = [abs(i - j) for i, a in enumerate(lowered) if a == first for j, b in enumerate(lowered) if b == last]
        if first and first != last and apart and min(apart) > 8:
            yield f"{far[0]} {far[-1]}", False
    own = {w.lower() for w in words}
    for other in rng.sample(others, min(2, len(others))):
        fresh = [w for w in _words(other) if w.lower() not in own and w.lower() not in STOPWORDS and len(w) > 3]
        if len(fresh) >= 2:
            yield " ".join(fresh[:2]), False


def _labels(quote: str, synonyms: dict[str, list[str]]) -> Iterator[tuple[object, bool]]:
    lowered = f" {quote.lower()} "
    for option, words in synonyms.items():
        named = re.search(rf"\b{re.escape(option)}\b", quote) or any(f" {w.lower()}" in lowered for w in words)
        yield option, bool(named)
    yield "or", False


def _judgments(quote: str) -> Iterator[tuple[object, bool]]:
    return ((value, False) for value in _JUDGMENTS)


def _reference_lines(markdown: str) -> list[str]:
    region = reference_list(markdown)
    if region is None:
        return []
    lines = [line.strip() for line in markdown[region.start : region.end].splitlines()]
    return [line for line in lines if len(_words(line)) >= 8][:5]


def value_kinds(documents: dict[str, tuple[EvidenceScope, list[str]]], seed: int = 11) -> dict[str, Tally]:
    """Per value kind, the (value, quote) pairs graded and how many were verified. ``documents``: pmcid → (its
    evidence scope, its human quotes)."""
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    measure = template.field_definition("outcomes[1].effect_measure")
    synonyms = {option: measure.synonyms.get(option, []) for option in measure.enum or [] if option != "other"}
    rng = random.Random(seed)
    every_quote = [quote for _, quotes in documents.values() for quote in quotes]
    tallies = {kind: Tally() for kind in KINDS}

    def grade(kind: str, field_type: str, scope: EvidenceScope, value: object, quote: str, genuine: bool) -> None:
        graded_kind = "judgment" if kind == "judgment" else None
        result = grade_field("x", field_type, "eval", {"value": value, "quote": quote}, scope, synonyms, graded_kind)
        tally = tallies[kind]
        if genuine:
            tally.genuine += 1
            tally.genuine_verified += result.tier == "verified"
            if result.tier != "verified":
                tally.genuine_missed.append(f"{kind}: {value!r} ← {quote[:90]!r}: {result.note}")
        else:
            tally.unsupported += 1
            tally.unsupported_verified += result.tier == "verified"
            if result.tier == "verified":
                tally.wrongly_verified.append(f"{kind}: {value!r} ← {quote[:90]!r}")

    makers: dict[str, tuple[str, Callable[[str], Iterator[tuple[object, bool]]]]] = {
        "number": ("number", lambda quote: _numbers(quote, rng)),
        "text": ("string", lambda quote: _texts(quote, [q for q in every_quote if q != quote], rng)),
        "label": ("enum", lambda quote: _labels(quote, synonyms)),
        "judgment": ("enum", _judgments),
    }
    for scope, quotes in documents.values():
        for quote in quotes:
            if scope.find(quote).match.tier != "verified":
                continue  # value support is measured on quotes that are in the document
            for kind, (field_type, make) in makers.items():
                for value, genuine in make(quote):
                    grade(kind, field_type, scope, value, quote, genuine)
        for line in _reference_lines(scope.markdown):
            words = [w for w in _words(line) if w.lower() not in STOPWORDS]
            grade("reference list", "string", scope, " ".join(words[1:3]), line, False)
    return tallies


def rows(tallies: dict[str, Tally]) -> list[list[object]]:
    out = []
    for kind, tally in tallies.items():
        share = f"{tally.genuine_verified / tally.genuine:.3f}" if tally.genuine else "—"
        out.append([kind, tally.unsupported, tally.unsupported_verified, tally.genuine, tally.genuine_verified, share])
    return out


HEADERS = ["value kind", "unsupported values", "verified", "genuine values", "verified", "genuine verified share"]
