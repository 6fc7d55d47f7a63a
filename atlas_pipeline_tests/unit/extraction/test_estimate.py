"""``atlas run --estimate``'s lines: the answer tokens a request its sentence names are the table's own."""

import re

import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.core.templates import load_template
from atlas_pipeline.extraction.estimate import RunEstimate, answer_tokens_guess, estimate_document
from atlas_pipeline.extraction.llm import LLMClient, LLMConfig
from atlas_pipeline.extraction.rules import load_rule


@pytest.mark.parametrize(("max_tokens", "requests"), [(4096, 5), (32000, 1)])
def test_the_answer_tokens_a_request_are_the_tables(max_tokens, requests):
    """With an answer longer than ATLAS_LLM_MAX_TOKENS (asked in parts) the sentence once said 7,560 a request while
    the table counted 2,914."""
    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    rule = load_rule(PROJECT_ROOT / "seeds" / "rules", "default")
    client = LLMClient(LLMConfig(base_url="http://127.0.0.1:9", model="m", max_tokens=max_tokens))  # never asked
    tokens, basis = answer_tokens_guess(template, [], max_tokens)
    document = estimate_document(client, template, rule, "trial.pdf", "We randomised 40 adults to juice.", [], tokens)
    assert document.requests == requests
    lines = RunEstimate("m", "USD", tokens, basis, [document]).lines(concurrency=4)
    sent, answers = re.search(r"(\d+) request\(s\) to send .* \+ ([\d,]+) answer tokens", lines[2]).groups()
    said = re.search(r"^answer tokens: about ([\d,]+) a request", lines[3]).group(1)
    assert int(said.replace(",", "")) == round(int(answers.replace(",", "")) / int(sent))
    assert (f"an answer of about {tokens:,}" in lines[3]) is (requests > 1)
