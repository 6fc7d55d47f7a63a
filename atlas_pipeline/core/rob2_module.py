"""RoB 2 as a template module: one entry per result (an outcome at a time point), a field per signalling question of
the tool (``core.rob2_tool``) and one per judgement a person may override — so the answers go the way every value
goes (a quote graded, a person's decision, two reviewers and an adjudicator) and the judgements are computed from
the answers that are final (``core.rob2_judgements``).

A rule asks for it (``"rob2": "assignment"`` or ``"adhering"``: the effect its domain 2 assesses); the module is
added to the rule's template (``core.templates.assemble_template``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from atlas_pipeline.core.rob2_judgements import DomainJudgement, Judgement, Override, judge_result
from atlas_pipeline.core.rob2_tool import Answer, Domain, Effect, SignallingQuestion, Tool
from atlas_pipeline.core.templates import TemplateField, TemplateModule

GROUP = "rob2"
IDENTITY = ("result_outcome", "result_time_point")  # named apart: field names are unique in a template
RESULT_OF = ("outcome", "time_point")  # the fields of the outcomes entry a result is
OVERALL = "Overall"
DOMAIN_CODES = ("D1", "D2", "D3", "D4", "D5")
SHORT_NAMES = {
    "D1": "Randomisation process",
    "D2": "Deviations from intended interventions",
    "D3": "Missing outcome data",
    "D4": "Measurement of the outcome",
    "D5": "Selection of the reported result",
    OVERALL: "Overall",
}


def question_field(question_id: str) -> str:
    """The template field of a signalling question: ``1.2`` → ``q1_2``."""
    return "q" + question_id.replace(".", "_")


def override_field(domain: str) -> str:
    """The field holding a person's override of a domain's (or the overall) judgement: ``d1_override``."""
    return f"{domain.lower()}_override"


def _question(domain: Domain, question: SignallingQuestion) -> TemplateField:
    asked = (
        f" Asked only {question.condition_text()[0].lower()}{question.condition_text()[1:]}."
        if (question.asked_when or question.if_applicable)
        else ""
    )
    return TemplateField(
        name=question_field(question.id),
        type="enum",
        enum=[answer.value for answer in question.options],
        judgment=True,
        description=f"RoB 2 {domain.code} ({SHORT_NAMES[domain.code]}), question {question.id}: {question.text}"
        f"{asked} Y yes, PY probably yes, PN probably no, N no, NI no information"
        + (", NA not applicable (its condition not met)" if Answer.NOT_APPLICABLE in question.options else "")
        + ".",
    )


def _override(domain: str) -> TemplateField:
    return TemplateField(
        name=override_field(domain),
        type="enum",
        enum=[judgement.value for judgement in Judgement],
        judgment=True,
        by_person=True,
        detail=True,
        description=f"A person's judgement of {SHORT_NAMES[domain].lower()} in place of the algorithm's (its reason "
        "in the decision's note)",
    )


def rob2_module(effect: str | Effect, max_entries: int = 30) -> TemplateModule:
    """The RoB 2 module for a review assessing ``effect`` (``assignment`` or ``adhering``)."""
    tool = Tool(Effect(effect))
    identity = [
        TemplateField(name=IDENTITY[0], type="string", description="The result's outcome, as its entry names it"),
        TemplateField(name=IDENTITY[1], type="string", description="The result's time point, as its entry says"),
    ]
    questions = [_question(domain, question) for domain in tool.domains for question in domain.questions]
    overrides = [_override(code) for code in (*DOMAIN_CODES, OVERALL)]
    return TemplateModule(
        name=GROUP,
        description=f"Risk of bias (RoB 2, effect of {tool.effect.value} to intervention) of each result: an outcome "
        "at a time point",
        fields=[*identity, *questions, *overrides],
        repeating=True,
        identity=list(IDENTITY),
        max_entries=max_entries,
        rob2=tool.effect.value,
    )


def tool_of(module: TemplateModule) -> Tool:
    return Tool(Effect(module.rob2 or Effect.ASSIGNMENT))


def answer_of(raw: Any) -> Answer | None:
    """A stored answer (``Y``, ``py`` …), or None for anything that is no answer (empty, another word, a number)."""
    text = raw.strip().upper() if isinstance(raw, str) else ""
    return Answer(text) if text in Answer.__members__.values() else None


def entry_answers(tool: Tool, values: Mapping[str, Any]) -> dict[str, dict[str, Answer]]:
    """One result's answers per domain code from its fields' values (bare field name → value); a value that is no
    answer (empty, an unknown word) is left out — unanswered."""
    answers: dict[str, dict[str, Answer]] = {}
    for domain in tool.domains:
        given = answers.setdefault(domain.code, {})
        for question in domain.questions:
            answer = answer_of(values.get(question_field(question.id)))
            if answer is not None:
                given[question.id] = answer
    return answers


def applicable_of(tool: Tool, answers: Mapping[str, Mapping[str, Answer]]) -> frozenset[str]:
    """The "[If applicable]" questions (domain 2 of the effect of adhering) the review addresses for this result:
    every one but those a person answered 'Not applicable'."""
    return frozenset(
        question.id
        for domain in tool.domains
        for question in domain.questions
        if question.if_applicable and answers.get(domain.code, {}).get(question.id) != Answer.NOT_APPLICABLE
    )


def judge_entry(
    tool: Tool, values: Mapping[str, Any], overrides: Mapping[str, Override] | None = None
) -> tuple[list[DomainJudgement], list[str]]:
    """One result's five domain judgements and the overall one, and why an override could not stand (an override
    without a reason, or of a domain not judged yet: kept out, said)."""
    answers = entry_answers(tool, values)
    applicable = applicable_of(tool, answers)
    kept: dict[str, Override] = {}
    problems: list[str] = []
    plain = judge_result(tool, answers, applicable=applicable)
    by_code = {judgement.domain: judgement for judgement in plain}
    for code, override in (overrides or {}).items():
        try:
            by_code[code].overridden(override)
        except (KeyError, ValueError) as error:
            problems.append(f"{code} override not applied: {error}")
            continue
        kept[code] = override
    try:
        return judge_result(tool, answers, kept, applicable), problems
    except ValueError as error:  # the overall's override once a domain's override changed it: not applied
        problems.append(f"Overall override not applied: {error}")
        kept.pop(OVERALL, None)
        return judge_result(tool, answers, kept, applicable), problems


def judgement_of(text: Any) -> Judgement | None:
    """A judgement as a person or a file writes it (``low``, ``Some concerns``, ``some_concerns``), or None."""
    folded = str(text or "").strip().casefold().replace("_", " ")
    return next((judgement for judgement in Judgement if judgement.value.casefold() == folded), None)
