"""Duplicate groups kept in the artifact store: fingerprints cached per text (derived), the groups found, and the
splits people made (a decision: kept, migrated, never recomputed)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from pydantic import BaseModel, Field

from atlas_pipeline.knowledge.duplicates import (
    Fingerprint,
    Group,
    Member,
    duplicate_of,
    fingerprint,
    group_duplicates,
)
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import DUPLICATE_GROUPS_PATH, DUPLICATE_SPLITS_PATH, fingerprint_path


class Split(BaseModel):
    by: str
    at: float
    note: str = ""


class DuplicateGroups(BaseModel):
    """The groups as last computed: ``duplicate_of`` maps each non-canonical document to (canonical, evidence)."""

    computed_at: float = 0.0
    documents: int = 0
    groups: list[dict] = Field(default_factory=list)
    duplicate_of: dict[str, tuple[str, str]] = Field(default_factory=dict)


def load_fingerprint(store: Store, sha256: str, parser: str, text_path: str) -> Fingerprint | None:
    """The fingerprint of a parsed text, computed once per text — per bytes and parser (None when the text is not
    there)."""
    cached = store.read_json_or(fingerprint_path(sha256, parser), None)
    if cached:
        return Fingerprint.from_json(cached)
    try:
        text = store.read_text(text_path)
    except FileNotFoundError:
        return None
    value = fingerprint(sha256, text)
    store.write_json(fingerprint_path(sha256, parser), value.to_json())
    return value


class Splits(BaseModel):
    """Documents people split out of their group, and when the splits last changed (the aggregates then refresh)."""

    changed_at: float = 0.0
    splits: dict[str, Split] = Field(default_factory=dict)


def load_splits(store: Store) -> Splits:
    return Splits.model_validate(store.read_json_or(DUPLICATE_SPLITS_PATH, {}))


def split(store: Store, key: str, by: str, note: str = "") -> None:
    """A person says ``key`` is its own work: it leaves its group and is never grouped again until joined."""
    splits = load_splits(store)
    splits.splits[key] = Split(by=by, at=time.time(), note=note)
    splits.changed_at = time.time()
    store.write_json(DUPLICATE_SPLITS_PATH, splits.model_dump(mode="json"))


def join(store: Store, key: str) -> bool:
    """Undo a split; False when ``key`` was not split."""
    splits = load_splits(store)
    if splits.splits.pop(key, None) is None:
        return False
    splits.changed_at = time.time()
    store.write_json(DUPLICATE_SPLITS_PATH, splits.model_dump(mode="json"))
    return True


def compute_groups(store: Store, members: Iterable[Member]) -> DuplicateGroups:
    members = list(members)
    groups: list[Group] = group_duplicates(members, load_splits(store).splits)
    result = DuplicateGroups(
        computed_at=time.time(),
        documents=len(members),
        groups=[{"canonical": g.canonical, "members": g.members, "evidence": g.evidence} for g in groups],
        duplicate_of=duplicate_of(groups),
    )
    store.write_json(DUPLICATE_GROUPS_PATH, result.model_dump(mode="json"))
    return result


def load_groups(store: Store) -> DuplicateGroups:
    return DuplicateGroups.model_validate(store.read_json_or(DUPLICATE_GROUPS_PATH, {}))
