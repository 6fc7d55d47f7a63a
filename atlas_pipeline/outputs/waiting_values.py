"""The values an analysis would read that the team's process has not made final (``review.finality``): disputed,
waiting for the second extraction, never compared, awaiting a person — each named with what it waits for and who
can settle it, for ``atlas_analysis_excluded.csv`` and the Analysis page, never pooled."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from atlas_pipeline.core.templates import entry_field_parts
from atlas_pipeline.review.decisions import value_text
from atlas_pipeline.review.final_values import DocumentReview, FinalField
from atlas_pipeline.review.study_values import entry_label


@dataclass(frozen=True)
class Waiting:
    """One value an analysis would read, not final yet: its entry, its field, the value so far, and why."""

    entry: str
    field: str
    value: str
    reason: str


def _value_so_far(final: FinalField) -> str:
    """What the value would be: each person's where they differ, else the latest decision's, else the model's."""
    if final.disagreement and final.reviewer_values:
        return "; ".join(f"{who}: {value_text(value)}" for who, value in final.reviewer_values.items())
    value = final.final_value if final.decided else final.model_value
    return "" if value is None else value_text(value)


def _label(fields: Mapping[str, FinalField], group: str, entry: int, identity: Iterable[str]) -> str:
    """The entry named as the studies name it (identity values as given while not final: a name, not a number)."""
    named: dict[str, Any] = {}
    for key in identity:
        final = fields.get(f"{group}[{entry}].{key}")
        value = None if final is None or final.provenance == "rejected" else final.final_value
        named[key] = value if value is not None or final is None else final.model_value
    if any(value not in (None, "") for value in named.values()):
        return entry_label(group, named)
    return f"{group}[#{entry}]"


def waiting_values(
    report: str,
    review: DocumentReview | None,
    group: str,
    identity: Iterable[str],
    flat: Mapping[str, str],
    every: bool = False,
) -> list[Waiting]:
    """A report's values of ``group``'s entries (their ``identity`` fields aside) and of the single fields ``flat``
    (field → the outcome it belongs to) that are not final but say something — a value given, decided or disputed.
    ``every``: every field of the report, named by its entry (a study's page lists them all)."""
    if review is None:
        return []
    identity = tuple(identity)
    out = []
    for name, final in review.fields.items():
        owner, entry, bare = entry_field_parts(name)
        named = bare not in identity or final.final_state in ("disputed", "recheck")  # a disputed name: named too
        if entry is not None and owner == group and named:
            label, field = _label(review.fields, group, entry, identity), bare
        elif entry is None and name in flat:
            label, field = flat[name], name
        elif every:
            label, field = (_label(review.fields, owner, entry, ()) if entry is not None else "—"), name
        else:
            continue
        unmade = _not_derived(final)
        if unmade is not None:
            out.append(Waiting(label, field, unmade[0], f"{report}: {unmade[1]}"))
            continue
        if final.is_final:
            continue
        value = _value_so_far(final)
        if value or final.disagreement:  # nothing given yet: nothing to name
            out.append(Waiting(label, field, value, f"{report}: {final.waiting or final.final_state}"))
    for name, derivation in review.unmade_derivations.items():  # in a field the document does not have
        owner, entry, bare = entry_field_parts(name)
        if (entry is None and name not in flat and not every) or (entry is not None and owner != group and not every):
            continue
        label = _label(review.fields, owner, entry, identity) if entry is not None else flat.get(name, "—")
        would, why = _said(derivation)
        out.append(Waiting(label, bare if entry is not None and not every else name, would, f"{report}: {why}"))
    return out


def _not_derived(final: FinalField) -> tuple[str, str] | None:
    """A derivation refused or flagged in a field that has no value otherwise: the value it would give (flagged) and
    why it was not made — the analysis has no such number, and says so."""
    derivation = final.derivation or {}
    if derivation.get("state") not in ("refused", "flagged") or final.final_value is not None:
        return None
    return _said(derivation)


def _said(derivation: Mapping[str, Any]) -> tuple[str, str]:
    state = derivation.get("state")
    would = derivation.get("value")
    formula = derivation.get("formula") or "a derivation"
    why = derivation.get("reason") or state
    said = f"not derived ({formula}, {state}): {why}"
    return ("" if would is None else value_text(would)), said
