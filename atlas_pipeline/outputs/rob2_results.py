"""Each study's RoB 2 assessments, one per result: the study's final answers (reconciled across its reports, like
every value an analysis reads: ``outputs.study_report``), the judgements the guidance's algorithms make of them, and
a person's overrides kept beside the proposals with their reasons. An answer whose reports disagree counts as
unanswered until a person chooses one, and so does one that two reviewers of a report answered differently until an
adjudicator settles it; nothing is judged where an answer is missing.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from atlas_pipeline.core.rob2_judgements import Override
from atlas_pipeline.core.rob2_module import (
    DOMAIN_CODES,
    GROUP,
    IDENTITY,
    OVERALL,
    applicable_of,
    entry_answers,
    judge_entry,
    judgement_of,
    override_field,
    question_field,
    tool_of,
)
from atlas_pipeline.core.templates import Template, entry_field_parts
from atlas_pipeline.outputs.study_report import Study
from atlas_pipeline.review.decisions import value_text
from atlas_pipeline.review.study_values import entry_label

CODES = (*DOMAIN_CODES, OVERALL)


class ResultAssessment(BaseModel):
    """One result's RoB 2 as the files say it (domain code or ``Overall`` → …)."""

    study_id: str
    label: str  # the study's entry: ``rob2[Duration of diarrhea | 24 h]``
    outcome: str
    time_point: str
    effect: str  # what domain 2 assessed: assignment | adhering
    report: str = ""  # the report whose evidence the answers come from (the first answer's)
    entry: int = 0  # its entry number there
    answers: dict[str, str] = Field(default_factory=dict)  # "1.2" → "PY"
    judgements: dict[str, str | None] = Field(default_factory=dict)  # what the review reports (overrides included)
    proposed: dict[str, str | None] = Field(default_factory=dict)  # the algorithm's
    paths: dict[str, str] = Field(default_factory=dict)  # "1.2=Y, 1.1=PY, 1.3=N"
    missing: dict[str, str] = Field(default_factory=dict)  # "1.2, 1.3" to answer first
    overrides: dict[str, str] = Field(default_factory=dict)  # "High (Dan, 2026-…): <reason>"
    support: dict[str, str] = Field(default_factory=dict)  # each answer with its quote, per domain
    conflicts: list[str] = Field(default_factory=list)  # questions whose reports disagree
    problems: list[str] = Field(default_factory=list)  # overrides that could not stand

    @property
    def judged(self) -> bool:
        return all(self.judgements.get(code) for code in CODES)

    @property
    def result(self) -> str:
        return " · ".join(part for part in (self.outcome, self.time_point) if part)


def _identity(label: str) -> tuple[str, str]:
    inner = label[len(GROUP) + 1 : -1]
    outcome, _, time_point = inner.partition(" | ")
    return outcome, "" if time_point == value_text(None) else time_point  # no time point: "—" in the label


def _support(study: Study, name: str, question: str, answer: str) -> tuple[str, str, int]:
    """``1.2 PY: "quote"`` (the answer's evidence), and the report and entry it is in."""
    found = study.final(name)
    if found is None:
        return f"{question} {answer}", "", 0
    report, final = found
    quote = final.corrected_quote or final.quote
    entry = entry_field_parts(final.field)[1] or 0
    said = f'{question} {answer}: "{" ".join(quote.split())}"' if quote else f"{question} {answer}"
    if answer == "NI" and final.note:
        said += f" ({final.note})"
    return said, report.key, entry


def _label_value(fields: Any, name: str) -> Any:
    """An identity value as it names an entry (``review.study_values.report_fields``): accepted, or as given while
    awaiting review; none when rejected."""
    final = fields.get(name)
    if final is None or final.provenance == "rejected":
        return None
    return final.final_value if final.final_value is not None else final.model_value


def _results(study: Study) -> dict[str, tuple[str, tuple[str, str], str, int]]:
    """Every RoB 2 entry of the study's reports by its label folded — those with no final answer too, which the
    study's values do not name: (label as first written, (outcome, time point), report, entry)."""
    found: dict[str, tuple[str, tuple[str, str], str, int]] = {}
    for report in study.reports:
        review = getattr(report, "current_review", None)
        fields = getattr(review, "fields", None) or {}
        entries = sorted({entry_field_parts(n)[1] or 0 for n in fields if entry_field_parts(n)[0] == GROUP})
        for entry in entries:
            identity = {key: _label_value(fields, f"{GROUP}[{entry}].{key}") for key in IDENTITY}
            if identity[IDENTITY[0]] in (None, ""):
                continue  # no outcome named (or the entry rejected whole): no result
            label = entry_label(GROUP, identity)
            outcome, time_point = (" ".join(value_text(identity[key]).split()) for key in IDENTITY)
            named = (outcome, "" if identity[IDENTITY[1]] in (None, "") else time_point)
            found.setdefault(label.casefold(), (label, named, report.key, entry))
    return found


def _disputed(study: Study) -> dict[str, set[str]]:
    """Per result (its label folded), the answers and overrides a report's reviewers gave differently, unsettled:
    not final (``review.finality``), so not among the study's values — named as conflicts, never judged from."""
    found: dict[str, set[str]] = {}
    for report in study.reports:
        review = getattr(report, "current_review", None)
        fields = getattr(review, "fields", None) or {}
        for name, final in fields.items():
            group, entry, bare = entry_field_parts(name)
            if group != GROUP or entry is None or getattr(final, "final_state", "") != "disputed":
                continue
            identity = {key: _label_value(fields, f"{GROUP}[{entry}].{key}") for key in IDENTITY}
            if identity[IDENTITY[0]] not in (None, ""):
                found.setdefault(entry_label(GROUP, identity).casefold(), set()).add(bare)
    return found


def assess_study(study: Study, template: Template | None) -> list[ResultAssessment]:
    """Every result the study's RoB 2 entries assess, judged from the study's final answers: an answer or an
    override the reports — or a report's reviewers — dispute counts as missing until a person settles it."""
    module = template.rob2 if template is not None else None
    if module is None:
        return []
    tool = tool_of(module)
    labels: dict[str, dict[str, Any]] = {}
    prefix = f"{GROUP}["
    for name in study.values:
        if name.startswith(prefix):
            label, _, bare = name.rpartition(".")
            labels.setdefault(label, {})[bare] = name
    results, disputed = _results(study), _disputed(study)
    folded = {label.casefold() for label in labels}
    for key, (label, _, _, _) in results.items():
        if key not in folded:
            labels[label] = {}  # a result nobody answered yet: listed, not judged
    assessments = []
    for label, names in labels.items():
        known = results.get(label.casefold())
        outcome, time_point = known[1] if known else _identity(label)
        assessment = ResultAssessment(
            study_id=study.id, label=label, outcome=outcome, time_point=time_point, effect=tool.effect.value
        )
        values: dict[str, Any] = {}
        given: dict[str, tuple[str, str, str, int]] = {}  # question → (answer, its support, report, entry)
        for domain in tool.domains:
            for question in domain.questions:
                if question_field(question.id) in disputed.get(label.casefold(), set()):
                    assessment.conflicts.append(question.id)  # a report's reviewers disagree: not final
                    continue
                name = names.get(question_field(question.id))
                value = study.values.get(name) if name else None
                if value is None:
                    continue
                if value.state == "conflict":
                    assessment.conflicts.append(question.id)  # reports, or a report's reviewers, disagree
                    continue
                if value.value in (None, ""):
                    continue
                answer = value_text(value.value)
                values[question_field(question.id)] = answer
                given[question.id] = (answer, *_support(study, name, question.id, answer))
        answers = entry_answers(tool, values)
        applicable = applicable_of(tool, answers)
        for domain in tool.domains:  # what the files name: the answers to the questions the answers ask
            asked = domain.asked(answers[domain.code], applicable)
            said = []
            for question in domain.questions:
                if question.id not in given or asked[question.id] is False:
                    continue
                answer, text, report, entry = given[question.id]
                assessment.answers[question.id] = answer
                said.append(text)
                if not assessment.report and report:
                    assessment.report, assessment.entry = report, entry
            if said:
                assessment.support[domain.code] = "; ".join(said)
        overrides: dict[str, Override] = {}
        for code in CODES:
            name = names.get(override_field(code))
            value = study.values.get(name) if name else None
            if override_field(code) in disputed.get(label.casefold(), set()) or (
                value is not None and value.state == "conflict"
            ):
                assessment.conflicts.append(f"{code} override")
                continue
            judgement = judgement_of(value.value) if value is not None else None
            if judgement is None:
                continue
            found = study.final(name)
            if found is None:
                continue
            final = found[1]
            overrides[code] = Override(judgement, final.note, final.reviewer, final.decided_at)
        if not assessment.report and known:
            assessment.report, assessment.entry = known[2], known[3]
        judged, assessment.problems = judge_entry(tool, values, overrides)
        for judgement in judged:
            code = judgement.domain
            assessment.judgements[code] = judgement.judgement.value if judgement.judgement else None
            assessment.proposed[code] = judgement.proposed.value if judgement.proposed else None
            if judgement.path:
                assessment.paths[code] = ", ".join(judgement.path)
            if judgement.missing:
                assessment.missing[code] = ", ".join(judgement.missing)
            if judgement.override is not None:
                override = judgement.override
                by = ", ".join(part for part in (override.by, override.at[:10]) if part)
                said = f" ({by})" if by else ""
                assessment.overrides[code] = f"{override.judgement.value}{said}: {override.reason}"
        assessments.append(assessment)
    return assessments
