"""A repeating group as the grid a reviewer thinks in: one row per entry (an outcome at a time point), its columns
the group's fields by arm (intervention, comparator) and the comparison between them.

The grid shows each cell's current value (the final value once decided, else the model's) and turns what a person
changed in it into decisions: a new value corrects the cell, an emptied cell is rejected as not reported, a filled
row below the last adds an entry the model missed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from atlas_pipeline.core.plausibility import entry_problems
from atlas_pipeline.core.templates import TemplateModule, entry_field_name, entry_field_parts
from atlas_pipeline.review.decisions import value_text

ARMS = (("_intervention", "intervention"), ("_treatment", "intervention"), ("_comparator", "comparator"))
NEW_ROW = "new"


def arm_of(name: str) -> str:
    """The arm a field belongs to by its name (``events_intervention`` → intervention), else the comparison."""
    return next((arm for suffix, arm in ARMS if name.endswith(suffix)), "comparison")


@dataclass
class GridRow:
    entry: int
    cells: dict[str, str]  # field → value as shown
    states: dict[str, str]  # field → provenance (awaiting_review, reviewer_corrected, …)
    rejected: bool = False  # every value of the entry rejected (a deleted entry)


@dataclass
class Grid:
    group: str
    identity: list[str]
    columns: list[tuple[str, str]]  # (arm, field) in the order shown: identity, then by arm
    rows: list[GridRow] = field(default_factory=list)
    details: set[str] = field(default_factory=set)  # columns shown on demand: detail fields no entry fills

    @property
    def arms(self) -> list[tuple[str, int, bool]]:
        """The header's arm groups, how many columns each spans, and whether they are shown on demand."""
        spans: list[tuple[str, int, bool]] = []
        for arm, name in self.columns:
            detail = name in self.details
            if spans and spans[-1][0] == arm and spans[-1][2] == detail:
                spans[-1] = (arm, spans[-1][1] + 1, detail)
            else:
                spans.append((arm, 1, detail))
        return spans


def entry_grid(group: TemplateModule, fields: Mapping[str, Any]) -> Grid:
    """The grid of ``group`` from a document's final fields (``FinalField`` by name)."""
    names = [f.name for f in group.fields]
    identity = [n for n in group.identity if n in names]
    order = {"identity": 0, "intervention": 1, "comparator": 2, "comparison": 3}
    detail = {f.name for f in group.fields if f.detail}
    columns = [("identity", n) for n in identity] + sorted(
        ((arm_of(n), n) for n in names if n not in identity), key=lambda c: (order[c[0]], c[1] in detail)
    )
    entries: dict[int, dict[str, Any]] = {}
    for name, final in fields.items():
        group_name, entry, bare = entry_field_parts(name)
        if group_name == group.name and entry is not None:
            entries.setdefault(entry, {})[bare] = final
    grid = Grid(group.name, identity, columns)
    for entry in sorted(entries):
        finals = entries[entry]
        cells, states = {}, {}
        for _, name in columns:
            final = finals.get(name)
            if final is None:
                cells[name], states[name] = "", ""
                continue
            value = final.final_value if final.decided else final.model_value
            cells[name], states[name] = "" if value is None else value_text(value), final.provenance
        rejected = all(f.provenance == "rejected" for f in finals.values())
        grid.rows.append(GridRow(entry, cells, states, rejected))
    grid.details = {name for name in detail if not any(row.cells.get(name) for row in grid.rows)}
    return grid


@dataclass(frozen=True)
class CellEdit:
    """One cell a person changed: ``field`` is the entry's field name (``outcomes[2].sd_comparator``); ``value``
    empty means the cell was emptied."""

    field: str
    bare: str
    value: str
    was: str


def grid_edits(group: str, form: Mapping[str, Any]) -> tuple[list[CellEdit], dict[str, str]]:
    """What the submitted grid changed: the edited cells of existing entries (``cell:<entry>:<field>`` against
    ``was:<entry>:<field>``), and the new row's values (``cell:new:<field>``), the empty ones left out."""
    edits, new_row = [], {}
    for key, raw in form.items():
        parts = str(key).split(":")
        if len(parts) != 3 or parts[0] != "cell":
            continue
        _, entry, bare = parts
        value = " ".join(str(raw or "").split())
        if entry == NEW_ROW:
            if value:
                new_row[bare] = value
            continue
        if not (entry.isascii() and entry.isdecimal()):
            continue
        was = " ".join(str(form.get(f"was:{entry}:{bare}") or "").split())
        if value != was:
            edits.append(CellEdit(entry_field_name(group, int(entry), bare), bare, value, was))
    return edits, new_row


def _prefix(name: str) -> str:
    return name.rsplit(".", 1)[0] if "[" in name else ""


def entry_refusal(fields: Mapping[str, Any], changes: Mapping[str, Any]) -> str | None:
    """Why the changes (record field name → new value, None for an emptied cell) would leave an entry — or the single
    fields — inconsistent with its accepted values (more events than participants, an estimate outside its CI …:
    ``core.plausibility``), or None. ``fields``: the document's final fields now; a model's value nobody accepted
    does not count (the person may be correcting it next)."""
    for prefix in dict.fromkeys(_prefix(name) for name in changes):
        values: dict[str, Any] = {}
        for name, final in fields.items():
            if _prefix(name) == prefix and final.decided and final.provenance != "rejected":
                values[name.rsplit(".", 1)[-1]] = final.final_value
        changed = {name.rsplit(".", 1)[-1] for name in changes if _prefix(name) == prefix}
        values |= {name.rsplit(".", 1)[-1]: value for name, value in changes.items() if _prefix(name) == prefix}
        for names, problem in entry_problems(values):
            if changed & set(names):
                return f"{prefix or 'the document'}: {problem}"
    return None
