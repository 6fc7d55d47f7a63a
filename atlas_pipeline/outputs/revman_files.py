"""RevMan Web's study-centric import: four CSV files, one row per study, arm, result and study, from final values.

RevMan Web (Cochrane's review software) imports study data as four CSVs — *study information*, *study arms*,
*study results* and *risk of bias* — the files Covidence exports and RevMan's own data package holds. They are
written in RevMan's layout: UTF-8 with a byte-order mark, CRLF line ends, and RevMan's column names —

- ``atlas_revman_study_information.csv``: ``Study, Year, Data source, Char: Methods, Char: Participants,
  Char: Interventions, Char: Outcomes, Char: Notes`` (one row per study; RevMan's default characteristics);
- ``atlas_revman_study_arms.csv``: ``Study, Arm, Description, Intervention`` (one row per arm a study reports);
- ``atlas_revman_study_results.csv``: one row per arm for arm-level data (``Sample size`` and ``Cases`` for a
  dichotomous outcome, ``Mean``, ``SD`` and ``Sample size`` for a continuous one) and one row per comparison for
  contrast-level data (``Arm`` against ``Reference arm``; a ratio's estimate and 95% CI in ``Exp mean``,
  ``Exp CI start``, ``Exp CI end``, a difference's in ``Mean``, ``CI start``, ``CI end``);
- ``atlas_revman_risk_of_bias.csv``: ``Study`` then ``Domain (judgement): D`` and ``Domain (support): D`` per
  domain (Risk of Bias 1: one row per study), the support being the quote the judgement rests on.

Only final values are written (``outputs.analysis_files``: accepted by the team's policy, decided by a person, or
derived from such values and accepted in turn); the ``Footnotes`` of a result row say where each number came from —
the document, the quote's start, or a derivation's arithmetic — so that a reviewer in RevMan can check it. A study is
named as Cochrane names it (first author and year: the template's ``study_id`` when accepted, else the parsed
authors and year, else Atlas's study id), and a study with several reports is one study here (``outputs.study_report``).

RevMan matches ``Intervention`` and ``Outcome`` to the review's criteria by name: the review must define the
interventions and outcomes the files name (or the files be edited to the review's names) before the import.
"""

from __future__ import annotations

import csv
import io
import math
import re
from collections.abc import Iterable
from statistics import NormalDist
from typing import Any

from atlas_pipeline.core.redaction import redact
from atlas_pipeline.core.statuses import WENT_THROUGH, DocumentStatus
from atlas_pipeline.core.templates import Template
from atlas_pipeline.outputs.analysis_files import RATIOS, Entry, arm_rows, entry_key
from atlas_pipeline.outputs.export_files import REVMAN_STEMS
from atlas_pipeline.outputs.study_labels import study_labels, study_year
from atlas_pipeline.outputs.study_report import Study
from atlas_pipeline.outputs.workbook import neutralise_text
from atlas_pipeline.read_model.document_state import DocumentState

CHARACTERISTICS = ("Methods", "Participants", "Interventions", "Outcomes", "Notes")
STUDY_INFORMATION_COLUMNS = ("Study", "Year", "Data source", *(f"Char: {name}" for name in CHARACTERISTICS))
STUDY_ARMS_COLUMNS = ("Study", "Arm", "Description", "Intervention")
STUDY_RESULTS_COLUMNS = (
    *("Study", "Outcome", "Data type", "Effect measure", "Arm", "Reference arm"),
    *("Sample size", "Cases", "Mean", "SD", "SE", "Variance", "CI level", "CI start", "CI end"),
    *("Exp mean", "Exp CI start", "Exp CI end", "t-test", "z-test", "P value"),
    *("Covariance method", "Covariance", "Other arm 1", "Other arm 2", "Correlation arm 1", "Correlation arm 2"),
    *("Correlation", "Other mean", "Other SE", "Other variance", "Other CI level", "Other CI start", "Other CI end"),
    *("Other exp mean", "Other exp CI start", "Other exp CI end", "Other t-test", "Other z-test", "Other P value"),
    "Footnotes",
)
DATA_SOURCE = "PUB"  # RevMan's code for published data: every value comes from a report
EFFECT_MEASURES = {
    "RR": "Risk Ratio",
    "OR": "Odds Ratio",
    "HR": "Hazard Ratio",
    "RD": "Risk Difference",
    "MD": "Mean Difference",
    "SMD": "Standardized Mean Difference",
}
CONTINUOUS_MEASURES = frozenset({"MD", "SMD"})
# the seed template's domains under their RoB 1 names in RevMan; another template's domain is named by its field's
# description
ROB_DOMAINS = {
    "rob_randomization": "Random sequence generation (selection bias)",
    "rob_allocation": "Allocation concealment (selection bias)",
    "rob_blinding": "Blinding of participants and personnel (performance bias)",
    "rob_attrition": "Incomplete outcome data (attrition bias)",
}
JUDGEMENTS = {"low": "Low risk", "high": "High risk", "unclear": "Unclear risk", "some concerns": "Unclear risk"}
METHODS_MODULES = ("metadata",)
PARTICIPANTS_MODULES = ("baseline",)
ROB_MODULE = re.compile(r"^(rob|risk_of_bias)(_|$)")
QUOTE_LENGTH = 160


def _number(value: Any) -> str:
    if value is None or value == "":
        return ""
    number = float(value)
    if not math.isfinite(number):
        return ""
    return str(round(number)) if number == round(number) and abs(number) < 1e15 else format(number, ".10g")


def _text(value: Any) -> str:
    return "" if value is None else str(value).strip()


def _short(quote: str | None) -> str:
    quote = " ".join((quote or "").split())
    return quote if len(quote) <= QUOTE_LENGTH else quote[: QUOTE_LENGTH - 1] + "…"


def _described(study: Study, template: Template | None, modules: Iterable[str]) -> str:
    parts: list[str] = []
    if template is None:
        return ""
    for module in template.modules:
        if module.name not in modules or module.repeating:
            continue
        for field in module.fields:
            value = study.values.get(field.name)
            if value is not None and value.value is not None and value.state != "conflict":
                parts.append(f"{field.description.split(',')[0].split('(')[0].strip()}: {_text(value.value)}")
    return "; ".join(parts)


def _arm(row: dict) -> str:
    """An arm's name in RevMan: as the outcome entry names it, else its role."""
    return _text(row.get("arm_name")) or row["arm"].capitalize()


def _arm_names(rows: list[dict], study: Study) -> list[str]:
    """The arms a study's results name; a study without results names its baseline arms."""
    if rows:
        return list(dict.fromkeys(_arm(row) for row in rows))
    named = (_text(_value(study, name)) for name in ("treatment_name", "control_name"))
    return [name for name in named if name]


def _outcome(row: dict) -> str:
    outcome = _text(row.get("outcome")) or f"outcome {row['entry']}"
    return f"{outcome} ({row['time_point']})" if row.get("time_point") else outcome


def study_information_rows(studies: list[Study], template: Template | None, labels: dict[str, str], arms: dict) -> list:
    rows = []
    for study in studies:
        mine = arms.get(study.id, [])
        conflicts = sorted(name for name, value in study.values.items() if value.state == "conflict")
        notes = [f"Atlas study {study.id}; reports: {', '.join(r.key for r in study.reports)}"]
        if conflicts:
            notes.append(f"values in conflict between reports, not written: {', '.join(conflicts)}")
        rows.append(
            {
                "Study": labels[study.id],
                "Year": study_year(study),
                "Data source": DATA_SOURCE,
                "Char: Methods": _described(study, template, METHODS_MODULES),
                "Char: Participants": _described(study, template, PARTICIPANTS_MODULES),
                "Char: Interventions": "; ".join(_arm_names(mine, study)),
                "Char: Outcomes": "; ".join(dict.fromkeys(_outcome(row) for row in mine)),
                "Char: Notes": ". ".join(notes),
            }
        )
    return rows


def study_arm_rows(studies: list[Study], labels: dict[str, str], arms: dict) -> list[dict]:
    rows = []
    for study in studies:
        mine = arms.get(study.id, [])
        roles = {_arm(row): row["arm"] for row in mine}
        roles = roles or {_text(_value(study, "treatment_name")): "intervention"}
        roles.setdefault(_text(_value(study, "control_name")), "comparator")
        for name in _arm_names(mine, study):
            description = f"{roles[name]} arm, as the report names it" if name in roles else "as the report names it"
            rows.append({"Study": labels[study.id], "Arm": name, "Description": description, "Intervention": name})
    return rows


def _value(study: Study, name: str) -> Any:
    value = study.values.get(name)
    return None if value is None or value.state == "conflict" else value.value


def _footnote(entry: Entry | None, row: dict, cells: dict[str, str]) -> str:
    """Where each number of a result row comes from: its report, its quote or its derivation's arithmetic."""
    said = []
    for column, name in cells.items():
        cell = entry.cells.get(name) if entry is not None else None
        if cell is None or cell.value is None:
            continue
        where = f"{cell.document} {cell.field}"
        if cell.derived:
            said.append(f"{column} derived ({cell.derived}) from {where}: {cell.evidence or ''}".strip())
        elif cell.evidence:
            said.append(f'{column} "{_short(cell.evidence)}" ({where})')
        else:
            said.append(f"{column} ({where}, no quote)")
    head = f"Atlas study {row['study_id']}"
    if row.get("note"):
        head += f" ({row['note']})"
    return head + (": " + "; ".join(said) if said else "")


def _empty(study: str, outcome: str, data_type: str) -> dict:
    return {column: "" for column in STUDY_RESULTS_COLUMNS} | {
        "Study": study,
        "Outcome": outcome,
        "Data type": data_type,
    }


def study_result_rows(
    studies: list[Study], labels: dict[str, str], escalc: dict[str, list[dict]], entries: list[Entry]
) -> list[dict]:
    """Arm-level rows (one per arm with its numbers) and contrast-level rows (one per comparison with an estimate
    and its CI), from the very escalc rows metafor reads — each study entry once, so that RevMan and metafor are
    handed the same numbers; a contrast already given by arm-level data is not written again."""
    by_entry = {(e.study_id, e.document_key, e.entry, e.identity.get("outcome")): e for e in entries}
    ours = {study.id for study in studies}
    rows: dict[str, list[dict]] = {study.id: [] for study in studies}
    arm_level: set[tuple] = set()

    for row in escalc["dichotomous"]:
        if row["study_id"] not in ours:
            continue
        entry, label, outcome = by_entry.get(entry_key(row)), labels[row["study_id"]], _outcome(row)
        arm_level.add(entry_key(row))
        for arm, cases, size in (("intervention", "ai", "n1i"), ("comparator", "ci", "n2i")):
            names = {
                "Cases": f"events_{arm}",
                "Sample size": f"total_{arm}" if _has(entry, f"total_{arm}") else f"n_{arm}",
            }
            _add(
                rows[row["study_id"]],
                _empty(label, outcome, "Dichotomous")
                | {"Arm": _arm_name(row, arm), "Sample size": str(row[size]), "Cases": str(row[cases])}
                | {"Footnotes": _footnote(entry, row, names)},
            )
    for row in escalc["continuous"]:
        if row["study_id"] not in ours:
            continue
        entry, label, outcome = by_entry.get(entry_key(row)), labels[row["study_id"]], _outcome(row)
        arm_level.add(entry_key(row))
        change = "_change" if row["values"] != "final" else ""
        outcome += " (change from baseline)" if change else ""
        for arm, mean, sd, size in (("intervention", "m1i", "sd1i", "n1i"), ("comparator", "m2i", "sd2i", "n2i")):
            names = {"Mean": f"mean{change}_{arm}", "SD": f"sd{change}_{arm}"}
            names["Sample size"] = f"n_{arm}" if _has(entry, f"n_{arm}") else f"total_{arm}"
            _add(
                rows[row["study_id"]],
                _empty(label, outcome, "Continuous")
                | {"Arm": _arm_name(row, arm), "Sample size": str(row[size])}
                | {"Mean": _number(row[mean]), "SD": _number(row[sd]), "Footnotes": _footnote(entry, row, names)},
            )
    for row in escalc["generic"]:
        if row["study_id"] not in ours or entry_key(row) in arm_level or row["measure"] not in EFFECT_MEASURES:
            continue
        entry, label, outcome = by_entry.get(entry_key(row)), labels[row["study_id"]], _outcome(row)
        measure = row["measure"]
        data_type = "Continuous" if measure in CONTINUOUS_MEASURES else "Dichotomous"
        columns = ("Exp mean", "Exp CI start", "Exp CI end") if measure in RATIOS else ("Mean", "CI start", "CI end")
        numbers = (row["estimate"], row["ci_lower"], row["ci_upper"])
        names = dict(zip(columns, ("effect_estimate", "ci_lower", "ci_upper"), strict=True))
        level = float(row["ci_level"] or 95)
        # a difference's SE as escalc computed it (with t for small groups), so that RevMan's variance is metafor's —
        # at 95% only: from a CI of another level RevMan computes the SE itself (normal z), so the CI goes alone and
        # the footnote says both SEs
        se = {"SE": _number(math.sqrt(row["vi"]))} if measure not in RATIOS and level == 95 else {}
        said = f"; SE {row['arithmetic']}" if se else ""
        if measure not in RATIOS and level != 95:
            said = f"; {_other_level(row, level)}"
        _add(
            rows[row["study_id"]],
            _empty(label, outcome, data_type)
            | {"Effect measure": EFFECT_MEASURES[measure], "Arm": _arm_name(row, "intervention")}
            | {"Reference arm": _arm_name(row, "comparator"), "CI level": _number(level)}
            | {column: _number(value) for column, value in zip(columns, numbers, strict=True)}
            | se
            | {"Footnotes": _footnote(entry, row, names) + said},
        )
    return [row for study in studies for row in rows[study.id]]


def _other_level(row: dict, level: float) -> str:
    """What RevMan makes of a difference's CI of another level than 95% (it computes the SE from the CI with the
    normal z of that level), beside what escalc's ``vi`` holds (t with each group under 60, as the Handbook says)."""
    z = NormalDist().inv_cdf(0.5 + level / 200)
    revman = (row["ci_upper"] - row["ci_lower"]) / (2 * z)
    return (
        f"{level:g}% CI: no SE written — RevMan computes it from the CI, (upper − lower) / (2 × {z:.4f}) = "
        f"{revman:.4f}; escalc's vi: SE {row['arithmetic']}"
    )


RESULT_KEY = ("Study", "Outcome", "Data type", "Effect measure", "Arm", "Reference arm")
NUMBERS = ("Sample size", "Cases", "Mean", "SD", "SE", "CI start", "CI end", "Exp mean", "Exp CI start", "Exp CI end")


def _add(rows: list[dict], result: dict) -> None:
    """A result row, once: an arm two comparisons share (a multi-arm trial's control) is written once; an arm given
    two sets of numbers keeps the first and names the other in its footnote — nothing counted twice, nothing unseen."""
    key = tuple(result[column] for column in RESULT_KEY)
    same = next((row for row in rows if tuple(row[column] for column in RESULT_KEY) == key), None)
    if same is None:
        rows.append(result)
    elif any(same[column] != result[column] for column in NUMBERS):
        shown = ", ".join(f"{column} {result[column]}" for column in NUMBERS if result[column])
        same["Footnotes"] += f" (another entry gives {shown}: not written, the first is)"


def _has(entry: Entry | None, name: str) -> bool:
    return entry is not None and entry.number(name) is not None


def _arm_name(row: dict, arm: str) -> str:
    return _text(row.get(arm)) or arm.capitalize()


def rob_domains(template: Template) -> list[tuple[str, str]]:
    """(field, RevMan domain name) of each risk-of-bias judgement the template asks for."""
    domains: list[tuple[str, str]] = []
    for module in template.modules:
        if not ROB_MODULE.match(module.name) or module.repeating:
            continue
        for field in module.fields:
            if field.enum:
                name = ROB_DOMAINS.get(field.name) or field.description.strip() or field.name
                if any(name == taken for _, taken in domains):
                    name = f"{name} ({field.name})"  # two domains never share a column
                domains.append((field.name, name))
    return domains


def risk_of_bias_rows(studies: list[Study], template: Template | None, labels: dict[str, str]) -> list[dict]:
    domains = rob_domains(template) if template else []
    rows = []
    for study in studies:
        row = {"Study": labels[study.id]}
        for field, domain in domains:
            value = _text(_value(study, field))
            judgement = JUDGEMENTS.get(value.lower(), value)
            support = _support(study, field)
            if value.lower() == "some concerns":
                support = f"Atlas judged 'some concerns' (RoB 2). {support}".strip()
            row[f"Domain (judgement): {domain}"] = judgement
            row[f"Domain (support): {domain}"] = support
        rows.append(row)
    return rows


def _support(study: Study, field: str) -> str:
    value = study.values.get(field)
    if value is None or value.value is None:
        return ""
    report = next((r for r in study.reports if r.key == value.source), None) or next(
        (r for r in study.reports if r.key in value.reports), None
    )
    final = report.current_review.fields.get(field) if report and report.current_review else None
    quote = (final.corrected_quote or final.quote) if final else None
    return f'"{_short(quote)}" ({report.key})' if quote and report else ""


def rob_columns(template: Template) -> tuple[str, ...]:
    pairs = [(f"Domain (judgement): {d}", f"Domain (support): {d}") for _, d in rob_domains(template)]
    return ("Study", *(column for pair in pairs for column in pair))


def csv_bytes(columns: Iterable[str], rows: list[dict], secrets: list[str] | None = None) -> bytes:
    """RevMan's CSV: UTF-8 with a byte-order mark, CRLF line ends, every row with every column (a text a spreadsheet
    would run as a formula opens as text, as in every CSV Atlas writes)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=list(columns), lineterminator="\r\n")
    writer.writeheader()
    secrets = secrets or []
    writer.writerows(
        {name: neutralise_text(redact(str(value), secrets=secrets)) for name, value in row.items()} for row in rows
    )
    return ("\ufeff" + buffer.getvalue()).encode()


def _extracted(report: DocumentState) -> bool:
    """A report that went through extraction, or is being extracted again (its last review still stands)."""
    again = report.status in (DocumentStatus.EXTRACTING, DocumentStatus.WAITING) and report.current_review is not None
    return report.status in WENT_THROUGH or again


def revman_files(
    studies: list[Study],
    template: Template | None,
    entries: list[Entry],
    escalc: dict[str, list[dict]],
    secrets: list[str] | None = None,
) -> dict[str, bytes]:
    """The four import files (stem → bytes) for ``studies``, their entries (``analysis_files.study_entries``) and
    the escalc rows made from them; a study none of whose reports went through extraction (failed, skipped, pending)
    is not one to import. Without a template there are no values: the files hold their headers. ``secrets`` are
    masked in every cell."""
    studies = [s for s in studies if any(_extracted(report) for report in s.reports)]
    studies = studies if template is not None else []
    labels = study_labels(studies)
    studies = sorted(studies, key=lambda study: labels[study.id].casefold())
    by_study: dict[str, list[dict]] = {}
    for row in arm_rows(entries):
        by_study.setdefault(row["study_id"], []).append(row)
    return {
        REVMAN_STEMS["study_information"]: csv_bytes(
            STUDY_INFORMATION_COLUMNS, study_information_rows(studies, template, labels, by_study), secrets
        ),
        REVMAN_STEMS["study_arms"]: csv_bytes(STUDY_ARMS_COLUMNS, study_arm_rows(studies, labels, by_study), secrets),
        REVMAN_STEMS["study_results"]: csv_bytes(
            STUDY_RESULTS_COLUMNS, study_result_rows(studies, labels, escalc, entries), secrets
        ),
        REVMAN_STEMS["risk_of_bias"]: csv_bytes(
            rob_columns(template) if template else ("Study",), risk_of_bias_rows(studies, template, labels), secrets
        ),
    }
