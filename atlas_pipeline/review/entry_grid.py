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


KINDS = ("dichotomous", "continuous", "effect_estimate")  # the outcome types a row is entered as
KIND_LABELS = {"identity": "", "dichotomous": "dichotomous", "continuous": "continuous", "effect_estimate": "effect"}
DICHOTOMOUS_PREFIXES = ("events_", "total_", "percent_", "cases_")
TYPE_FIELD = "outcome_type"  # the row's own say of its outcome type


def kind_of(name: str, identity: list[str]) -> str:
    """The outcome type a column serves: an arm's events and totals are dichotomous, its other numbers continuous;
    what compares the arms (an estimate, its CI, a p value) serves every type; the identity serves all."""
    if name in identity or name == TYPE_FIELD:
        return "identity"
    if arm_of(name) == "comparison":
        return "effect_estimate"
    return "dichotomous" if name.startswith(DICHOTOMOUS_PREFIXES) else "continuous"


def row_kind(cells: Mapping[str, str], kinds: Mapping[str, str]) -> str:
    """The outcome type a row is entered as: its ``outcome_type`` when given, else the arm type its filled cells
    are of (none when it has none or both: every column is offered)."""
    said = (cells.get(TYPE_FIELD) or "").strip().lower().replace(" ", "_")
    if said in KINDS:
        return said
    filled = {kinds[name] for name, value in cells.items() if value and kinds.get(name) in KINDS[:2]}
    return filled.pop() if len(filled) == 1 else ""


def shows(row_kind: str, column_kind: str) -> bool:
    """Whether a row of ``row_kind`` offers a column of ``column_kind``: a dichotomous row no means and SDs, an
    effect estimate row no arm's numbers; a comparison's estimate is offered to every row."""
    if not row_kind or column_kind in ("identity", "effect_estimate"):
        return True
    return row_kind == column_kind


@dataclass
class GridRow:
    entry: int
    cells: dict[str, str]  # field → value as shown
    states: dict[str, str]  # field → provenance (awaiting_review, reviewer_corrected, …)
    rejected: bool = False  # every value of the entry rejected (a deleted entry)
    quotes: dict[str, str] = field(default_factory=dict)  # field → the quote the value rests on (a person's first)
    kind: str = ""  # the outcome type the row is entered as (``row_kind``); "" offers every column

    def offers(self, name: str, kinds: Mapping[str, str]) -> bool:
        """Whether the row shows an input for column ``name``: its type's columns, and any cell that holds a value."""
        return bool(self.cells.get(name)) or shows(self.kind, kinds.get(name, ""))


@dataclass
class Grid:
    group: str
    identity: list[str]
    columns: list[tuple[str, str]]  # (arm, field) in the order shown: identity, then by arm
    rows: list[GridRow] = field(default_factory=list)
    details: set[str] = field(default_factory=set)  # columns shown on demand: detail fields no entry fills
    kinds: dict[str, str] = field(default_factory=dict)  # column → the outcome type it serves (``kind_of``)

    @property
    def frozen(self) -> list[str]:
        """The columns that stay in view while the grid scrolls sideways: the entry's identity (outcome, time
        point, arms) — the row's name."""
        return list(self.identity)

    @property
    def kind_spans(self) -> list[tuple[str, int, bool]]:
        """The header's outcome-type groups, how many columns each spans, and whether they are shown on demand."""
        spans: list[tuple[str, int, bool]] = []
        for _, name in self.columns:
            kind, detail = self.kinds.get(name, ""), name in self.details
            if spans and spans[-1][0] == kind and spans[-1][2] == detail:
                spans[-1] = (kind, spans[-1][1] + 1, detail)
            else:
                spans.append((kind, 1, detail))
        return spans

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
    kind_order = {"identity": 0, "dichotomous": 1, "continuous": 2, "effect_estimate": 3}
    detail = {f.name for f in group.fields if f.detail}
    kinds = {n: kind_of(n, identity) for n in names}
    # the identity first (frozen), then by outcome type, by arm within each, the detail columns at each type's end
    columns = [("identity", n) for n in identity] + sorted(
        ((arm_of(n), n) for n in names if n not in identity),
        key=lambda c: (kind_order[kinds[c[1]]], c[1] in detail, order[c[0]]),
    )
    entries: dict[int, dict[str, Any]] = {}
    for name, final in fields.items():
        group_name, entry, bare = entry_field_parts(name)
        if group_name == group.name and entry is not None:
            entries.setdefault(entry, {})[bare] = final
    grid = Grid(group.name, identity, columns, kinds=kinds)
    for entry in sorted(entries):
        finals = entries[entry]
        cells, states, quotes = {}, {}, {}
        for _, name in columns:
            final = finals.get(name)
            if final is None:
                cells[name], states[name] = "", ""
                continue
            value = final.final_value if final.decided else final.model_value
            cells[name], states[name] = "" if value is None else value_text(value), final.provenance
            quote = getattr(final, "corrected_quote", None) or getattr(final, "quote", None)
            if quote:
                quotes[name] = quote
        rejected = all(f.provenance == "rejected" for f in finals.values())
        grid.rows.append(GridRow(entry, cells, states, rejected, quotes, row_kind(cells, kinds)))
    grid.details = {name for name in detail if not any(row.cells.get(name) for row in grid.rows)}
    return grid


@dataclass(frozen=True)
class CellQuote:
    """The quote a person gave a cell (words selected on a page: ``page`` and ``words`` "first-last", as a field's
    form sends them)."""

    quote: str
    page: str = ""
    words: str = ""


@dataclass(frozen=True)
class CellEdit:
    """One cell a person changed: ``field`` is the entry's field name (``outcomes[2].sd_comparator``); ``value``
    empty means the cell was emptied; ``quote``: the evidence given with it (a value unchanged but given a quote is
    an edit too: the value, now with its evidence)."""

    field: str
    bare: str
    value: str
    was: str
    quote: CellQuote | None = None


def cell_quotes(form: Mapping[str, Any]) -> dict[tuple[str, str], CellQuote]:
    """The quotes given to cells (``quote:<entry>:<field>``, with ``quote_page:…`` and ``quote_words:…``), by
    (entry, field); ``entry`` is a number or ``new``."""
    quotes = {}
    for key, raw in form.items():
        parts = str(key).split(":")
        text = " ".join(str(raw or "").split())
        if len(parts) == 3 and parts[0] == "quote" and text:
            _, entry, bare = parts
            page, words = (str(form.get(f"{name}:{entry}:{bare}") or "") for name in ("quote_page", "quote_words"))
            quotes[(entry, bare)] = CellQuote(text, page, words)
    return quotes


def grid_edits(group: str, form: Mapping[str, Any]) -> tuple[list[CellEdit], dict[str, str]]:
    """What the submitted grid changed: the edited cells of existing entries (``cell:<entry>:<field>`` against
    ``was:<entry>:<field>``), and the new row's values (``cell:new:<field>``), the empty ones left out."""
    edits, new_row = [], {}
    quotes = cell_quotes(form)
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
        quote = quotes.get((entry, bare)) if value else None
        if value != was or quote is not None:
            edits.append(CellEdit(entry_field_name(group, int(entry), bare), bare, value, was, quote))
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
