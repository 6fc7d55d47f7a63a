"""Studies in the exports: each study's reports and its values reconciled across them (``review.study_values``),
one row per study × field in ``atlas_studies.*`` — the unit a meta-analysis counts.

A value's candidates are its *sources*: each report, and each of several entries of one report that name the same
entry (two people who typed the same outcome). An entry is matched across sources by its identity, case and spacing
aside, so that the analysis files count it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from atlas_pipeline.core.templates import Template
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.decisions import value_text
from atlas_pipeline.review.final_values import FinalField
from atlas_pipeline.review.study_values import StudyChoice, StudyValue, reconcile, report_fields

STUDY_SCHEMA = {
    "study_id": pl.String,
    "field": pl.String,
    "value": pl.String,
    "state": pl.String,  # single | agreed | chosen | conflict
    "source_report": pl.String,
    "reports": pl.Int64,
    "values_by_report": pl.String,  # "PMC1.pdf: 30; PMC1.nxml: 31"
    "chosen_by": pl.String,
    "chosen_at": pl.String,
    "note": pl.String,
}


@dataclass
class Study:
    id: str
    reports: list[DocumentState] = field(default_factory=list)
    values: dict[str, StudyValue] = field(default_factory=dict)
    # source → study field → (its report, the record's field name): where each candidate value is
    where: dict[str, dict[str, tuple[DocumentState, str]]] = field(default_factory=dict)

    @property
    def title(self) -> str:
        return next((r.parse.title for r in self.reports if r.parse and r.parse.title), "")

    @property
    def conflicts(self) -> int:
        return sum(1 for value in self.values.values() if value.state == "conflict")

    @property
    def sources(self) -> list[str]:
        """The reports, then the entries of a report that are candidates of their own (its columns on the page)."""
        found = [r.key for r in self.reports]
        return found + sorted(source for source in self.where if source not in found)

    def report_of(self, source: str) -> str:
        """The report a source is, or is an entry of."""
        fields = self.where.get(source, {})
        return next(iter(fields.values()))[0].key if fields else source

    def values_by_report(self, template: Template | None = None) -> dict[str, dict[str, object]]:
        """Each source's accepted values by study field (what :func:`reconcile` and a person's choice compare)."""
        return {
            source: {name: _final(report, record).final_value for name, (report, record) in fields.items()}
            for source, fields in self.where.items()
        }

    def final(self, name: str) -> tuple[DocumentState, FinalField] | None:
        """The report and final field the study's value of ``name`` comes from (the chosen or single source; the
        first of agreeing ones), or None (no value, or reports in conflict)."""
        value = self.values.get(name)
        if value is None or value.state == "conflict":
            return None
        source = value.source or next(iter(value.reports), "")
        found = self.where.get(source, {}).get(name)
        return (found[0], _final(found[0], found[1])) if found else None


def _final(report: DocumentState, record: str) -> FinalField:
    assert report.current_review is not None  # a source is made only from a report's review
    return report.current_review.fields[record]


def _sources(study: Study, template: Template) -> dict[str, dict[str, tuple[DocumentState, str]]]:
    """Every report's sources with their entry labels made one across reports (case aside: the first as written)."""
    first: dict[str, str] = {}
    out: dict[str, dict[str, tuple[DocumentState, str]]] = {}
    for report in study.reports:
        for source, fields in report_fields(report.current_review, template, report.key).items():
            named = out.setdefault(source, {})
            for name, record in fields.items():
                if "[" in name:
                    label, _, bare = name.rpartition(".")
                    name = f"{first.setdefault(label.casefold(), label)}.{bare}"
                named[name] = (report, record)
    return out


def studies(states: list[DocumentState], template: Template, choices: Mapping[str, list[StudyChoice]]) -> list[Study]:
    """Every study of the knowledge base with its reports and reconciled values (reports with several first);
    ``choices``: each study's choices between its reports' values. A document removed from the knowledge base reports
    no study: it leaves the studies, the analysis files and the pages (the document exports keep it, marked)."""
    found: dict[str, Study] = {}
    for state in states:
        if state.source_removed:
            continue
        study_id = state.study_id or state.key
        found.setdefault(study_id, Study(study_id)).reports.append(state)
    for study in found.values():
        study.where = _sources(study, template)
        study.values = reconcile(study.values_by_report(), choices.get(study.id, []))
    return sorted(found.values(), key=lambda s: (-len(s.reports), s.id))


def studies_frame(found: list[Study]) -> pl.DataFrame:
    rows = []
    for study in found:
        for name, value in study.values.items():
            rows.append(
                {
                    "study_id": study.id,
                    "field": name,
                    "value": None if value.value is None else value_text(value.value),
                    "state": value.state,
                    "source_report": value.source or None,
                    "reports": len(value.reports),
                    "values_by_report": "; ".join(f"{k}: {value_text(v)}" for k, v in value.reports.items()),
                    "chosen_by": value.chosen_by or None,
                    "chosen_at": value.chosen_at or None,
                    "note": value.note or None,
                }
            )
    return pl.DataFrame(rows, schema=STUDY_SCHEMA, orient="row")
