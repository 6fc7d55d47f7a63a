"""Studies in the exports: each study's reports and its values reconciled across them (``review.study_values``),
one row per study × field in ``atlas_studies.*`` — the unit a meta-analysis counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import polars as pl

from atlas_pipeline.core.templates import Template
from atlas_pipeline.outputs.completion import DocumentState
from atlas_pipeline.review.decisions import value_text
from atlas_pipeline.review.study_values import StudyChoice, StudyValue, reconcile, report_values

STUDIES_STEM = "atlas_studies"
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

    @property
    def title(self) -> str:
        return next((r.parse.title for r in self.reports if r.parse and r.parse.title), "")

    @property
    def conflicts(self) -> int:
        return sum(1 for value in self.values.values() if value.state == "conflict")

    def values_by_report(self, template: Template) -> dict[str, dict[str, object]]:
        return {r.key: report_values(r.current_review, template) for r in self.reports}


def studies(states: list[DocumentState], template: Template, choices: Mapping[str, list[StudyChoice]]) -> list[Study]:
    """Every study of the knowledge base with its reports and reconciled values (reports with several first);
    ``choices``: each study's choices between its reports' values."""
    found: dict[str, Study] = {}
    for state in states:
        study_id = state.study_id or state.key
        found.setdefault(study_id, Study(study_id)).reports.append(state)
    for study in found.values():
        study.values = reconcile(study.values_by_report(template), choices.get(study.id, []))
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
