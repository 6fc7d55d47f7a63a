"""Answers that do not fit in one reply: the scripted OpenAI-compatible server honours the request's ``max_tokens`` as a
real endpoint does (a longer answer is cut with ``finish_reason: "length"``) and answers each request with the part of
a known whole answer it asks for. A cut answer is recognised as such — never "invalid JSON", never "repaired" —, the
extraction is asked in parts that fit (single fields, then each group in pages of entries continued), every entry of
the trial is kept, and what was asked in how many parts is recorded; when even one module cannot fit, the reason
says so."""

import copy
import json
import shutil

import pytest

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import ran_as_its_document
from atlas_pipeline_tests.support.juice_trial import API_KEY, CORRECT, DURATION, FECAL, KEY


def _outcomes(count: int) -> list[dict]:
    """``count`` distinct outcome entries (one outcome at several time points), each with real quotes."""
    entries = []
    for number in range(count):
        entry = copy.deepcopy(DURATION if number % 2 == 0 else FECAL)
        entry["time_point"] = {"value": f"day {number + 1}", "quote": None}
        entries.append(entry)
    return entries


WHOLE = {**CORRECT, "outcomes": _outcomes(10)}


@pytest.fixture
def extract(llm_server, knowledge_base, settings_for, instance, monkeypatch, parse_cache, tmp_path):
    """Extract the juice trial in llm mode with a given ``ATLAS_LLM_MAX_TOKENS``; returns the record."""
    copy_into(knowledge_base, f"rct/{KEY}")
    shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
    monkeypatch.setenv("ATLAS_LLM_API_KEY", API_KEY)
    instance.add_dynamic_partitions(documents_partitions.name, [KEY])

    def run(max_tokens: int) -> ExtractionRecord:
        settings = settings_for(
            knowledge_base,
            llm_base_url=llm_server.base_url,
            llm_model="scripted-model",
            llm_backoff_seconds="0.01",
            llm_max_tokens=str(max_tokens),
        )
        resource = Deployment.from_settings(settings)
        refresh_catalog(resource.open_knowledge_base(), resource.store())
        job = build_definitions(settings).resolve_job_def("document_job")
        result = job.execute_in_process(partition_key=KEY, instance=instance, raise_on_error=False)
        record = read_record(resource.store(), KEY, "extraction", ExtractionRecord)
        assert ran_as_its_document(result, record.status), record.reason
        return record

    return run


def test_a_cut_answer_is_asked_again_in_parts_and_every_entry_is_kept(llm_server, extract):
    llm_server.script(default={"answer": WHOLE, "max_tokens": True})
    whole_tokens = len(json.dumps(WHOLE)) // 4
    record = extract(max_tokens=600)
    assert whole_tokens > 3 * 600  # the answer needs several replies
    requests = llm_server.requests()
    assert all(request["max_tokens"] == 600 for request in requests)
    assert not any("Your reply was not valid" in request["messages"][-1]["content"] for request in requests)
    assert record.status != "failed", record.reason  # graded as usual (these entries leave quotes out)
    # every entry of the trial, in the document's order, with its own graded values
    time_points = [record.fields[f"outcomes[{n}].time_point"]["value"] for n in range(1, 11)]
    assert time_points == [f"day {n}" for n in range(1, 11)]
    assert "outcomes[11].outcome" not in record.fields
    assert record.fields["outcomes[1].mean_intervention"]["tier"] == "verified"
    assert record.fields["outcomes[10].mean_comparator"]["value"] == 2.19
    assert record.fields["n_treatment"]["tier"] == "verified"  # the single fields, asked on their own
    # what was asked in how many parts: recorded and in the reason
    assert record.answer_parts[0] == "the whole template did not fit in one answer (600 tokens)"
    assert record.answer_parts[1].endswith(": one request") and "metadata" in record.answer_parts[1]
    pages = record.answer_parts[2]
    assert pages.startswith("outcomes: 10 entries in ") and "of at most" in pages
    assert "the answer did not fit in one request (600 tokens): asked in parts" in record.reason
    # each page asked for the entries after those already given; the cost of every request is counted
    page_prompts = [r["messages"][-1]["content"] for r in requests if "in this answer" in r["messages"][-1]["content"]]
    assert any("Entries already given (" in prompt for prompt in page_prompts)
    assert record.llm_calls == len(requests) and record.completion_tokens > whole_tokens
    # again: every request, the cut ones included, is answered from the cache — no call, the same values
    again = extract(max_tokens=600)
    assert len(llm_server.requests()) == len(requests) and again.llm_calls == 0
    assert again.llm_cache_hits == len(requests) and again.fields == record.fields


def test_an_answer_that_cannot_fit_even_in_parts_fails_saying_so(llm_server, extract):
    llm_server.script(default={"answer": WHOLE, "max_tokens": True})
    record = extract(max_tokens=64)
    assert record.status == "failed"
    assert "does not fit in ATLAS_LLM_MAX_TOKENS=64 tokens" in record.reason
    assert "raise ATLAS_LLM_MAX_TOKENS" in record.reason and "not valid JSON" not in record.reason
    assert record.llm_calls == len(llm_server.requests())
