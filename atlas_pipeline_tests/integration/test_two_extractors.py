"""Two independent extractors (``ATLAS_LLM_SECOND_MODEL``): two scripted OpenAI-compatible endpoints answer the juice
trial, the second differing in known ways — one wrong number, one omission, one label swapped, its outcome entries in
the other order — and identical elsewhere. Agreed and verified values are accepted; every difference goes to a person
with the second extractor's value beside the first; each extractor is cached and accounted on its own."""

import json
import shutil

import polars as pl

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.outputs.evaluation import GoldValue, evaluate
from atlas_pipeline.review.decisions import DecisionRequest, decide
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.helpers import latest_metadata
from atlas_pipeline_tests.support.juice_trial import API_KEY, CORRECT, DURATION, FECAL, KEY, NOT_REPORTED, answer
from scripted_servers.processes import scripted_openai_server

GOLD = {"n_treatment": 30, "n_control": 30, "p_value": 0.006, "age_treatment": 10.27}
WITH_MD = {**DURATION, "effect_measure": {"value": "MD", "quote": None}}
WITH_SMD = {**DURATION, "effect_measure": {"value": "SMD", "quote": None}}  # the label swapped


def test_two_extractors_agree_disagree_and_route_the_differences(
    llm_server, knowledge_base, settings_for, instance, parse_cache, tmp_path, monkeypatch
):
    copy_into(knowledge_base, f"rct/{KEY}")
    shutil.copytree(parse_cache, tmp_path / "artifacts" / "parsed")
    monkeypatch.setenv("ATLAS_LLM_API_KEY", API_KEY)
    first_answer = answer(study_design=NOT_REPORTED, outcomes=[WITH_MD, FECAL])  # a required field both miss
    second_answer = answer(
        n_control={"value": 29, "quote": "30 were given colored and flavored water (WA)"},  # one wrong number
        p_value=NOT_REPORTED,  # one omission
        study_design=NOT_REPORTED,
        outcomes=[FECAL, WITH_SMD],  # the entries in the other order, one label swapped
    )
    design = {"value": "double-blind, randomized clinical trial", "quote": CORRECT["study_design"]["quote"]}
    (tmp_path / "second-endpoint").mkdir()
    with scripted_openai_server(tmp_path / "second-endpoint") as second_server:
        follow_up = {"when": "found no value for: study_design.", "content": json.dumps({"study_design": design})}
        llm_server.script(follow_up, default={"content": first_answer})
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

        # the omission pass: one follow-up request to model A names just what neither found, and what it finds is
        # graded like any answer, marked as found on the second look (and shown to a person)
        follow_ups = [r for r in first_requests if "found no value for" in json.dumps(r["messages"])]
        assert len(follow_ups) == 1 and len(second_requests) == 1
        assert "n_control" not in json.dumps(follow_ups[0]["response_format"])  # the schema asks for it alone
        recovered = fields["study_design"]
        assert recovered["value"] == design["value"] and recovered["tier"] == "verified"
        assert "found on the second look" in recovered["note"] and recovered["flags"]
        assert record.second_look == ["study_design"] and "1 value(s) found on the second look" in record.reason

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
        shown = (record.sha256, record.extraction_version)
        metadata = latest_metadata(instance, "document_extraction", KEY)
        assert metadata["second_model"].value == "model-b" and metadata["values_disagreed"].value == 2

        # agreement as data: per field over the documents, and accuracy on a gold file split by agreement
        decide(store, record, DecisionRequest("n_treatment", "approve", reviewer="ana", shown=shown))
        decide(store, record, DecisionRequest("n_treatment", "correct", reviewer="ben", shown=shown, value=31))
        decide(store, record, DecisionRequest("n_control", "correct", reviewer="ana", shown=shown, value=29))
        decide(store, record, DecisionRequest("n_control", "correct", reviewer="ben", shown=shown, value=29))
        defs = build_definitions(settings)
        assert defs.resolve_job_def("review_job").execute_in_process(partition_key=KEY, instance=instance).success
        assert defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
        rows = {row["field"]: row for row in pl.read_csv(tmp_path / "exports" / "atlas_agreement.csv").to_dicts()}
        assert (rows["n_treatment"]["models_compared"], rows["n_treatment"]["models_agreed"]) == (1, 1)
        assert (rows["n_control"]["models_compared"], rows["n_control"]["models_agreed"]) == (1, 0)
        assert rows["p_value"]["found_by_one_model"] == 1
        effect = rows["outcomes.effect_measure"]
        assert (effect["models_compared"], effect["models_agreed"], effect["models_kappa"]) == (1, 0, 0.0)
        # ben's correction of n_treatment counts (the latest): ana and ben disagree on it, agree on n_control
        assert (rows["n_treatment"]["person_checked"], rows["n_treatment"]["person_kept_model_value"]) == (1, 0)
        assert (rows["n_treatment"]["reviewers_compared"], rows["n_treatment"]["reviewers_agreed"]) == (1, 0)
        assert (rows["n_control"]["reviewers_compared"], rows["n_control"]["reviewers_agreed"]) == (1, 1)
        exports = latest_metadata(instance, "extraction_exports")
        assert "| n_control | 0% of 1 |" in exports["agreement"].value

        gold = [GoldValue(document=KEY, field=name, value=value) for name, value in GOLD.items()]
        report = evaluate(gold, {KEY: record}, deployment.load_template())
        assert report.accuracy_by_agreement() == {"agreed": (2, 2), "disagreed": (1, 1), "only_one": (1, 1)}
        assert "Two extractors, values by agreement: agreed 100.0% correct (2)" in report.markdown()

        assert job.execute_in_process(partition_key=KEY, instance=instance).success  # again: both from the cache
        again = read_record(store, KEY, "extraction", ExtractionRecord)
        assert again.extractors["B"]["calls"] == 0 and again.extractors["B"]["cache_hits"] >= 1
        assert again.extractors["A"]["calls"] == 0 and len(second_server.requests()) == len(second_requests)
        assert again.fields["n_control"]["agreement"] == "disagreed"
