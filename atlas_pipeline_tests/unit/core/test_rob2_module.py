"""RoB 2 as a template module: every signalling question of the tool a field with the answers the guidance offers,
the overrides a person's alone, the module added by the rule and never asked in the data extraction's request."""

from pathlib import Path

import pytest

from atlas_pipeline.core.rob2_judgements import Judgement, Override
from atlas_pipeline.core.rob2_module import entry_answers, judge_entry, question_field, rob2_module, tool_of
from atlas_pipeline.core.rob2_tool import Answer, Effect, Tool
from atlas_pipeline.core.templates import TemplateError, assemble_template, load_template
from atlas_pipeline.extraction.schema import json_schema

SEEDS = Path(__file__).resolve().parents[3] / "seeds"


@pytest.mark.parametrize("effect", list(Effect))
def test_every_question_of_the_tool_is_a_field_with_the_guidance_s_answers(effect):
    module = rob2_module(effect)
    tool = Tool(effect)
    assert (
        module.repeating and module.identity == ["result_outcome", "result_time_point"] and module.rob2 == effect.value
    )
    for domain in tool.domains:
        for question in domain.questions:
            field = module.field_definition(question_field(question.id))
            assert field is not None and field.judgment and not field.by_person
            assert field.enum == [answer.value for answer in question.options]
            assert question.text in field.description
            conditional = bool(question.asked_when) or question.if_applicable
            assert ("NA" in field.enum) == conditional, question.id
    overrides = [f for f in module.fields if f.by_person]
    assert [f.name for f in overrides] == [
        "d1_override",
        "d2_override",
        "d3_override",
        "d4_override",
        "d5_override",
        "overall_override",
    ]
    assert all(f.enum == ["Low", "Some concerns", "High"] for f in overrides)
    assert module.field_definition("q3_2").enum == ["NA", "Y", "PY", "PN", "N"]  # the guidance offers no NI there
    assert tool_of(module).effect == effect


def test_the_rule_adds_the_module_which_the_data_extraction_never_asks_for():
    base = load_template(SEEDS / "templates", "rct_base")
    assert base.rob2 is None
    with_rob2 = assemble_template(base, [], rob2_module("assignment"))
    assert with_rob2.rob2 is not None and with_rob2.content_hash != base.content_hash
    asked = with_rob2.asked_at_once()
    assert asked.rob2 is None and "rob2" not in json_schema(asked)["properties"]
    assert asked.content_hash == base.content_hash  # the data extraction's request is the template's without RoB 2
    assert assemble_template(base, [], rob2_module("adhering")).content_hash != with_rob2.content_hash
    with pytest.raises(TemplateError, match="has a module named rob2 already"):
        assemble_template(with_rob2, [], rob2_module("assignment"))


def test_an_entry_is_judged_from_its_answers_and_an_override_needs_a_reason_and_a_proposal():
    tool = Tool(Effect.ASSIGNMENT)
    values = {"q1_1": "Y", "q1_2": "py", "q1_3": "N", "q2_1": "maybe", "q3_1": ""}
    answers = entry_answers(tool, values)
    assert answers["D1"] == {"1.1": Answer.YES, "1.2": Answer.PROBABLY_YES, "1.3": Answer.NO}
    assert answers["D2"] == {} and answers["D3"] == {}  # a word that is no answer, an empty one: unanswered
    judged, problems = judge_entry(tool, values)
    assert [j.judgement for j in judged[:1]] == [Judgement.LOW] and judged[-1].judgement is None and not problems
    overrides = {
        "D1": Override(Judgement.HIGH, "the sequence was alternation in practice (methods, p. 3)", "Dan"),
        "D2": Override(Judgement.LOW, "blinded", "Dan"),  # D2 not judged yet: no proposal to depart from
        "D3": Override(Judgement.LOW, "  ", "Dan"),
    }
    judged, problems = judge_entry(tool, values, overrides)
    assert judged[0].judgement == Judgement.HIGH and judged[0].proposed == Judgement.LOW
    assert judged[1].override is None and judged[2].override is None
    assert any(p.startswith("D2 override not applied") for p in problems)
    assert any(p.startswith("D3 override not applied") and "reason" in p for p in problems)
