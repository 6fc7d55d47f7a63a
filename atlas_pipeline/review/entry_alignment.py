"""The same entry added by two people is one entry: person-added entries of a repeating group lined up by identity.

Two extractors working independently each add the trial's outcomes to the grid; the page numbers a person's entries
from ``ADDED_FROM`` in the order they are added, so "Duration of diarrhea, after randomization" may be entry 1001 for
one and 1002 for the other. Counted as two entries the outcome would be two rows in every analysis file; compared as
two, nobody would see that the extractors differ on its SD. Here an entry one person added takes the number of the
first entry with the same identity values (outcome, time point, arms — the group's ``identity`` as people corrected
it, compared without case or spacing) that is not already this person's: the model's entry, or the entry another
person added first (a person's own second entry of one outcome stays apart: a duplicate for them to reject). Their
decisions then meet cell by cell on one field, where ``review.final_values`` compares them like any two reviewers'.

Nothing in the log is rewritten: the alignment is made each time the log is merged, so a correction of an identity
cell moves an entry to (or away from) its match.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from atlas_pipeline.core.templates import ADDED_FROM, TemplateModule, entry_field_name, entry_field_parts
from atlas_pipeline.review.decisions import Decision


def _folded(value: Any) -> str:
    return " ".join(str(value).split()).casefold() if value not in (None, "", []) else ""


def _identity_of(values: Mapping[str, Any], identity: Sequence[str]) -> tuple[str, ...] | None:
    key = tuple(_folded(values.get(name)) for name in identity)
    return key if key and key[0] else None  # an entry is known by its first identity field at least


def align_entries(
    decisions: list[Decision], extracted: Mapping[str, Any], groups: Sequence[TemplateModule]
) -> list[Decision]:
    """``decisions`` (the ones that count, oldest first) with each person-added entry's fields moved onto its
    match's entry number (see the module)."""
    moves: dict[tuple[str, int], int] = {}
    for group in groups:
        identity = [name for name in group.identity if name in {f.name for f in group.fields}]
        if not identity:
            continue
        entries: dict[int, dict[str, Any]] = {}
        for name, item in extracted.items():
            owner, number, bare = entry_field_parts(name)
            if owner == group.name and number is not None and bare in identity and isinstance(item, dict):
                entries.setdefault(number, {})[bare] = item.get("value")
        author: dict[int, str] = {}
        added: dict[int, dict[str, Any]] = {}
        for decision in decisions:
            owner, number, bare = entry_field_parts(decision.field)
            if owner != group.name or number is None or decision.role == "adjudicator" or bare not in identity:
                continue
            value = decision.value if decision.action == "correct" else None
            if number in entries:  # a model's entry as people corrected its identity
                if decision.action == "correct":
                    entries[number][bare] = value
            elif number >= ADDED_FROM:
                author.setdefault(number, decision.reviewer)
                if decision.reviewer == author[number]:
                    added.setdefault(number, {})[bare] = value
        known: dict[tuple[str, ...], list[int]] = {}
        merged: dict[int, set[str]] = {}  # per entry, the people whose added entry it is (their own, or lined up)
        for number in sorted(entries):
            key = _identity_of(entries[number], identity)
            if key is not None:
                known.setdefault(key, []).append(number)
        for number in sorted(added):
            key = _identity_of(added[number], identity)
            if key is None:
                continue
            person = author[number]
            match = next((n for n in known.get(key, []) if person not in merged.get(n, set())), None)
            if match is None:  # the first of its kind, or this person's own second entry of it: its own entry
                known.setdefault(key, []).append(number)
                merged[number] = {person}
                continue
            moves[(group.name, number)] = match
            merged.setdefault(match, set()).add(person)
    if not moves:
        return decisions
    aligned = []
    for decision in decisions:
        owner, number, bare = entry_field_parts(decision.field)
        target = moves.get((owner, number)) if number is not None else None
        if target is None:
            aligned.append(decision)
            continue
        field = entry_field_name(owner, target, bare)
        made_on = decision.made_on
        if field in extracted or any(entry_field_parts(name)[:2] == (owner, target) for name in extracted):
            item = extracted.get(field) or {}  # a model's entry: decided as on the value it gives
            made_on = made_on.model_copy(
                update={"model_value": item.get("value"), "tier": str(item.get("tier") or ""), "entry": {}}
            )
        aligned.append(decision.model_copy(update={"field": field, "made_on": made_on}))
    return aligned
