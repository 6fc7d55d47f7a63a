"""Document identifiers found in the text: DOI, PubMed Central id and trial registry numbers."""

from __future__ import annotations

import re

PATTERNS = {
    "doi": re.compile(r"\b10\.\d{4,9}/[^\s\"<>|,;)\]]+", re.IGNORECASE),
    "pmcid": re.compile(r"\bPMC\d{5,9}\b"),
    "nct": re.compile(r"\bNCT\d{8}\b"),
    "isrctn": re.compile(r"\bISRCTN\s?\d{8}\b"),
    "actrn": re.compile(r"\bACTRN\d{14}\b"),
}


def find_identifiers(text: str, limit: int = 5) -> dict[str, list[str]]:
    """Distinct identifiers per kind, in order of first appearance (at most ``limit`` each)."""
    found: dict[str, list[str]] = {}
    for kind, pattern in PATTERNS.items():
        values: list[str] = []
        for match in pattern.finditer(text):
            value = match.group(0).rstrip(".").replace(" ", "")
            if value not in values:
                values.append(value)
            if len(values) >= limit:
                break
        if values:
            found[kind] = values
    return found
