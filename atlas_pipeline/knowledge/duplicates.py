"""One work under different bytes — a PDF and the JATS XML of one article, a re-downloaded PDF with other metadata,
a preprint and its publication — recognised from the document's own identifiers and from its text.

Each text gets a ``Fingerprint``: its own DOI / PMCID / trial registrations (``knowledge.identifiers``, reference
list excluded) and the set of its 5-word shingles (hashed). Candidates come from a MinHash LSH index (datasketch)
and from shared identifiers; a pair is a duplicate when

- it shares a DOI or PMCID and at least ``ID_CONTAINMENT`` of the shorter text's shingles (or the shorter text is
  too short to compare: under ``MIN_SHINGLES``, an abstract page, say), or
- it shares a trial registration and at least ``REGISTRATION_CONTAINMENT`` (a protocol and its results paper share
  the registration, not the text), or
- its DOIs do not conflict and the texts are near copies (Jaccard ≥ ``TEXT_JACCARD`` or containment ≥
  ``TEXT_CONTAINMENT``), or — DOIs differing, as a preprint's and its publication's do — containment ≥
  ``CONFLICT_CONTAINMENT``.

Duplicates are grouped transitively; the canonical document of a group is the most complete version of record (not a
preprint, then PDF over JATS over HTML over plain text, then the longest text, then the one seen first). A person can
split a document out of its group (``atlas duplicates split KEY``): it is then never grouped again until joined back.
"""

from __future__ import annotations

import base64
import re
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from atlas_pipeline.knowledge.identifiers import REGISTRIES, find_identifiers

SHINGLE_WORDS = 5
NUM_PERM = 128
LSH_THRESHOLD = 0.3
ID_CONTAINMENT = 0.25
REGISTRATION_CONTAINMENT = 0.6
TEXT_JACCARD = 0.5
TEXT_CONTAINMENT = 0.8
CONFLICT_CONTAINMENT = 0.9
MIN_SHINGLES = 50  # shorter texts (an image, an error page) are compared by identifiers only
PREPRINT_DOI_PREFIXES = ("10.1101/", "10.21203/", "10.2196/preprints", "10.20944/preprints", "10.31234/", "10.48550/")
MEDIA_PRIORITY = {"application/pdf": 4, "application/jats+xml": 3, "text/html": 2, "text/markdown": 1, "text/plain": 1}
_WORD = re.compile(r"[^\W_]+")


@dataclass(frozen=True)
class Fingerprint:
    """What duplicates are recognised from, for one text (cached per sha256: derived, rebuilt at will)."""

    sha256: str
    identifiers: dict[str, list[str]]
    shingles: np.ndarray  # sorted unique uint32 hashes of the text's 5-word shingles

    @property
    def dois(self) -> set[str]:
        return {doi.lower() for doi in self.identifiers.get("doi", [])}

    @property
    def preprint(self) -> bool:
        return any(doi.startswith(PREPRINT_DOI_PREFIXES) for doi in self.dois)

    def ids(self, *kinds: str) -> set[str]:
        return {value.lower() for kind in kinds for value in self.identifiers.get(kind, [])}

    def named(self, lowered: set[str], *kinds: str) -> list[str]:
        """The identifiers of ``kinds`` as the text writes them, of those in ``lowered``."""
        return sorted({v for kind in kinds for v in self.identifiers.get(kind, []) if v.lower() in lowered})

    def to_json(self) -> dict:
        return {
            "sha256": self.sha256,
            "identifiers": self.identifiers,
            "shingles": base64.b64encode(self.shingles.astype("<u4").tobytes()).decode(),
        }

    @classmethod
    def from_json(cls, data: dict) -> Fingerprint:
        shingles = np.frombuffer(base64.b64decode(data["shingles"]), dtype="<u4").astype(np.uint32)
        return cls(data["sha256"], data["identifiers"], shingles)


def fingerprint(sha256: str, text: str) -> Fingerprint:
    """Identifiers and shingles of ``text`` (markdown: its markup is not words, so it does not count)."""
    words = _WORD.findall(text.lower())
    grams = (" ".join(words[i : i + SHINGLE_WORDS]) for i in range(max(0, len(words) - SHINGLE_WORDS + 1)))
    hashes = np.fromiter((zlib.crc32(gram.encode()) for gram in grams), dtype=np.uint32)
    return Fingerprint(sha256, find_identifiers(text), np.unique(hashes))


@dataclass(frozen=True)
class Member:
    """A document as grouped: its key, fingerprint, media type (for the canonical choice)."""

    key: str
    fingerprint: Fingerprint
    media_type: str = ""
    first_seen: str = ""  # when the knowledge base first had it (ISO time): the earlier copy stays canonical


@dataclass(frozen=True)
class Evidence:
    """Why two documents are one work, in words a person can check."""

    jaccard: float
    containment: float
    shared: dict[str, list[str]]
    rule: str

    def describe(self) -> str:
        labels = {"doi": "DOI", "pmcid": "PMCID", "registration": "trial registration"}
        ids = "; ".join(f"same {labels[kind]} {', '.join(values)}" for kind, values in self.shared.items())
        text = f"{self.containment:.0%} of the shorter text's passages shared (Jaccard {self.jaccard:.2f})"
        return f"{ids}; {text}" if ids else text


def compare(a: Fingerprint, b: Fingerprint) -> Evidence | None:
    """The evidence that ``a`` and ``b`` are one work, or None."""
    inter = len(np.intersect1d(a.shingles, b.shingles, assume_unique=True))
    smaller = min(len(a.shingles), len(b.shingles))
    union = len(a.shingles) + len(b.shingles) - inter
    jaccard = inter / union if union else 0.0
    containment = inter / smaller if smaller else 0.0
    shared = {
        kind: a.named(a.ids(*kinds) & b.ids(*kinds), *kinds)
        for kind, kinds in (("doi", ("doi",)), ("pmcid", ("pmcid",)), ("registration", REGISTRIES))
    }
    shared = {kind: values for kind, values in shared.items() if values}
    conflict = bool(a.dois and b.dois and not a.dois & b.dois)
    comparable = smaller >= MIN_SHINGLES
    rule = ""
    if (shared.get("doi") or shared.get("pmcid")) and (containment >= ID_CONTAINMENT or not comparable):
        rule = "identifier"
    elif shared.get("registration") and comparable and containment >= REGISTRATION_CONTAINMENT:
        rule = "registration"
    elif comparable and not conflict and (jaccard >= TEXT_JACCARD or containment >= TEXT_CONTAINMENT):
        rule = "text"
    elif comparable and conflict and containment >= CONFLICT_CONTAINMENT:
        rule = "text (different DOIs: a preprint and its publication?)"
    return Evidence(round(jaccard, 3), round(containment, 3), shared, rule) if rule else None


def _minhash(fp: Fingerprint):
    from datasketch import MinHash

    sketch = MinHash(num_perm=NUM_PERM, seed=7, hashfunc=int)
    sketch.update_batch(fp.shingles.tolist())
    return sketch


def candidate_pairs(members: list[Member]) -> set[tuple[int, int]]:
    """Pairs worth comparing: similar sketches (LSH) or a shared identifier."""
    from datasketch import MinHashLSH

    pairs: set[tuple[int, int]] = set()
    lsh = MinHashLSH(threshold=LSH_THRESHOLD, num_perm=NUM_PERM)
    for index, member in enumerate(members):
        if len(member.fingerprint.shingles) < MIN_SHINGLES:
            continue
        sketch = _minhash(member.fingerprint)
        for other in lsh.query(sketch):
            pairs.add((other, index))
        lsh.insert(index, sketch)
    by_id: dict[str, list[int]] = {}
    for index, member in enumerate(members):
        for value in member.fingerprint.ids("doi", "pmcid", *REGISTRIES):
            by_id.setdefault(value, []).append(index)
    for indexes in by_id.values():
        if len(indexes) > 50:  # an identifier on everything (a journal's own DOI prefix page?) says nothing
            continue
        pairs.update((i, j) for n, i in enumerate(indexes) for j in indexes[n + 1 :])
    return pairs


@dataclass
class Group:
    canonical: str
    members: list[str]
    evidence: dict[str, str] = field(default_factory=dict)  # member key → why it is a duplicate of the canonical


def _canonical_order(member: Member) -> tuple:
    """Sorts the best canonical candidate first: not a preprint, PDF > JATS > HTML > text, the longest text, the
    first seen, then the key."""
    fp = member.fingerprint
    rank = (fp.preprint, -MEDIA_PRIORITY.get(member.media_type, 0), -len(fp.shingles))
    return (*rank, member.first_seen or "~", member.key)


def group_duplicates(members: Iterable[Member], splits: Iterable[str] = ()) -> list[Group]:
    """Groups of two or more documents that are one work, canonical first; keys in ``splits`` stay alone."""
    members = sorted(members, key=lambda m: m.key)
    split = set(splits)
    parent = list(range(len(members)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    found: dict[tuple[int, int], Evidence] = {}
    for i, j in sorted(candidate_pairs(members)):
        if members[i].key in split or members[j].key in split:
            continue
        evidence = compare(members[i].fingerprint, members[j].fingerprint)
        if evidence:
            found[(i, j)] = evidence
            parent[root(i)] = root(j)
    clusters: dict[int, list[int]] = {}
    for index in range(len(members)):
        clusters.setdefault(root(index), []).append(index)
    groups = []
    for indexes in clusters.values():
        if len(indexes) < 2:
            continue
        best = min(indexes, key=lambda i: _canonical_order(members[i]))
        group = Group(canonical=members[best].key, members=[members[i].key for i in indexes])
        for i in indexes:
            if i == best:
                continue
            direct = found.get((min(i, best), max(i, best)))
            if direct is not None:
                group.evidence[members[i].key] = direct.describe()
                continue
            # grouped through another member: name it and say why this one is the same work as it
            j, evidence = next((b if a == i else a, e) for (a, b), e in found.items() if i in (a, b))
            group.evidence[members[i].key] = f"same work as {members[j].key} ({evidence.describe()})"
        groups.append(group)
    return sorted(groups, key=lambda g: g.canonical)


def duplicate_of(groups: Iterable[Group]) -> dict[str, tuple[str, str]]:
    """key → (canonical key, evidence) for every document that is not its group's canonical one."""
    return {key: (group.canonical, group.evidence[key]) for group in groups for key in group.evidence}
