"""Agreement as data: per field, how often the two extractors agreed, how often a person kept the model's value, and
how often two reviewers agreed — percent agreement and Cohen's kappa (``grading.agreement``) over the current
documents. Written as ``atlas_agreement.csv`` with the exports, shown in task completion's metadata and on the review
page, so a team sees on its own documents where the models and the people part ways."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import polars as pl
from pydantic import BaseModel

from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.grading.agreement import KAPPA_KINDS, ValueAgreement, agreement_statistics, cohen_kappa, same_value
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.quality import PERSON_DECIDED

AGREEMENT_SCHEMA = {
    "field": pl.String,
    "models_compared": pl.Int64,
    "models_agreed": pl.Int64,
    "models_percent": pl.Float64,
    "models_kappa": pl.Float64,
    "found_by_one_model": pl.Int64,
    "person_checked": pl.Int64,
    "person_kept_model_value": pl.Int64,
    "person_percent": pl.Float64,
    "person_kappa": pl.Float64,
    "reviewers_compared": pl.Int64,
    "reviewers_agreed": pl.Int64,
    "reviewers_percent": pl.Float64,
    "reviewers_kappa": pl.Float64,
}


def model_agreement(fields: dict[str, Any]) -> list[ValueAgreement]:
    """Model A's and model B's values of one extraction record's fields (``extraction.dual`` set them side by side):
    B's value is A's where they agreed, its candidate where they did not."""
    values = []
    for name, field in fields.items():
        if not isinstance(field, dict) or not field.get("agreement"):
            continue
        state, value = field["agreement"], field.get("value")
        others = [c for c in field.get("candidates") or [] if c.get("extractor")]
        second = value if state == "agreed" else (others[-1].get("value") if others else None)
        values.append(ValueAgreement(name, state, value, second, ""))
    return values


@dataclass
class _Pairs:
    compared: int = 0
    agreed: int = 0
    pairs: list[tuple[Any, Any]] | None = None

    def add(self, first: Any, second: Any, agreed: bool) -> None:
        self.compared += 1
        self.agreed += agreed
        self.pairs = [*(self.pairs or []), (first, second)]

    def percent(self) -> float | None:
        return round(100 * self.agreed / self.compared, 1) if self.compared else None


def _name(field: str) -> str:
    group, _, bare = entry_field_parts(field)
    return f"{group}.{bare}" if group else bare


class AgreementInputs(BaseModel):
    """One document's part of the agreement report: its two models' values side by side, and per field decided by a
    person (model value, final value, kept) and by two reviewers (first, second, agreed)."""

    models: list[ValueAgreement] = []
    person: list[tuple[str, Any, Any, bool]] = []
    reviewers: list[tuple[str, Any, Any, bool]] = []


def agreement_inputs(state: DocumentState, template: Template) -> AgreementInputs | None:
    """What one document gives the agreement report (None: no current extraction to compare)."""
    if state.extraction is None or state.stale:
        return None
    found = AgreementInputs(models=model_agreement(state.extraction.fields))
    review = state.current_review
    for name, final in review.fields.items() if review else ():
        kind = getattr(template.field_definition(name), "kind", "text")
        if final.provenance in PERSON_DECIDED and final.decision:
            kept = final.provenance == "reviewer_approved" or (
                final.provenance == "reviewer_corrected" and same_value(final.final_value, final.model_value, kind)
            )
            found.person.append((_name(name), final.model_value, final.final_value, kept))
        results = list(final.reviewer_values.values())
        if len(results) >= 2:  # what their decisions leave: approving 42 and correcting to 42 agree
            first, second = results[0], results[1]
            agreed = (first is None and second is None) or (
                first is not None and second is not None and same_value(first, second, kind)
            )
            found.reviewers.append((_name(name), first, second, agreed))
    return found


def agreement_rows(states: Iterable[DocumentState], template: Template) -> list[dict[str, Any]]:
    """One row per field of the template (a group's field over its entries) with anything to compare: model A vs
    model B, the model vs the person who decided, reviewer vs reviewer."""
    inputs = [agreement_inputs(state, template) for state in states]
    return agreement_rows_of([found for found in inputs if found is not None], template)


def agreement_rows_of(inputs: Iterable[AgreementInputs], template: Template) -> list[dict[str, Any]]:
    """``agreement_rows`` from each document's part."""
    inputs = list(inputs)
    models = agreement_statistics([found.models for found in inputs], template)
    person: dict[str, _Pairs] = {}
    reviewers: dict[str, _Pairs] = {}
    for found in inputs:
        for name, first, second, agreed in found.person:
            person.setdefault(name, _Pairs()).add(first, second, agreed)
        for name, first, second, agreed in found.reviewers:
            reviewers.setdefault(name, _Pairs()).add(first, second, agreed)
    kinds = {
        (f"{module.name}.{field.name}" if module.repeating else field.name): field.kind
        for module in template.modules
        for field in module.fields
    }
    rows = []
    for model in models:
        by_person, by_reviewers = person.get(model.field, _Pairs()), reviewers.get(model.field, _Pairs())
        if not (model.compared or model.only_one or by_person.compared or by_reviewers.compared):
            continue
        labels = kinds.get(model.field) in KAPPA_KINDS
        rows.append(
            {
                "field": model.field,
                "models_compared": model.compared,
                "models_agreed": model.agreed,
                "models_percent": model.percent_agreement,
                "models_kappa": model.kappa,
                "found_by_one_model": model.only_one,
                "person_checked": by_person.compared,
                "person_kept_model_value": by_person.agreed,
                "person_percent": by_person.percent(),
                "person_kappa": cohen_kappa(by_person.pairs or []) if labels else None,
                "reviewers_compared": by_reviewers.compared,
                "reviewers_agreed": by_reviewers.agreed,
                "reviewers_percent": by_reviewers.percent(),
                "reviewers_kappa": cohen_kappa(by_reviewers.pairs or []) if labels and by_reviewers.compared else None,
            }
        )
    return rows


def agreement_markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a markdown table (Dagster metadata, the review page's source)."""
    if not rows:
        return "no field compared yet: declare a second extractor (ATLAS_LLM_SECOND_MODEL) or decide on values"

    def shown(percent: float | None, kappa: float | None, n: int) -> str:
        if not n:
            return "—"
        return f"{percent:g}% of {n}" + (f", κ {kappa:.2f}" if kappa is not None else "")

    lines = [
        "| field | model A vs B | found by one model | model vs person | reviewer vs reviewer |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| {row['field']} | {shown(row['models_percent'], row['models_kappa'], row['models_compared'])} | "
            f"{row['found_by_one_model']} | "
            f"{shown(row['person_percent'], row['person_kappa'], row['person_checked'])} | "
            f"{shown(row['reviewers_percent'], row['reviewers_kappa'], row['reviewers_compared'])} |"
        )
    return "\n".join(lines)
