"""Two independent extractors (``ATLAS_LLM_SECOND_MODEL``): two scripted OpenAI-compatible endpoints answer the juice
trial, the second differing in known ways — one wrong number, one omission, one label swapped, its outcome entries in
the other order — and identical elsewhere. Agreed and verified values are accepted; every difference goes to a person
with the second extractor's value beside the first; each extractor is cached and accounted on its own."""

import json
import shutil

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.servers.processes import scripted_openai_server
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import latest_metadata
from atlas_pipeline_tests.support.juice_trial import API_KEY, DURATION, FECAL, KEY, NOT_REPORTED, answer

WITH_MD = {**DURATION, "effect_measure": {"value": "MD", "quote": None}}
WITH_SMD = {**DURATION, "effect_measure": {"value": "SMD", "quote": None}}  # the label swapped


def test_two_extractors_agree_disagree_and_route_the_differences(
    llm_server, knowledge_base, settings_for, instance, parse_cache, tmp_path, monkeypatch
):
    copy_into(knowledge_base, f"rct/{KEY}")
    shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
    monkeypatch.setenv("ATLAS_LLM_API_KEY", API_KEY)
    first_answer = answer(outcomes=[WITH_MD, FECAL])
    second_answer = answer(
        n_control={"value": 29, "quote": "30 were given colored and flavored water (WA)"},  # one wrong number
        p_value=NOT_REPORTED,  # one omission
        outcomes=[FECAL, WITH_SMD],  # the entries in the other order, one label swapped
    )
    (tmp_path / "second-endpoint").mkdir()
    with scripted_openai_server(tmp_path / "second-endpoint") as second_server:
        llm_server.script(default={"content": first_answer})
        second_server.script(default={"content": second_answer})
        settings = settings_for(
            knowledge_base,
            llm_base_url=llm_server.base_url,
            llm_model="model-a",
            llm_api_key=API_KEY,
            llm_second_model="model-b",
            llm_second_base_url=second_server.base_url,
        )
        deployment = Deployment.from_settings(settings)
        refresh_catalog(deployment.open_knowledge_base(), deployment.store())
        instance.add_dynamic_partitions(documents_partitions.name, [KEY])
        job = build_definitions(settings).resolve_job_def("document_job")
        assert job.execute_in_process(partition_key=KEY, instance=instance).success
        store = deployment.store()
        record = read_record(store, KEY, "extraction", ExtractionRecord)

        first_requests, second_requests = llm_server.requests(), second_server.requests()
        assert {r["model"] for r in first_requests} == {"model-a"} and {r["model"] for r in second_requests} == {
            "model-b"
        }
        # an independent prompt: the fields in another order, and no sight of the first answer
        asked_first, asked_second = json.dumps(first_requests[0]), json.dumps(second_requests[0])
        assert asked_first.index('"study_id"') < asked_first.index('"n_control_outcome"')
        assert asked_second.index('"n_control_outcome"') < asked_second.index('"study_id"')
        assert {m["role"] for r in second_requests for m in r["messages"]} <= {"system", "user"}  # no answer shown
        assert all(first_answer not in json.dumps(r["messages"]) for r in second_requests)

        fields = record.fields
        assert record.second_model == "model-b" and "with model B (model-b)" in record.reason
        agreed = fields["n_treatment"]
        assert (agreed["agreement"], agreed["tier"], agreed["flags"]) == ("agreed", "verified", [])
        number = fields["n_control"]
        assert number["agreement"] == "disagreed" and number["value"] == 30
        assert "model B (model-b) gives 29" in number["flags"]
        assert number["candidates"][-1] | {"page": None} == {
            "extractor": "B",
            "model": "model-b",
            "value": 29,
            "quote": "30 were given colored and flavored water (WA)",
            "tier": number["candidates"][-1]["tier"],
            "page": None,
        }
        omitted = fields["p_value"]
        assert omitted["agreement"] == "only_one" and "model B (model-b) found no value" in omitted["flags"]
        assert fields["nct_number"]["agreement"] == "neither"
        # the entries matched by identity though B listed them the other way round
        duration = next(n for n, f in fields.items() if n.endswith(".outcome") and f["value"] == "Duration of diarrhea")
        entry = duration.split(".")[0]
        assert fields[f"{entry}.mean_intervention"]["agreement"] == "agreed"
        swapped = fields[f"{entry}.effect_measure"]
        assert swapped["agreement"] == "disagreed" and swapped["candidates"][-1]["value"] == "SMD"
        assert record.agreement["disagreed"] == 2 and record.agreement["only_one"] == 1

        # agreed and verified: accepted under the default policy; every difference waits for a person
        review = review_document(record, [], frozenset({"verified"}))
        assert review.fields["n_treatment"].provenance == "model_verified"
        assert {review.fields[name].provenance for name in ("n_control", "p_value", f"{entry}.effect_measure")} == {
            "awaiting_review"
        }
        assert not review.approved

        # each extractor accounted on its own, and cached on its own
        assert record.extractors["A"]["model"] == "model-a" and record.extractors["B"]["model"] == "model-b"
        assert record.extractors["A"]["calls"] == len(first_requests) >= 1
        assert record.extractors["B"]["calls"] == len(second_requests) >= 1
        assert record.llm_calls == len(first_requests) + len(second_requests)
        metadata = latest_metadata(instance, "document_extraction", KEY)
        assert metadata["second_model"].value == "model-b" and metadata["values_disagreed"].value == 2

        assert job.execute_in_process(partition_key=KEY, instance=instance).success  # again: both from the cache
        again = read_record(store, KEY, "extraction", ExtractionRecord)
        assert again.extractors["B"]["calls"] == 0 and again.extractors["B"]["cache_hits"] >= 1
        assert again.extractors["A"]["calls"] == 0 and len(second_server.requests()) == len(second_requests)
        assert again.fields["n_control"]["agreement"] == "disagreed"
