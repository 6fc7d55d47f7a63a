"""From final values to the files an analysis reads: arm-level outcome data and metafor's ``escalc`` input.

The arm table is long — one row per study × outcome × time point × arm — with n, events, mean and SD and the
comparison's estimate and CI; every cell comes with where it came from (``*_source``: the final value's provenance,
or ``derived``) and its evidence (``*_evidence``: the quote, or the arithmetic of a derivation). Only final values
count: a value accepted by the team's policy or decided by a person, or derived from such values
(``review.derivations``) and accepted in turn; a value awaiting review is left empty, never guessed.

The escalc files use metafor's argument names so that ``escalc(measure = "RR", ai = ai, bi = bi, ci = ci, di = di,
n1i = n1i, n2i = n2i, data = read.csv(...))`` works as it is: counts for dichotomous outcomes, means and SDs for
continuous ones, and ``yi``/``vi`` (log scale for ratios) for comparisons reported only as an estimate with its CI.

The arm table reads the repeating ``outcomes`` group by the seed template's field names (``n_intervention``,
``events_comparator``, ``effect_estimate`` …); a template without them has no arm table.
"""

from __future__ import annotations

import math
from typing import Any

import polars as pl

from atlas_pipeline.core.conversions import ConversionError, log_ratio_from_ci, se_from_ci
from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.outputs.completion import DocumentState
from atlas_pipeline.review.derivations import ACCEPTED, DERIVED_TIER

ARMS_STEM = "atlas_arms"
ESCALC_STEMS = {
    "dichotomous": "atlas_escalc_dichotomous",
    "continuous": "atlas_escalc_continuous",
    "generic": "atlas_escalc_generic",
}
GROUP = "outcomes"
ARMS = ("intervention", "comparator")
RATIOS = frozenset({"RR", "OR", "HR"})
IDENTITY = ("outcome", "time_point", "intervention", "comparator")
CELLS = ("n", "events", "mean", "sd")
COMPARISON = ("effect_measure", "effect_estimate", "ci_lower", "ci_upper", "p_value_comparison")

_KEYS = {"study_id": pl.String, "document_key": pl.String, "entry": pl.Int64}
_LABELS = {name: pl.String for name in IDENTITY}
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
    "comparison_source": pl.String,
}
ESCALC_SCHEMAS = {
    "dichotomous": {**_KEYS, **_LABELS, **{name: pl.Int64 for name in ("ai", "bi", "ci", "di", "n1i", "n2i")}},
    "continuous": {
        **_KEYS,
        **_LABELS,
        **{name: pl.Float64 for name in ("m1i", "sd1i", "m2i", "sd2i")},
        "n1i": pl.Int64,
        "n2i": pl.Int64,
        "derived": pl.String,
    },
    "generic": {**_KEYS, **_LABELS, "measure": pl.String, "yi": pl.Float64, "vi": pl.Float64, "arithmetic": pl.String},
}


class Cell:
    """One final value of an entry: the value, where it came from, and its quote or arithmetic."""

    __slots__ = ("evidence", "source", "value")

    def __init__(self, value: Any = None, source: str = "", evidence: str | None = None) -> None:
        self.value, self.source, self.evidence = value, source, evidence


def _number(value: Any) -> float | None:
    """A final value as a number, or None (empty, not a number, or not finite: NaN and infinity analyse nothing)."""
    try:
        number = float(str(value).replace("−", "-")) if value not in (None, "") else None
    except ValueError:
        return None
    return number if number is not None and math.isfinite(number) else None


def entries(state: DocumentState) -> dict[int, dict[str, Cell]]:
    """The final cells of each ``outcomes`` entry of a document (entry number → field → :class:`Cell`)."""
    review = state.current_review
    if review is None:
        return {}
    out: dict[int, dict[str, Cell]] = {}
    for name, final in review.fields.items():
        group, entry, bare = entry_field_parts(name)
        if group != GROUP or entry is None:
            continue
        cells = out.setdefault(entry, {})
        if bare in IDENTITY:  # a label names the row whatever its review state
            cells[bare] = Cell(final.final_value if final.final_value is not None else final.model_value)
        elif final.provenance in ACCEPTED and final.final_value not in (None, ""):
            derived = final.tier == DERIVED_TIER and final.decision != "correct"
            source = f"derived ({final.provenance})" if derived else final.provenance
            cells[bare] = Cell(final.final_value, source, final.corrected_quote or final.quote)
    return dict(sorted(out.items()))


def _get(cells: dict[str, Cell], name: str) -> Cell:
    return cells.get(name) or Cell()


def arm_rows(states: list[DocumentState], template: Template) -> list[dict]:
    """One row per study × outcome × time point × arm, from final values (derived ones included once accepted)."""
    if not any(group.name == GROUP for group in template.groups):
        return []
    rows = []
    for state in states:
        for entry, cells in entries(state).items():
            comparison = [_get(cells, name) for name in COMPARISON[:4]]
            for arm in ARMS:
                n = (
                    _get(cells, f"n_{arm}")
                    if _get(cells, f"n_{arm}").value is not None
                    else _get(cells, f"total_{arm}")
                )
                values = {"n": n, "events": _get(cells, f"events_{arm}")}
                values |= {"mean": _get(cells, f"mean_{arm}"), "sd": _get(cells, f"sd_{arm}")}
                row = {
                    "study_id": state.study_id or state.key,
                    "document_key": state.key,
                    "entry": entry,
                    **{name: _text(_get(cells, name).value) for name in IDENTITY},
                    "arm": arm,
                    "arm_name": _text(_get(cells, arm).value),
                }
                for cell, found in values.items():
                    row |= {cell: _number(found.value), f"{cell}_source": found.source or None}
                    row[f"{cell}_evidence"] = found.evidence
                row |= {
                    "effect_measure": _text(comparison[0].value),
                    "effect_estimate": _number(comparison[1].value),
                    "ci_lower": _number(comparison[2].value),
                    "ci_upper": _number(comparison[3].value),
                    "comparison_source": ", ".join(sorted({c.source for c in comparison if c.source})) or None,
                }
                rows.append(row)
    return rows


def _text(value: Any) -> str | None:
    return None if value in (None, "") else str(value)


def _whole(value: float | None) -> int | None:
    return round(value) if value is not None and abs(value - round(value)) < 1e-9 else None


def escalc_rows(arms: list[dict]) -> dict[str, list[dict]]:
    """The escalc inputs of each entry whose final values give them (an arm pair per entry)."""
    pairs: dict[tuple[str, int], dict[str, dict]] = {}
    for row in arms:
        pairs.setdefault((row["document_key"], row["entry"]), {})[row["arm"]] = row
    out: dict[str, list[dict]] = {kind: [] for kind in ESCALC_STEMS}
    for (_, _), pair in pairs.items():
        one, two = pair.get("intervention"), pair.get("comparator")
        if one is None or two is None:
            continue
        keys = {name: one[name] for name in (*_KEYS, *IDENTITY)}
        n1, n2 = _whole(one["n"]), _whole(two["n"])
        e1, e2 = _whole(one["events"]), _whole(two["events"])
        if None not in (n1, n2, e1, e2) and 0 <= e1 <= n1 and 0 <= e2 <= n2:
            out["dichotomous"].append(keys | {"ai": e1, "bi": n1 - e1, "ci": e2, "di": n2 - e2, "n1i": n1, "n2i": n2})
        means = (one["mean"], one["sd"], two["mean"], two["sd"])
        if None not in (n1, n2, *means):
            derived = [
                f"{arm['arm']} {cell}" for arm in (one, two) for cell in CELLS if arm[f"{cell}_source"] == "derived"
            ]
            out["continuous"].append(
                keys
                | dict(zip(("m1i", "sd1i", "m2i", "sd2i"), means, strict=True))
                | {"n1i": n1, "n2i": n2, "derived": ", ".join(derived) or None}
            )
        generic = _generic(one)
        if generic is not None:
            out["generic"].append(keys | generic)
    return out


def _generic(row: dict) -> dict | None:
    """yi and vi of a comparison reported as an estimate with its 95% CI (log scale for a ratio)."""
    measure, estimate, lower, upper = (
        row[name] for name in ("effect_measure", "effect_estimate", "ci_lower", "ci_upper")
    )
    if measure is None or None in (estimate, lower, upper):
        return None
    try:
        if measure in RATIOS:
            conversion = log_ratio_from_ci(estimate, lower, upper)
            se = float(conversion.notes[0].removeprefix("se="))
            return {"measure": measure, "yi": conversion.value, "vi": se**2, "arithmetic": conversion.arithmetic}
        if measure in ("MD", "SMD", "RD") and lower <= estimate <= upper:
            se = se_from_ci(lower, upper)
            said = f"yi = {estimate:g}; SE = ({upper:g} − {lower:g}) / 3.92 = {se:.4f}; vi = SE² = {se * se:.5f}"
            return {"measure": measure, "yi": estimate, "vi": se**2, "arithmetic": said}
    except ConversionError:
        return None
    return None


def arms_frame(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema=ARMS_SCHEMA)


def escalc_frames(arms: list[dict]) -> dict[str, pl.DataFrame]:
    return {kind: pl.DataFrame(rows, schema=ESCALC_SCHEMAS[kind]) for kind, rows in escalc_rows(arms).items()}
