"""Studies, not files: the reports of one trial recognised as one study.

The unit of a systematic review is the study. A trial's results paper, its JATS, a protocol and a secondary report are
separate documents; they are one study when

- they are copies of one work (``knowledge.duplicates``: a PDF and the JATS of one article), or
- they name the same trial registration in their own text (ClinicalTrials.gov and every WHO ICTRP
  primary registry: NCT, ISRCTN, ACTRN, ChiCTR, IRCT, DRKS, CTRI, JPRN …; ``knowledge.identifiers``), or
- a person linked them (``link``), whatever the rest says; a person can also set a report apart (``set_apart``).

A study is named by its registration when it has one (``NCT00352508``), else by its first report's key.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field

from pydantic import BaseModel, Field

from atlas_pipeline.knowledge.identifiers import REGISTRIES, canonical_registration
from atlas_pipeline.store.files import Store

STUDY_LINKS_PATH = "reviews/study_links.json"


@dataclass(frozen=True)
class Report:
    """What a document tells about which study it reports."""

    key: str
    identifiers: dict[str, list[str]] = field(default_factory=dict)
    duplicate_of: str = ""  # the canonical copy of the same work, when this is a copy


class Link(BaseModel):
    to: str = ""  # the document whose study this one joins ("": set apart, a study of its own)
    by: str
    at: float
    note: str = ""


class StudyLinks(BaseModel):
    """People's word on which reports are one study: it overrides what the identifiers and the text say."""

    links: dict[str, Link] = Field(default_factory=dict)


def load_links(store: Store) -> StudyLinks:
    return StudyLinks.model_validate(store.read_json_or(STUDY_LINKS_PATH, {}))


def link(store: Store, key: str, to: str, by: str, note: str = "") -> None:
    """``key`` reports the same study as ``to`` (``to`` empty: ``key`` is a study of its own)."""
    if key == to:
        raise ValueError("a report cannot be linked to itself")
    links = load_links(store)
    links.links[key] = Link(to=to, by=by, at=time.time(), note=note)
    store.write_json(STUDY_LINKS_PATH, links.model_dump(mode="json"))


def unlink(store: Store, key: str) -> bool:
    """Take a person's link back (False when there was none): the identifiers and the text decide again."""
    links = load_links(store)
    if links.links.pop(key, None) is None:
        return False
    store.write_json(STUDY_LINKS_PATH, links.model_dump(mode="json"))
    return True


class _Sets:
    """Union-find over document keys."""

    def __init__(self, keys: Iterable[str]) -> None:
        self.parent = {key: key for key in keys}

    def find(self, key: str) -> str:
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, a: str, b: str) -> None:
        if a in self.parent and b in self.parent:
            self.parent[self.find(a)] = self.find(b)


FIRST_REGISTRIES = ("nct", "isrctn", "actrn")  # a study is named by one of these first, as it always was


def registrations(report: Report) -> list[str]:
    """The trial registrations the report names, each written one way (older records kept the text's own case)."""
    return [canonical_registration(kind, value) for kind in REGISTRIES for value in report.identifiers.get(kind, [])]


def _naming_order(report: Report) -> dict[str, tuple[int, str]]:
    """Each registration's rank as a study's name: ClinicalTrials.gov, ISRCTN and ANZCTR numbers first (by their
    text, as studies were named before the other registries were read), then the others — so a registry number
    found later never renames a study (its choices are kept under its name)."""
    ranks = {}
    for kind in REGISTRIES:
        for value in report.identifiers.get(kind, []):
            name = canonical_registration(kind, value)
            ranks[name] = (0 if kind in FIRST_REGISTRIES else 1, name)
    return ranks


def group_studies(reports: Iterable[Report], links: StudyLinks | None = None) -> dict[str, str]:
    """Each document's study id."""
    reports = list(reports)
    people = (links or StudyLinks()).links
    sets = _Sets(report.key for report in reports)
    apart = {key for key, made in people.items() if not made.to}
    linked = {key for key, made in people.items() if made.to}
    by_registration: dict[str, str] = {}
    for report in reports:
        if report.key in apart or report.key in linked:
            continue  # a person's word decides for this one
        if report.duplicate_of:
            sets.union(report.key, report.duplicate_of)
            if report.duplicate_of in apart:
                continue  # a copy of a report set apart goes with it, and nowhere else
        for registration in registrations(report):
            if registration in by_registration:
                sets.union(report.key, by_registration[registration])
            else:
                by_registration[registration] = report.key
    for key in linked:
        sets.union(key, people[key].to)
    members: dict[str, list[Report]] = {}
    for report in reports:
        members.setdefault(sets.find(report.key), []).append(report)
    studies: dict[str, str] = {}
    taken: set[str] = set()
    # the registration names the study its reports are grouped in; a report a person set apart, or any other group
    # naming it too, is then named by its own first key — two studies never share a name
    for group in sorted(members.values(), key=lambda g: (any(r.key in apart for r in g), -len(g))):
        ranks = {name: rank for report in group for name, rank in _naming_order(report).items()}
        names = sorted(set(ranks) - taken, key=ranks.__getitem__)
        study = names[0] if names else sorted(report.key for report in group)[0]
        taken.add(study)
        for report in group:
            studies[report.key] = study
    return studies
