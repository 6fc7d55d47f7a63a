"""What each document's state is built from, as one short stamp per document: what is made from a state (its rows
in the exports, its part of the task completion, its search entry) is made again only when its stamp changes.

A state is built from the document's records (``documents/<key>/``: snapshot, parse, extraction, review, the kept
extraction), its decision log (``reviews/decisions/<key>/``), what Dagster says of its partition (``RunFacts``), its
catalog entry (where its source is, whether it was removed) and the deployment's settings that weigh them (the
extraction version, the final-values policy, the secrets to mask, the code itself). The records are versioned by one
listing of the store (``Store.versions``), never read: an unchanged document costs a line of that listing.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict
from functools import cache
from pathlib import Path

from atlas_pipeline.core.document_status import RunFacts
from atlas_pipeline.knowledge.catalog import Catalog
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import DOCUMENTS


@cache
def code_fingerprint() -> str:
    """A hash of Atlas's own code: what a state and its rows are made by (an upgrade remakes every one)."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*.py")):
        digest.update(path.relative_to(package).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def settings_stamp(*parts: object) -> str:
    """What weighs every document alike (the extraction version, the final-values policy, the template, the
    secrets masked), with the code: a change of any remakes everything made from the states."""
    canonical = json.dumps([code_fingerprint(), *parts], sort_keys=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def record_versions(store: Store) -> dict[str, list[str]]:
    """Per document key, its record files with their versions (one listing of ``documents/``)."""
    by_key: dict[str, list[str]] = {}
    prefix = f"{DOCUMENTS}/"
    for path, version in store.versions(DOCUMENTS).items():
        key, _, name = path.removeprefix(prefix).rpartition("/")
        if key:
            by_key.setdefault(key, []).append(f"{name}={version}")
    return by_key


def document_stamps(
    keys: Iterable[str],
    versions: Mapping[str, list[str]],
    marks: Mapping[str, str],
    runs: Mapping[str, RunFacts],
    catalog: Catalog,
    settings: str,
) -> dict[str, str]:
    """Per document, a stamp of everything its state is built from (see the module's docstring)."""
    stamps = {}
    for key in keys:
        entry = catalog.entries.get(key)
        material = [
            settings,
            sorted(versions.get(key, [])),
            marks.get(key, ""),
            asdict(runs[key]),
            [entry.source_path, entry.removed] if entry else None,
        ]
        stamps[key] = hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]
    return stamps
