"""Known cost: ``atlas run --estimate`` says what a run would send and cost before anything is sent, and matches the
tokens then used; the price table turns every extraction's tokens into money (record, exports, status, the run's
own line); a model without a price has an unknown cost, never 0."""

from __future__ import annotations

import re
import shutil

import polars as pl

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.extraction.prices import load_prices
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import run_atlas
from atlas_pipeline_tests.support.juice_trial import KEY, answer
from scripted_servers.processes import local_env

PRICES = load_prices(PROJECT_ROOT / "seeds" / "llm_prices.toml")


def _estimated(stdout: str) -> tuple[int, int, int, int]:
    """(requests, cached, prompt tokens, answer tokens) of the juice trial's estimate line."""
    line = next(line for line in stdout.splitlines() if line.startswith(KEY))
    numbers = re.findall(r"\b[\d,]+\b", line[len(KEY) :])
    return tuple(int(n.replace(",", "")) for n in numbers[:4])  # type: ignore[return-value]


def test_the_estimate_comes_before_anything_is_sent_and_matches_what_is_used(
    llm_server, knowledge_base, parse_cache, tmp_path
):
    copy_into(knowledge_base, f"rct/{KEY}")
    env = {
        **local_env(tmp_path, knowledge_base),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_LLM_BASE_URL": llm_server.base_url,
        "ATLAS_LLM_MODEL": "gpt-4o-mini-2024-07-18",  # a dated snapshot: priced as gpt-4o-mini
    }
    llm_server.script(default={"content": answer()})
    first = run_atlas("run", "--estimate", env=env, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert llm_server.requests() == []  # nothing sent
    assert not (tmp_path / "artifacts" / "parsed").exists()  # nothing parsed either
    requests, cached, prompt_guess, _ = _estimated(first.stdout)
    # guessed from the template (30 values, outcome entries of 50 fields — medians, quartiles, group CIs, change
    # scores …): longer than ATLAS_LLM_MAX_TOKENS, so cut once and asked in four parts, each sending the text again
    assert (requests, cached) == (5, 0)
    prompt_guess //= requests
    assert "not parsed yet: its words read quickly" in first.stdout
    assert "no earlier extraction here to learn from" in first.stdout
    assert re.search(r"≈ \$0\.\d{4} with gpt-4o-mini", first.stdout)

    shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
    ran = run_atlas("run", env=env, cwd=tmp_path)
    assert ran.returncode in (0, 1), ran.stderr
    record = read_record(Store(str(tmp_path / "artifacts")), KEY, "extraction", ExtractionRecord)
    assert record.llm_calls == 1
    # read quickly from the PDF, the words come within a fifth of the parse's tokens
    assert abs(prompt_guess - record.prompt_tokens) <= 0.2 * record.prompt_tokens, (prompt_guess, record.prompt_tokens)
    price = PRICES.price_of("gpt-4o-mini")
    assert record.cost == round(price.cost(record.prompt_tokens, record.completion_tokens), 6) > 0
    assert record.cost_paid == record.cost and record.cost_currency == "USD"
    assert re.search(r"LLM this run: 1 request\(s\), 0 answered by the cache, paid \$0\.0\d+", ran.stdout)
    assert "LLM cost: $0.0" in ran.stdout and "a value)" in ran.stdout
    documents = pl.read_csv(tmp_path / "exports" / "atlas_documents.csv")
    assert documents["cost"][0] == record.cost and documents["cost_currency"][0] == "USD"

    again = run_atlas("run", "--estimate", "--force", env=env, cwd=tmp_path)
    assert _estimated(again.stdout)[:2] == (0, 1)  # the answer is in the cache: nothing to pay
    shutil.rmtree(tmp_path / "artifacts" / "llm_cache")
    parsed = run_atlas("run", "--estimate", "--force", env=env, cwd=tmp_path)
    requests, cached, prompt, answer_tokens = _estimated(parsed.stdout)
    assert (requests, cached) == (1, 0)
    # from the parse, the very messages the extractor sends: the tokens the endpoint then counted
    assert abs(prompt - record.prompt_tokens) <= 0.01 * record.prompt_tokens, (prompt, record.prompt_tokens)
    assert answer_tokens == record.completion_tokens  # learnt from the extraction made here
    assert "the average of 1 earlier extraction(s) here" in parsed.stdout
    assert len(llm_server.requests()) == 1


def test_a_model_without_a_price_has_an_unknown_cost(llm_server, knowledge_base, tmp_path):
    (knowledge_base / "trial.md").write_text("# A trial\n\nWe randomised 40 adults to juice or water.\n")
    env = {
        **local_env(tmp_path, knowledge_base),
        "DAGSTER_HOME": str(tmp_path / "home"),
        "ATLAS_LLM_BASE_URL": llm_server.base_url,
        "ATLAS_LLM_MODEL": "my-local-model",
    }
    llm_server.script(default={"content": "{}"})
    estimate = run_atlas("run", "--estimate", env=env, cwd=tmp_path)
    assert "unknown (no price for the model)" in estimate.stdout
    assert "no price for my-local-model" in estimate.stdout
    ran = run_atlas("run", env=env, cwd=tmp_path)
    record = read_record(Store(str(tmp_path / "artifacts")), "trial.md", "extraction", ExtractionRecord)
    assert record.llm_calls == 1 and record.cost is None and record.cost_paid is None
    assert "1 document(s) by a model with no price" in ran.stdout
    prices = tmp_path / "prices.toml"
    prices.write_text('currency = "EUR"\n[models."my-local-model"]\ninput = 0\noutput = 0\n')
    priced = run_atlas("run", "--force", env={**env, "ATLAS_LLM_PRICES": str(prices)}, cwd=tmp_path)
    record = read_record(Store(str(tmp_path / "artifacts")), "trial.md", "extraction", ExtractionRecord)
    assert record.cost == 0.0 and record.cost_currency == "EUR", priced.stdout
    prices.write_text('[models."my-local-model"]\ninput = -1\noutput = 0\n')
    broken = run_atlas("run", "--estimate", env={**env, "ATLAS_LLM_PRICES": str(prices)}, cwd=tmp_path)
    assert broken.returncode != 0 and "model 'my-local-model': input: Input should be greater than or equal to 0" in (
        broken.stdout + broken.stderr
    )
