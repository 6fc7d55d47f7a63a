"""The desk's RoB 2 panel: per result, each domain's signalling questions as a form — the conditional ones shown only
when the answers above ask them (the page's script reads each question's conditions from the tool) —, the judgement
the guidance's algorithm makes of the answers so far with the path it took, and a person's override with its reason
(saved by ``review_page.rob2_routes``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from atlas_pipeline.core.rob2_judgements import Override
from atlas_pipeline.core.rob2_module import (
    DOMAIN_CODES,
    GROUP,
    IDENTITY,
    OVERALL,
    SHORT_NAMES,
    judge_entry,
    judgement_of,
    override_field,
    question_field,
    tool_of,
)
from atlas_pipeline.core.rob2_tool import ANSWER_LABELS, Answer, Domain
from atlas_pipeline.core.templates import Template, entry_field_name, entry_field_parts
from atlas_pipeline.review.final_values import FinalField


@dataclass
class QuestionView:
    id: str
    text: str
    options: list[tuple[str, str]]  # (answer, label)
    conditions: str  # JSON the page's script reads: [{"questions": […], "answers": […], "every": false}]
    condition_text: str
    value: str  # what the select shows: the person's final answer, else the model's proposal (not when blind)
    was: str  # the final answer (a person's, or accepted): what a change is measured against
    state: str  # the field's provenance ("" for a question nobody answered)
    proposal: str  # the model's answer and its quote, as shown
    asked: bool | None


@dataclass
class DomainView:
    code: str
    name: str
    questions: list[QuestionView]
    proposed: str  # "Low", or "" while an answer is missing
    path: str
    missing: str
    override: str  # the override's judgement ("" when none)
    reason: str
    judgement: str  # what the review reports


@dataclass
class ResultView:
    entry: int
    outcome: str
    time_point: str
    domains: list[DomainView] = field(default_factory=list)
    overall: DomainView | None = None


def decided(final: FinalField | None) -> bool:
    return final is not None and final.decided and final.provenance != "rejected" and final.final_value is not None


def _entries(fields: dict[str, FinalField]) -> list[int]:
    numbers = {entry_field_parts(name)[1] for name in fields if entry_field_parts(name)[0] == GROUP}
    return sorted(n for n in numbers if n is not None)


def _shown(final: FinalField | None, blind: str) -> tuple[str, str]:
    """(the answer shown, the final answer) of a question's field."""
    if final is None or final.provenance == "rejected":
        return "", ""
    if decided(final):
        return str(final.final_value), str(final.final_value)
    proposal = "" if blind == "models" or final.model_value is None else str(final.model_value)
    return proposal, ""


def rob2_panel(template: Template, fields: dict[str, FinalField], blind: str = "") -> list[ResultView]:
    """Every RoB 2 entry of the document (the model's and those a person added), ready for the page."""
    module = template.rob2
    if module is None:
        return []
    tool = tool_of(module)
    results = []
    for number in _entries(fields):
        if all(fields[n].provenance == "rejected" for n in fields if entry_field_parts(n)[:2] == (GROUP, number)):
            continue  # an entry rejected whole is no result
        identity = {name: _shown(fields.get(entry_field_name(GROUP, number, name)), "")[0] or "" for name in IDENTITY}
        values: dict[str, Any] = {}
        view = ResultView(number, identity[IDENTITY[0]], identity[IDENTITY[1]])
        shown_of: dict[str, tuple[str, str, FinalField | None]] = {}
        for domain in tool.domains:
            for question in domain.questions:
                final = fields.get(entry_field_name(GROUP, number, question_field(question.id)))
                shown, was = _shown(final, blind)
                shown_of[question.id] = (shown, was, final)
                if shown:
                    values[question_field(question.id)] = shown
        overrides, reasons = {}, {}
        for code in (*DOMAIN_CODES, OVERALL):
            final = fields.get(entry_field_name(GROUP, number, override_field(code)))
            judgement = judgement_of(final.final_value) if decided(final) else None
            if judgement is not None and final is not None:
                overrides[code] = Override(judgement, final.note, final.reviewer, final.decided_at)
                reasons[code] = final.note
        judged, _ = judge_entry(tool, values, overrides)
        by_code = {j.domain: j for j in judged}
        for domain in tool.domains:
            view.domains.append(_domain_view(domain, by_code[domain.code], shown_of, values, reasons, blind))
        overall = by_code[OVERALL]
        view.overall = DomainView(
            OVERALL,
            SHORT_NAMES[OVERALL],
            [],
            overall.proposed.value if overall.proposed else "",
            ", ".join(overall.path),
            ", ".join(overall.missing),
            overall.override.judgement.value if overall.override else "",
            reasons.get(OVERALL, ""),
            overall.judgement.value if overall.judgement else "",
        )
        results.append(view)
    return results


def _domain_view(domain: Domain, judged, shown_of, values, reasons, blind: str) -> DomainView:
    given = {q.id: Answer(values[question_field(q.id)]) for q in domain.questions if question_field(q.id) in values}
    asked = domain.asked(given)
    questions = []
    for question in domain.questions:
        shown, was, final = shown_of[question.id]
        proposal = ""
        if final is not None and blind != "models" and final.model_value is not None:
            quote = f" — “{final.quote}”" if final.quote else ""
            proposal = f"model: {final.model_value}{quote}"
        conditions = [
            {"questions": list(c.questions), "answers": sorted(a.value for a in c.answers), "every": c.every}
            for c in question.asked_when
        ]
        questions.append(
            QuestionView(
                question.id,
                question.text,
                [(a.value, ANSWER_LABELS[a]) for a in question.options if a != Answer.NOT_APPLICABLE],
                json.dumps(conditions),
                question.condition_text(),
                shown,
                was,
                final.provenance if final is not None else "",
                proposal,
                asked[question.id],
            )
        )
    return DomainView(
        domain.code,
        domain.name,
        questions,
        judged.proposed.value if judged.proposed else "",
        ", ".join(judged.path),
        ", ".join(judged.missing),
        judged.override.judgement.value if judged.override else "",
        reasons.get(domain.code, ""),
        judged.judgement.value if judged.judgement else "",
    )
