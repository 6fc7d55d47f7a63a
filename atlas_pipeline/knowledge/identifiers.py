"""Document identifiers found in the text: DOI, PubMed Central id and trial registry numbers (every WHO ICTRP
primary registry's, written one way each).

Only the document's own text counts: the reference list (from a "References" / "Bibliography" / "Literature cited"
heading on) cites other papers, whose DOIs and PMCIDs are not this document's.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


def _spaceless(value: str) -> str:
    return re.sub(r"\s+", "", value).upper()


def _after_prefix(prefix: str) -> Callable[[str], str]:
    """The registry's own spelling of its prefix ("ChiCTR"), the rest upper case and without spaces."""
    return lambda value: prefix + _spaceless(value)[len(prefix) :]


_JPRN_PREFIXES = {"umin": "UMIN", "jrct": "jRCT", "japiccti": "JapicCTI", "jma-iia": "JMA-IIA"}


def _jprn(value: str) -> str:
    """A JPRN number without "JPRN-", its source's prefix as the source writes it, a jRCT's letter in lower case
    ("JPRN-JRCTS031180001" → "jRCTs031180001")."""
    found = re.match(r"(?i)^(?:JPRN-)?(umin|jrct|japiccti|jma-iia)(.*)$", value.strip())
    if found is None:
        return value.strip()
    prefix, rest = _JPRN_PREFIXES[found[1].lower()], found[2]
    return prefix + (rest.lower() if prefix == "jRCT" else rest.upper())


@dataclass(frozen=True)
class Registry:
    """A trial registry: its name, how its numbers are written, and one way of writing each (so a paper's "NCT
    00352508" and another's "NCT00352508" name one trial)."""

    name: str
    pattern: re.Pattern[str]
    canonical: Callable[[str], str] = _spaceless


# Every primary registry of the WHO International Clinical Trials Registry Platform, and ClinicalTrials.gov
# (https://www.who.int/clinical-trials-registry-platform/network/primary-registries); the number formats are each
# registry's own (examples in atlas_pipeline_tests/unit/knowledge/test_identifiers.py).
_I = re.IGNORECASE
TRIAL_REGISTRIES: dict[str, Registry] = {
    "nct": Registry("ClinicalTrials.gov", re.compile(r"\bNCT\s?\d{8}\b", _I)),
    "isrctn": Registry("ISRCTN registry", re.compile(r"\bISRCTN\s?\d{8}\b", _I)),
    "actrn": Registry("ANZCTR (Australia and New Zealand)", re.compile(r"\bACTRN\s?\d{14}\b", _I)),
    "chictr": Registry(
        "ChiCTR (China)", re.compile(r"\bChiCTR(?:-[A-Z]{2,4}-)?\d{8,10}\b", _I), _after_prefix("ChiCTR")
    ),
    "drks": Registry("DRKS (Germany)", re.compile(r"\bDRKS\s?\d{8}\b", _I)),
    "ctri": Registry("CTRI (India)", re.compile(r"\bCTRI\s?/\s?\d{4}\s?/\s?\d{2,3}\s?/\s?\d{6}\b", _I)),
    "jprn": Registry(  # JPRN's sources write their own prefixes, with or without "JPRN-"
        "JPRN (Japan)",
        re.compile(r"(?<![\w-])(?:JPRN-)?(?:UMIN\d{9}|jRCT[a-z]?\d{7,10}|JapicCTI-\d{6}|JMA-IIA\d{5})\b", _I),
        lambda value: _jprn(value),
    ),
    "irct": Registry("IRCT (Iran)", re.compile(r"\bIRCT\d{6,16}N\d{1,3}\b", _I)),
    "kct": Registry("CRiS (Korea)", re.compile(r"\bKCT\d{7}\b")),
    "pactr": Registry("PACTR (Pan African)", re.compile(r"\bPACTR\d{15}\b", _I)),
    "rebec": Registry(
        "ReBEC (Brazil)", re.compile(r"\bRBR-[0-9a-z]{6,9}\b", _I), lambda value: "RBR-" + value[4:].lower()
    ),
    "tctr": Registry("TCTR (Thailand)", re.compile(r"\bTCTR\d{11}\b", _I)),
    "slctr": Registry("SLCTR (Sri Lanka)", re.compile(r"\bSLCTR\s?/\s?\d{4}\s?/\s?\d{3}\b", _I)),
    "rpcec": Registry("RPCEC (Cuba)", re.compile(r"\bRPCEC\d{8}\b", _I)),
    "lbctr": Registry("LBCTR (Lebanon)", re.compile(r"\bLBCTR\d{10}\b", _I)),
    "itmctr": Registry("ITMCTR (traditional medicine)", re.compile(r"\bITMCTR\d{10,12}\b", _I)),
    "repec": Registry("REPEC (Peru)", re.compile(r"\bPER-\d{3}-\d{2}\b")),
    "ntr": Registry("Netherlands Trial Register / OMON", re.compile(r"\b(?:NTR\d{3,5}|NL-OMON\d{3,6})\b")),
    "euctr": Registry(  # EudraCT and CTIS numbers are bare digits: only after the register's name
        "EU Clinical Trials Register / CTIS",
        re.compile(r"\b(?:EudraCT|EU\s?-?CTR?|CTIS)\b[^\n\d]{0,30}(\d{4}-\d{6}-\d{2}(?:-\d{2})?)\b", _I),
        lambda value: "EUCTR" + re.search(r"\d{4}-\d{6}-\d{2}(?:-\d{2})?", value).group(0),  # type: ignore[union-attr]
    ),
}
REGISTRIES = tuple(TRIAL_REGISTRIES)  # the kinds that are trial registrations (``knowledge.studies`` names by them)

PATTERNS: dict[str, re.Pattern[str]] = {
    "doi": re.compile(r"\b10\.\d{4,9}/[^\s\"<>|,;)\]]+", re.IGNORECASE),
    "pmcid": re.compile(r"\bPMC\d{5,9}\b"),
    **{kind: registry.pattern for kind, registry in TRIAL_REGISTRIES.items()},
}


def canonical_registration(kind: str, value: str) -> str:
    """A registration written the registry's one way (a record made before this rule kept the text's spelling)."""
    registry = TRIAL_REGISTRIES.get(kind)
    return registry.canonical(value) if registry is not None and registry.pattern.search(value) else value.upper()


def registry_name(kind: str) -> str:
    """The registry a kind of identifier belongs to ("IRCT (Iran)"), or the kind itself."""
    return TRIAL_REGISTRIES[kind].name if kind in TRIAL_REGISTRIES else kind


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
            if kind in TRIAL_REGISTRIES:
                value = TRIAL_REGISTRIES[kind].canonical(match.group(0))
            else:
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
