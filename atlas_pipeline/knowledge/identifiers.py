"""Document identifiers found in the text: DOI, PubMed Central id and trial registry numbers.

Only the document's own text counts: the reference list (from a "References" / "Bibliography" / "Literature cited"
heading on) cites other papers, whose DOIs and PMCIDs are not this document's.
"""

from __future__ import annotations

import re

PATTERNS = {
    "doi": re.compile(r"\b10\.\d{4,9}/[^\s\"<>|,;)\]]+", re.IGNORECASE),
    "pmcid": re.compile(r"\bPMC\d{5,9}\b"),
    "nct": re.compile(r"\bNCT\d{8}\b"),
    "isrctn": re.compile(r"\bISRCTN\s?\d{8}\b"),
    "actrn": re.compile(r"\bACTRN\d{14}\b"),
}


_REFERENCES = re.compile(
    r"^[^\w\n]{0,8}(references?|bibliography|literature cited|works cited|reference list)[^\w\n]{0,8}$",
    re.IGNORECASE | re.MULTILINE,
)


_OWN_LINE = re.compile(r"^[^\w\n]{0,4}(doi\s*:|cite this article)", re.IGNORECASE | re.MULTILINE)


def own_text(text: str) -> str:
    """The text before its reference list (the whole text when it has none), plus lines after it that name the
    document itself ("doi:10.1186/…", "Cite this article as: …")."""
    headings = list(_REFERENCES.finditer(text))
    if not headings:
        return text
    start = headings[-1].start()
    after = text[start:]
    own_lines = [after[m.start() : after.find("\n", m.start()) % (len(after) + 1)] for m in _OWN_LINE.finditer(after)]
    return "\n".join([text[:start], *own_lines])


def find_identifiers(text: str, limit: int = 5) -> dict[str, list[str]]:
    """Distinct identifiers per kind, in order of first appearance (at most ``limit`` each), outside the reference
    list."""
    text = own_text(text)
    found: dict[str, list[str]] = {}
    for kind, pattern in PATTERNS.items():
        values: list[str] = []
        for match in pattern.finditer(text):
            value = match.group(0).rstrip(".").replace(" ", "")
            if any(value.startswith(known + ".") for known in values):
                continue  # a figure's or table's DOI within the article's own (10.1371/….g001)
            if value not in values:
                values.append(value)
            if len(values) >= limit:
                break
        if values:
            found[kind] = values
    return found
