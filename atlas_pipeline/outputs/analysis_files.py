"""From the studies' reconciled values to the files an analysis reads: arm-level outcome data and metafor's
``escalc`` input — each study counted once.

An analysis reads the *study*, not the file: the reports of one trial and the entries of one outcome (matched by
their identity — outcome, time point, arms — across reports and across the people who typed them) are one entry
whose every cell is the study's value (``outputs.study_report``: the same in every source, or the one a person
chose; a cell whose sources disagree is left out and named until a person chooses). The arm table, the escalc files,
the forest plots and RevMan's results all read these entries, so metafor, RevMan and a plot pool the same numbers.

Only final values count: a value accepted by the team's policy or decided by a person, or derived from such values
(``review.derivations``) and accepted in turn — such a cell is marked ``derived`` with its formula in every file, so
that a sensitivity analysis can drop it. Every number is checked for plausibility (``core.plausibility``) before it
is written: one that fails is left out and named in ``atlas_analysis_excluded.csv``, never written and never
stopping the other files.

The escalc files use metafor's argument names, so that ``escalc(measure = "RR", ai = ai, bi = bi, ci = ci, di = di,
n1i = n1i, n2i = n2i, data = read.csv(...))`` works as it is: counts for dichotomous outcomes (the denominator is the
outcome's ``total_*``, else ``n_*``), means and SDs for continuous ones (``n_*``, else ``total_*``; final values, else
changes from baseline, said in ``values``), and ``yi``/``vi`` (log scale for ratios) for comparisons reported only
as an estimate with its CI.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from atlas_pipeline.core.conversions import ConversionError, log_ratio_from_ci, se_from_ci
from atlas_pipeline.core.plausibility import as_number, entry_problems, value_problem
from atlas_pipeline.core.templates import Template
from atlas_pipeline.outputs.export_files import ESCALC_STEMS, EXCLUDED_STEM
from atlas_pipeline.outputs.study_report import Study
from atlas_pipeline.outputs.waiting_values import waiting_values
from atlas_pipeline.review.decisions import value_text
from atlas_pipeline.review.derivations import DERIVED_TIER
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import export_path

GROUP = "outcomes"
ARMS = ("intervention", "comparator")
RATIOS = frozenset({"RR", "OR", "HR"})
DIFFERENCES = frozenset({"MD", "SMD", "RD"})
IDENTITY = ("outcome", "time_point", "intervention", "comparator")
CELLS = ("n", "total", "events", "mean", "sd", "mean_change", "sd_change")
COMPARISON = ("effect_measure", "effect_estimate", "ci_lower", "ci_upper", "ci_level", "p_value_comparison")

_KEYS = {"study_id": pl.String, "document_key": pl.String, "entry": pl.Int64}
_LABELS = {name: pl.String for name in IDENTITY}
_TRAIL = {"derived": pl.String, "reports": pl.String, "note": pl.String}
ARMS_SCHEMA = {
    **_KEYS,
    **_LABELS,
    "arm": pl.String,
    "arm_name": pl.String,
    **{
        column: dtype
        for cell in CELLS
        for column, dtype in ((cell, pl.Float64), (f"{cell}_source", pl.String), (f"{cell}_evidence", pl.String))
    },
    "effect_measure": pl.String,
    "effect_estimate": pl.Float64,
    "ci_lower": pl.Float64,
    "ci_upper": pl.Float64,
    "ci_level": pl.Float64,
    "comparison_source": pl.String,
    **_TRAIL,
}
ESCALC_SCHEMAS = {
    "dichotomous": {
        **_KEYS,
        **_LABELS,
        **{name: pl.Int64 for name in ("ai", "bi", "ci", "di", "n1i", "n2i")},
        **_TRAIL,
    },
    "continuous": {
        **_KEYS,
        **_LABELS,
        **{name: pl.Float64 for name in ("m1i", "sd1i", "m2i", "sd2i")},
        "n1i": pl.Int64,
        "n2i": pl.Int64,
        "values": pl.String,  # final | change from baseline
        **_TRAIL,
    },
    "generic": {
        **_KEYS,
        **_LABELS,
        "measure": pl.String,
        "yi": pl.Float64,
        "vi": pl.Float64,
        "estimate": pl.Float64,
        "ci_lower": pl.Float64,
        "ci_upper": pl.Float64,
        "ci_level": pl.Float64,
        "arithmetic": pl.String,
        **_TRAIL,
    },
}
EXCLUDED_SCHEMA = {
    "study_id": pl.String,
    "entry": pl.String,
    "field": pl.String,
    "value": pl.String,
    "reason": pl.String,
}


@dataclass(frozen=True)
class Cell:
    """One value of a study's entry: the value, who stands behind it, its quote or arithmetic, and where it is."""

    value: Any = None
    source: str = ""  # the final value's provenance, or "derived (…)"
    evidence: str | None = None
    derived: str = ""  # the formula of a derived value ("" for a value the paper writes)
    document: str = ""  # the report it comes from
    field: str = ""  # its name in that report's record (``outcomes[3].sd_intervention``)


@dataclass(frozen=True)
class Excluded:
    """A value the analysis leaves out, and why (a conflict between sources, an implausible number)."""

    study_id: str
    entry: str
    field: str
    value: str
    reason: str


@dataclass
class Entry:
    """One entry of one study — an outcome at a time point for a comparison — with the study's value of each cell."""

    study_id: str
    label: str  # ``outcomes[Duration of diarrhea | 24 h | …]``: its name in the studies export
    identity: dict[str, str | None]
    cells: dict[str, Cell] = field(default_factory=dict)
    sources: list[str] = field(default_factory=list)  # every report or entry that gives one of its values
    note: str = ""  # set when the study has other entries of the same outcome (time points, comparisons)
    withheld: set[str] = field(default_factory=set)  # cells left out (a conflict, an implausible value)

    @property
    def document_key(self) -> str:
        """The report whose evidence a reader is sent to (the first cell's)."""
        return next((cell.document for cell in self.cells.values() if cell.document), "")

    @property
    def entry(self) -> int:
        """The entry number in that report (where its evidence is on the review page)."""
        for cell in self.cells.values():
            if cell.document == self.document_key and "[" in cell.field:
                return int(cell.field.split("[", 1)[1].split("]", 1)[0])
        return 0

    def value(self, name: str) -> Any:
        cell = self.cells.get(name)
        return None if cell is None else cell.value

    def number(self, name: str) -> float | None:
        return _number(self.value(name))

    def derived(self, names: dict[str, str]) -> str | None:
        """``names``: column → the cell it reads; the derived ones with their formula ("sd1i: sd_from_se")."""
        said = [f"{column}: {self.cells[cell].derived}" for column, cell in names.items() if self._derived(cell)]
        return "; ".join(said) or None

    def _derived(self, cell: str) -> bool:
        found = self.cells.get(cell)
        return found is not None and bool(found.derived)


def _number(value: Any) -> float | None:
    """A final value as a number, or None (empty, not a number, or not finite: NaN and infinity analyse nothing)."""
    number = as_number(value)
    return number if number is not None and math.isfinite(number) else None


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _cell(study: Study, name: str) -> Cell | None:
    found = study.final(name)
    if found is None:
        return None
    report, final = found
    derived = final.tier == DERIVED_TIER and final.decision != "correct" and final.derivation is not None
    formula = str((final.derivation or {}).get("formula") or "") if derived else ""
    source = f"derived ({final.provenance})" if derived else final.provenance
    evidence = final.corrected_quote or final.quote
    return Cell(study.values[name].value, source, evidence, formula, report.key, final.field)


def _identity(study: Study, cells: dict[str, Cell], label: str) -> dict[str, str | None]:
    """The entry's identity values as its evidence report names them (the label says the same, joined)."""
    for cell in cells.values():
        report = next((r for r in study.reports if r.key == cell.document), None)
        if report is None or report.current_review is None or "[" not in cell.field:
            continue
        prefix = cell.field.rsplit(".", 1)[0]
        fields = report.current_review.fields
        out = {}
        for key in IDENTITY:
            final = fields.get(f"{prefix}.{key}")
            value = None if final is None or final.provenance == "rejected" else final.final_value
            value = value if value is not None or final is None else final.model_value
            out[key] = _text(value)
        return out
    return {key: None for key in IDENTITY} | {"outcome": label}


# the seed template's single-valued primary outcomes, read as entries of their own (analysis name ← template field)
FLAT_OUTCOMES = {
    "Primary binary outcome": {
        "events_intervention": "event_treatment",
        "total_intervention": "total_treatment",
        "events_comparator": "event_control",
        "total_comparator": "total_control",
    },
    "Primary continuous outcome": {
        "mean_intervention": "mean_treatment",
        "sd_intervention": "sd_treatment",
        "n_intervention": "n_treatment_outcome",
        "mean_comparator": "mean_control",
        "sd_comparator": "sd_control",
        "n_comparator": "n_control_outcome",
    },
    "Primary time-to-event outcome": {
        "effect_estimate": "hr_value",
        "ci_lower": "hr_ci_lower",
        "ci_upper": "hr_ci_upper",
        "p_value_comparison": "p_value",
    },
}
FLAT_FIELDS = {bare: name for fields in FLAT_OUTCOMES.values() for bare, name in fields.items()}


def entry_key(row: dict) -> tuple:
    """The study entry an analysis row belongs to (its rows in every file share it)."""
    return row["study_id"], row["document_key"], row["entry"], row["outcome"]


def evidence_field(entry: int, bare: str) -> str:
    """The record's name of an entry's cell (``outcomes[3].sd_intervention``; a primary outcome's own field)."""
    return f"{GROUP}[{entry}].{bare}" if entry else FLAT_FIELDS.get(bare, bare)


def _study_cells(
    study: Study, label: str, fields: dict[str, str], excluded: list[Excluded]
) -> tuple[dict[str, Cell], set[str], set[str]]:
    """The study's value of each cell (``fields``: the analysis's name → the study field), every source that gives
    one, and the cells whose sources disagree: left out and named in ``excluded``."""
    cells: dict[str, Cell] = {}
    sources: set[str] = set()
    conflicts: set[str] = set()
    for bare, name in fields.items():
        value = study.values.get(name)
        if value is None:
            continue
        sources.update(value.reports)
        if value.state == "conflict":
            given = "; ".join(f"{source}: {value_text(v)}" for source, v in value.reports.items())
            why = f"its sources disagree ({given}): choose one on the study's page"
            excluded.append(Excluded(study.id, label, name if "[" not in name else bare, "", why))
            conflicts.add(bare)
            continue
        cell = _cell(study, name)
        if cell is not None:
            cells[bare] = cell
    return cells, sources, conflicts


def _flat_entries(study: Study, template: Template, excluded: list[Excluded]) -> list[Entry]:
    """A study's primary outcomes written in single fields (``event_treatment``, ``mean_control``, ``hr_value`` …),
    each an entry of its own: the arms named by ``treatment_name`` and ``control_name``."""
    names = {field.name for field in template.fields}
    entries = []
    for outcome, fields in FLAT_OUTCOMES.items():
        if not set(fields.values()) & names:
            continue
        cells, sources, conflicts = _study_cells(study, outcome, fields, excluded)
        if not cells:
            continue
        if outcome == "Primary time-to-event outcome":
            cells["effect_measure"] = Cell("HR", "template", "the template's hazard ratio fields")
        arms = {
            arm: study.values.get(f"{role}_name")
            for arm, role in (("intervention", "treatment"), ("comparator", "control"))
        }
        named = study.values.get("endpoint_name") if outcome == "Primary time-to-event outcome" else None
        identity = {
            "outcome": _text(named.value) if named is not None and named.state != "conflict" else outcome,
            "time_point": None,
            **{arm: _text(v.value) if v is not None and v.state != "conflict" else None for arm, v in arms.items()},
        }
        entry = Entry(study.id, outcome, identity, sources=sorted(sources), withheld=conflicts)
        entry.cells = _plausible(entry, cells, excluded)
        if entry.cells:
            entries.append(entry)
    return entries


def study_entries(studies: list[Study], template: Template | None) -> tuple[list[Entry], list[Excluded]]:
    """Every study's entries of the ``outcomes`` group — and its primary outcomes written in single fields —, each
    cell the study's value, implausible and conflicting values left out (and returned, named)."""
    if template is None:
        return [], []
    entries: list[Entry] = []
    excluded: list[Excluded] = []
    prefix = f"{GROUP}["
    for study in studies:
        by_label: dict[str, list[str]] = {}
        for name in study.values:
            if name.startswith(prefix):
                by_label.setdefault(name.rsplit(".", 1)[0], []).append(name)
        for label, names in by_label.items():
            named = {name.rsplit(".", 1)[1]: name for name in names}
            cells, sources, conflicts = _study_cells(study, label, named, excluded)
            identity = _identity(study, cells, label)
            entry = Entry(study.id, label, identity, sources=sorted(sources), withheld=conflicts)
            entry.cells = _plausible(entry, cells, excluded)
            if entry.cells:
                entries.append(entry)
        excluded += _waiting(study, template)
        named = {str(e.identity.get("outcome") or "").casefold() for e in entries if e.study_id == study.id}
        for flat in _flat_entries(study, template, excluded):
            if str(flat.identity.get("outcome") or "").casefold() in named:  # the same result typed twice
                why = "the same outcome as an entry of the outcomes group: counted once, there"
                excluded.append(Excluded(study.id, flat.label, "—", str(flat.identity.get("outcome")), why))
                continue
            entries.append(flat)
    entries.sort(key=lambda entry: (entry.study_id, entry.document_key, entry.entry))  # in each report's order
    _note_repeats(entries)
    return entries, excluded


def _waiting(study: Study, template: Template) -> list[Excluded]:
    """The study's values the analysis would read that the team's process has not made final (disputed, uncompared,
    waiting for the second extraction or a person) and the derivations refused or flagged: named, never pooled."""
    identity = next((module.identity for module in template.groups if module.name == GROUP), list(IDENTITY))
    flat = {name: outcome for outcome, fields in FLAT_OUTCOMES.items() for name in fields.values()}
    return [
        Excluded(study.id, waiting.entry, waiting.field, waiting.value, waiting.reason)
        for report in study.reports
        for waiting in waiting_values(report.key, report.current_review, GROUP, identity, flat)
    ]


def _plausible(entry: Entry, cells: dict[str, Cell], excluded: list[Excluded]) -> dict[str, Cell]:
    """The cells that pass every plausibility rule; the others named in ``excluded``."""
    kept = dict(cells)
    for bare, cell in cells.items():
        problem = value_problem(bare, cell.value)
        if problem is None and bare in READ_AS_NUMBERS and cell.value not in (None, "") and _number(cell.value) is None:
            problem = f"{value_text(cell.value)!r} is not a number the analysis can read"
        if problem is not None:
            excluded.append(Excluded(entry.study_id, entry.label, bare, value_text(cell.value), problem))
            kept.pop(bare)
    for names, problem in entry_problems({bare: cell.value for bare, cell in kept.items()}):
        for bare in names:
            if bare in kept:
                excluded.append(Excluded(entry.study_id, entry.label, bare, value_text(kept[bare].value), problem))
                kept.pop(bare)
    entry.withheld |= set(cells) - set(kept)
    return kept


# the cells the analysis computes with: a value there that is no number is named, never silently dropped
READ_AS_NUMBERS = frozenset(
    {f"{cell}_{arm}" for cell in CELLS for arm in ARMS} | {"effect_estimate", "ci_lower", "ci_upper", "ci_level"}
)


def _note_repeats(entries: list[Entry]) -> None:
    """A study with several entries of one outcome (time points, comparisons) says which, in every file and plot:
    they are not independent results to pool together."""
    groups: dict[tuple[str, str], list[Entry]] = {}
    for entry in entries:
        outcome = " ".join(str(entry.identity.get("outcome") or "").split()).casefold()
        groups.setdefault((entry.study_id, outcome), []).append(entry)
    for found in groups.values():
        if len(found) < 2:
            continue
        for entry in found:
            differs = [
                f"{key.replace('_', ' ')} {entry.identity.get(key) or '—'}"
                for key in ("time_point", "intervention", "comparator")
                if len({str(other.identity.get(key) or "").casefold() for other in found}) > 1
            ]
            entry.note = f"one of {len(found)} entries of this study for this outcome ({'; '.join(differs) or 'same'})"


def _arm_cell(entry: Entry, cell: str, arm: str) -> Cell:
    return entry.cells.get(f"{cell}_{arm}") or Cell()


def arm_rows(entries: list[Entry]) -> list[dict]:
    """One row per study × outcome × time point × arm, from the studies' entries."""
    rows = []
    for entry in entries:
        comparison = [entry.cells.get(name) or Cell() for name in COMPARISON[:5]]
        derived = entry.derived({f"{arm} {cell}": f"{cell}_{arm}" for arm in ARMS for cell in CELLS})
        derived_comparison = entry.derived({name: name for name in COMPARISON})
        for arm in ARMS:
            row = {
                "study_id": entry.study_id,
                "document_key": entry.document_key,
                "entry": entry.entry,
                **entry.identity,
                "arm": arm,
                "arm_name": entry.identity.get(arm),
            }
            for cell in CELLS:
                found = _arm_cell(entry, cell, arm)
                row |= {cell: _number(found.value), f"{cell}_source": found.source or None}
                row[f"{cell}_evidence"] = found.evidence
            row |= {
                "effect_measure": _text(comparison[0].value),
                "effect_estimate": _number(comparison[1].value),
                "ci_lower": _number(comparison[2].value),
                "ci_upper": _number(comparison[3].value),
                "ci_level": _number(comparison[4].value),
                "comparison_source": ", ".join(sorted({c.source for c in comparison if c.source})) or None,
                "derived": "; ".join(part for part in (derived, derived_comparison) if part) or None,
                "reports": "; ".join(entry.sources) or None,
                "note": entry.note or None,
            }
            rows.append(row)
    return rows


def _whole(value: float | None) -> int | None:
    return round(value) if value is not None and abs(value - round(value)) < 1e-9 else None


def _first(entry: Entry, *names: str) -> tuple[str, float | None]:
    """The first of ``names`` the entry gives a number for (a denominator: ``total_*`` or ``n_*``); none when one
    before it was left out (a conflict is settled by a person, never by another field)."""
    for name in names:
        if name in entry.withheld:
            return name, None
        if entry.number(name) is not None:
            return name, entry.number(name)
    return names[0], None


def escalc_rows(entries: list[Entry]) -> dict[str, list[dict]]:
    """The escalc inputs each study entry's values give: counts, means and SDs, or an estimate with its CI."""
    out: dict[str, list[dict]] = {kind: [] for kind in ESCALC_STEMS}
    for entry in entries:
        keys = {"study_id": entry.study_id, "document_key": entry.document_key, "entry": entry.entry}
        keys |= {name: entry.identity.get(name) for name in IDENTITY}
        trail = {"reports": "; ".join(entry.sources) or None, "note": entry.note or None}
        total1, n1 = _first(entry, "total_intervention", "n_intervention")
        total2, n2 = _first(entry, "total_comparator", "n_comparator")
        e1, e2 = _whole(entry.number("events_intervention")), _whole(entry.number("events_comparator"))
        w1, w2 = _whole(n1), _whole(n2)
        if None not in (w1, w2, e1, e2) and 0 <= e1 <= w1 and 0 <= e2 <= w2:  # type: ignore[operator]
            columns = {"ai": "events_intervention", "ci": "events_comparator", "n1i": total1, "n2i": total2}
            if e1 == e2 == 0:  # RevMan's "not estimable"; escalc(…, drop00 = TRUE) leaves it out the same way
                zero = "no events in either arm: not estimable (escalc: drop00 = TRUE)"
                trail = trail | {"note": "; ".join(part for part in (trail["note"], zero) if part)}
            out["dichotomous"].append(
                keys
                | {"ai": e1, "bi": w1 - e1, "ci": e2, "di": w2 - e2, "n1i": w1, "n2i": w2}  # type: ignore[operator]
                | trail
                | {"derived": entry.derived(columns)}
            )
        continuous = _continuous(entry)
        if continuous is not None:
            out["continuous"].append(keys | continuous | trail)
        generic = _generic(entry)
        if generic is not None:
            out["generic"].append(keys | generic | trail)
    return out


def _continuous(entry: Entry) -> dict | None:
    """Means, SDs and sizes of both arms: final values, else changes from baseline (never one of each)."""
    size1, n1 = _first(entry, "n_intervention", "total_intervention")
    size2, n2 = _first(entry, "n_comparator", "total_comparator")
    w1, w2 = _whole(n1), _whole(n2)
    if None in (w1, w2):
        return None
    for prefix, values in (("", "final"), ("_change", "change from baseline")):
        names = {
            "m1i": f"mean{prefix}_intervention",
            "sd1i": f"sd{prefix}_intervention",
            "m2i": f"mean{prefix}_comparator",
            "sd2i": f"sd{prefix}_comparator",
        }
        numbers = {column: entry.number(name) for column, name in names.items()}
        if None not in numbers.values():
            derived = entry.derived(names | {"n1i": size1, "n2i": size2})
            return numbers | {"n1i": w1, "n2i": w2, "values": values, "derived": derived}
    return None


def _generic(entry: Entry) -> dict | None:
    """yi and vi of a comparison reported as an estimate with its CI (log scale for a ratio; a difference's SE from
    the CI with t when each group is under 60, as the Handbook says)."""
    measure = _text(entry.value("effect_measure"))
    estimate, lower, upper = (entry.number(name) for name in ("effect_estimate", "ci_lower", "ci_upper"))
    derived_ci = entry._derived("ci_lower") or entry._derived("ci_upper")  # a CI Atlas derived is a 95% CI
    level = 95.0 if derived_ci else entry.number("ci_level") or 95.0
    if measure is None or None in (estimate, lower, upper):
        return None
    assert estimate is not None and lower is not None and upper is not None
    columns = {name: name for name in ("effect_estimate", "ci_lower", "ci_upper", "ci_level")}
    reported = {"estimate": estimate, "ci_lower": lower, "ci_upper": upper, "ci_level": level}
    reported["derived"] = entry.derived(columns)
    try:
        if measure in RATIOS:
            conversion = log_ratio_from_ci(estimate, lower, upper, level)
            se = float(conversion.notes[0].removeprefix("se="))
            return {
                "measure": measure,
                "yi": conversion.value,
                "vi": se**2,
                "arithmetic": conversion.arithmetic,
            } | reported
        if measure in DIFFERENCES and lower <= estimate <= upper:
            n1 = entry.number("n_intervention") or entry.number("total_intervention")
            n2 = entry.number("n_comparator") or entry.number("total_comparator")
            small = measure == "MD" and n1 is not None and n2 is not None
            se = se_from_ci(lower, upper, level, n1 if small else None, n2 if small else None)
            width = (upper - lower) / se
            said = f"yi = {estimate:g}; SE = ({upper:g} − {lower:g}) / {width:.4g} = {se:.4f}; vi = SE² = {se * se:.5g}"
            return {"measure": measure, "yi": estimate, "vi": se**2, "arithmetic": said} | reported
    except ConversionError:
        return None
    return None


def escalc_frames(escalc: dict[str, list[dict]]) -> dict[str, pl.DataFrame]:
    return {kind: pl.DataFrame(rows, schema=ESCALC_SCHEMAS[kind]) for kind, rows in escalc.items()}


def excluded_frame(excluded: list[Excluded]) -> pl.DataFrame:
    rows = [vars(item) for item in excluded]
    return pl.DataFrame(rows, schema=EXCLUDED_SCHEMA)


def read_excluded(store: Store) -> list[dict]:
    """The values the last export left out of the analysis (``atlas_analysis_excluded.csv``), or none."""
    path = export_path(EXCLUDED_STEM, "csv")
    if not store.exists(path):
        return []
    return pl.read_csv(io.BytesIO(store.read_bytes(path)), schema=EXCLUDED_SCHEMA).to_dicts()


def excluded_markdown(excluded: list[dict], limit: int = 50) -> str:
    """The values left out, as a table for the asset's metadata (the first ``limit``)."""
    if not excluded:
        return "every value the analysis reads is in its files"
    rows = [f"| {r['study_id']} | {r['entry']} | {r['field']} | {r['value'] or ''} | {r['reason']} |" for r in excluded]
    more = f"\n\n… and {len(excluded) - limit} more in {EXCLUDED_STEM}.csv" if len(excluded) > limit else ""
    return "| study | entry | field | value | why |\n|---|---|---|---|---|\n" + "\n".join(rows[:limit]) + more


def read_escalc(store: Store) -> dict[str, list[dict]]:
    """The escalc rows as the last export wrote them (what a plot of the exported files pools)."""
    out: dict[str, list[dict]] = {}
    for kind, stem in ESCALC_STEMS.items():
        path = export_path(stem, "csv")
        raw = store.read_bytes(path) if store.exists(path) else b""
        out[kind] = pl.read_csv(io.BytesIO(raw), schema=ESCALC_SCHEMAS[kind]).to_dicts() if raw else []
    return out
