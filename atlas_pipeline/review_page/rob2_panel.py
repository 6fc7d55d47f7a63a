"""The desk's RoB 2 panel: per result, each domain's signalling questions as a form — the conditional ones shown only
when the answers above ask them (the page's script reads each question's conditions from the tool) —, the judgement
the guidance's algorithm makes of the answers so far with the path it took, and a person's override with its reason
(saved by ``review_page.rob2_routes``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from atlas_pipeline.core.rob2_judgements import DomainJudgement, Override
from atlas_pipeline.core.rob2_module import (
    DOMAIN_CODES,
    GROUP,
    IDENTITY,
    OVERALL,
    SHORT_NAMES,
    entry_answers,
    judge_entry,
    judgement_of,
    override_field,
    question_field,
    tool_of,
)
from atlas_pipeline.core.rob2_tool import ANSWER_LABELS, Answer
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
    if_applicable: bool  # "[If applicable]": a person may answer NA (the review does not address it)
    disputed: str = ""  # two reviewers' answers that differ: what each said (an adjudicator settles)

    @property
    def hidden(self) -> bool:
        """Not asked given the answers above (or not known yet, and not answered): the page's script agrees."""
        return self.asked is False or (self.asked is None and not self.value)


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
    as_shown: str = ""  # what the answers as shown (proposals awaiting a person included) would give
    override_disputed: str = ""  # two reviewers' overrides that differ: what each said (an adjudicator settles)

    @property
    def disputed(self) -> bool:
        return bool(self.override_disputed) or any(q.disputed for q in self.questions)


@dataclass
class ResultView:
    entry: int
    outcome: str
    time_point: str
    domains: list[DomainView] = field(default_factory=list)
    overall: DomainView | None = None
    problems: list[str] = field(default_factory=list)  # overrides that cannot stand (no judgement to depart from)


def decided(final: FinalField | None) -> bool:
    return final is not None and final.decided and final.provenance != "rejected" and final.final_value is not None


def _entries(fields: dict[str, FinalField]) -> list[int]:
    numbers = {entry_field_parts(name)[1] for name in fields if entry_field_parts(name)[0] == GROUP}
    return sorted(n for n in numbers if n is not None)


def _shown(final: FinalField | None, blind: str) -> tuple[str, str]:
    """(the answer shown, the final answer) of a question's field: a person's, else the model's proposal (not in a
    pass blind to the models)."""
    if final is None or final.provenance == "rejected":
        return "", ""
    if decided(final) and not (blind == "models" and final.provenance == "model_verified"):
        # disputed between reviewers: no answer stands, so that any choice — the latest's too — settles it
        return str(final.final_value), "" if final.disagreement else str(final.final_value)
    proposal = "" if blind == "models" or final.model_value is None else str(final.model_value)
    return proposal, ""


def _judged(tool, values: dict[str, Any], overrides) -> tuple[dict[str, DomainJudgement], list[str]]:
    judged, problems = judge_entry(tool, values, overrides)
    return {j.domain: j for j in judged}, problems


def rob2_panel(
    template: Template, fields: dict[str, FinalField], blind: str = "", extracted: dict[str, Any] | None = None
) -> list[ResultView]:
    """Every RoB 2 entry of the document (the model's and those a person added), ready for the page: each domain
    judged from the final answers only (as the files are), and — while proposals await a person — what the answers
    as shown would give. ``extracted``: the extraction record's fields (the model's notes: what it looked for)."""
    module = template.rob2
    if module is None:
        return []
    tool = tool_of(module)
    extracted = extracted or {}
    results = []
    for number in _entries(fields):
        if all(fields[n].provenance == "rejected" for n in fields if entry_field_parts(n)[:2] == (GROUP, number)):
            continue  # an entry rejected whole is no result
        named = [_shown(fields.get(entry_field_name(GROUP, number, name)), blind)[0] for name in IDENTITY]
        view = ResultView(number, named[0], named[1])
        final_values: dict[str, Any] = {}
        shown_values: dict[str, Any] = {}
        shown_of: dict[str, tuple[str, str, FinalField | None]] = {}
        for domain in tool.domains:
            for question in domain.questions:
                name = entry_field_name(GROUP, number, question_field(question.id))
                final = fields.get(name)
                shown, was = _shown(final, blind)
                offered = {a.value for a in question.options if a != Answer.NOT_APPLICABLE or question.if_applicable}
                shown = shown if shown in offered else ""  # a word that is no answer, an NA not offered: none
                shown_of[question.id] = (shown, was, final)
                if shown:
                    shown_values[question_field(question.id)] = shown
                if was and not (final is not None and final.disagreement):  # disputed: no answer until settled
                    final_values[question_field(question.id)] = was
        overrides, reasons, disputes = {}, {}, {}
        for code in (*DOMAIN_CODES, OVERALL):
            final = fields.get(entry_field_name(GROUP, number, override_field(code)))
            judgement = judgement_of(final.final_value) if decided(final) else None
            if final is not None and final.disagreement:
                disputes[code] = _disagreement(final)
            elif judgement is not None and final is not None:
                overrides[code] = Override(judgement, final.note, final.reviewer, final.decided_at)
                reasons[code] = final.note
        by_code, view.problems = _judged(tool, final_values, overrides)
        as_shown = _judged(tool, shown_values, overrides)[0] if shown_values != final_values else {}
        answers = entry_answers(tool, shown_values)
        for domain in tool.domains:
            asked = domain.asked(answers[domain.code])  # as the page's script reads it: NA a person's answer
            questions = [
                _question_view(question, *shown_of[question.id], asked[question.id], blind, extracted)
                for question in domain.questions
            ]
            view.domains.append(
                _domain_view(domain.code, domain.name, questions, by_code[domain.code], reasons, as_shown, disputes)
            )
        view.overall = _domain_view(OVERALL, SHORT_NAMES[OVERALL], [], by_code[OVERALL], reasons, as_shown, disputes)
        results.append(view)
    return results


def _question_view(question, shown: str, was: str, final, asked, blind: str, extracted) -> QuestionView:
    proposal, state = "", final.provenance if final is not None else ""
    if blind == "models" and not was:
        state = ""  # whether a model answered is the model's to say: not in a blind pass
    if final is not None and blind != "models" and final.model_value is not None:
        quote = f" — “{final.quote}”" if final.quote else ""
        note = str((extracted.get(final.field) or {}).get("note") or "")
        looked = f" — {note}" if note.startswith(("No information", "looked for")) else ""
        proposal = f"model: {final.model_value}{quote}{looked}"
    conditions = [
        {"questions": list(c.questions), "answers": sorted(a.value for a in c.answers), "every": c.every}
        for c in question.asked_when
    ]
    options = [a for a in question.options if a != Answer.NOT_APPLICABLE or question.if_applicable]
    return QuestionView(
        question.id,
        question.text,
        [(a.value, ANSWER_LABELS[a]) for a in options],
        json.dumps(conditions),
        question.condition_text(),
        shown,
        was,
        state,
        proposal,
        asked,
        question.if_applicable,
        _disagreement(final) if final is not None and final.disagreement else "",
    )


def _disagreement(final: FinalField) -> str:
    """``Ana: approve; Ben: correct → PN`` — what each reviewer said, for the adjudicator who settles it."""
    return "; ".join(f"{who}: {what}" for who, what in final.disagreement.items())


def _domain_view(code: str, name: str, questions, judged: DomainJudgement, reasons, as_shown, disputes) -> DomainView:
    provisional = as_shown.get(code)
    return DomainView(
        code,
        name,
        questions,
        judged.proposed.value if judged.proposed else "",
        ", ".join(judged.path),
        ", ".join(judged.missing),
        judged.override.judgement.value if judged.override else "",
        reasons.get(code, ""),
        judged.judgement.value if judged.judgement else "",
        provisional.proposed.value if provisional is not None and provisional.proposed else "",
        disputes.get(code, ""),
    )
