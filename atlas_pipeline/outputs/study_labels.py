"""One name per study wherever a study is named — RevMan's files, the forest plots, the review page: its first
author and year ("Morales 2018"), made unique with a, b … as Cochrane does; the study's own id (a registration,
or its first report) when no author is known."""

from __future__ import annotations

import itertools
import re
import string
from collections.abc import Iterator
from typing import Any

from atlas_pipeline.outputs.study_report import Study


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


SUFFIXES = frozenset({"jr", "sr", "ii", "iii", "iv"})
GROUP_AUTHOR = re.compile(r"(?i)\b(group|collaborat\w*|investigators|consortium|network|committee|team|trial)\b")


def surname_of(author: str) -> str:
    """The family name of an author as papers write it — "DeWalt, Darren A", "DeWalt DA", "Smith J.A.",
    "Darren A. DeWalt", "John Smith Jr" — or a group author's whole name ("WHO Collaborative Group")."""
    author = " ".join(author.split())
    if GROUP_AUTHOR.search(author):
        return author
    if "," in author:
        return author.split(",", 1)[0].strip()
    words = [word for word in author.split() if word.lower().strip(".") not in SUFFIXES]
    initials = [bool(re.fullmatch(r"(?:[A-Z]\.?-?){1,3}", word)) for word in words]
    if len(words) > 1 and initials[-1] and not any(initials[:-1]):
        return words[0]  # Vancouver style: the initials follow the family name ("DeWalt DA", "Smith J.A.")
    return words[-1] if words else ""  # "Darren A DeWalt", "Darren A LI"


YEAR = re.compile(r"\b(19|20)\d\d\b")


def study_year(study: Study) -> str:
    """The study's year: the one its ``study_id`` value names, else the first its reports give (any of them)."""
    value = study.values.get("study_id")
    found = YEAR.search(_text(value.value) if value is not None and value.state != "conflict" else "")
    if found:
        return found.group(0)
    year = next((r.parse.year for r in study.reports if r.parse and r.parse.year), None)
    return str(year) if year else ""


def study_labels(studies: list[Study]) -> dict[str, str]:
    """Each study's RevMan name (``Study``): first author and year, made unique with a, b … as Cochrane does."""
    wanted: dict[str, str] = {}
    for study in studies:
        value = study.values.get("study_id")
        label = _text(value.value) if value is not None and value.state != "conflict" else ""
        if not label:
            parsed = next((r.parse for r in study.reports if r.parse and r.parse.authors), None)
            label = surname_of(parsed.authors[0]) if parsed is not None else ""
        year = study_year(study)
        if label and year and not YEAR.search(label):  # "Adams" → "Adams 2019": Cochrane's "Author Year"
            label = f"{label} {year}"
        wanted[study.id] = label or study.id
    counts: dict[str, int] = {}
    for label in wanted.values():
        counts[label.casefold()] = counts.get(label.casefold(), 0) + 1
    taken = {label.casefold() for label in wanted.values() if counts[label.casefold()] == 1}
    labels = {}
    pending: dict[str, Iterator[str]] = {}  # per shared label, the suffixes not yet tried (each tried once)
    for study_id, label in wanted.items():
        if counts[label.casefold()] > 1:
            suffixes = pending.setdefault(label.casefold(), _suffixes())
            label = next(f"{label}{suffix}" for suffix in suffixes if f"{label}{suffix}".casefold() not in taken)
            taken.add(label.casefold())
        labels[study_id] = label
    return labels


def _suffixes() -> Iterator[str]:
    """a, b, … z, then aa, ab … zz, then aaa …: as many as a knowledge base needs (thousands of "Wang 2020")."""
    for length in itertools.count(1):
        for letters in itertools.product(string.ascii_lowercase, repeat=length):
            yield "".join(letters)
