"""Every outcome of a study: the template's repeating ``outcomes`` group through the real LLM path (the scripted
OpenAI-compatible server answering for real corpus RCTs), its grading, merge, checks and exports; and ``atlas
evaluate`` against the corpus gold with deliberate, counted errors."""

import html
import json
import shutil
import urllib.parse

import dagster as dg
import polars as pl
import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT, load_settings
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.extraction.schema import answer_model, json_schema
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.outputs.evaluation import evaluate, read_gold
from atlas_pipeline.review.decisions import DecisionRequest, load_decisions
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import CORPUS, copy_into
from atlas_pipeline_tests.support.helpers import http_request, latest_metadata, run_atlas, serve
from atlas_pipeline_tests.support.juice_trial import ANEMIA, CORRECT, DURATION, FECAL, KEY
from scripted_servers.processes import local_env

NOT_REPORTED = {"value": None, "quote": None}


def _answer(**outcomes) -> str:
    return json.dumps({**CORRECT, **outcomes})


def test_the_schema_and_model_carry_a_list_of_entries():
    from atlas_pipeline.core.templates import load_template

    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    (group,) = template.groups
    assert group.name == "outcomes" and group.identity[0] == "outcome"
    schema = json_schema(template)["properties"]["outcomes"]
    assert schema["type"] == "array" and "events_intervention" in schema["items"]["properties"]
    assert set(schema["items"]["required"]) == {field.name for field in group.fields}
    parsed = answer_model(template).model_validate({"outcomes": [DURATION, {}]}).model_dump(exclude_unset=True)
    assert parsed["outcomes"][0]["mean_intervention"] == {"value": 47.5, "quote": "White Grape Juice | 47.5 | 38.9"}
    assert template.field_definition("outcomes[2].sd_comparator").type == "number"


def test_outcome_entries_are_graded_checked_and_exported(llm_server, run, instance, tmp_path):
    llm_server.script({"content": _answer(outcomes=[DURATION, FECAL, ANEMIA])})
    result, record = run()
    assert result.success
    fields = record.fields
    assert fields["outcomes[1].mean_intervention"]["tier"] == "verified"
    assert fields["outcomes[1].mean_intervention"]["table"] is not None  # located in Table 5
    assert fields["outcomes[2].mean_comparator"]["tier"] == "verified"
    assert fields["outcomes[2].intervention"]["tier"] == "unverified"  # no quote given
    assert fields["outcomes[1].outcome"]["module"] == "outcomes"
    flags = fields["outcomes[3].events_intervention"]["flags"]
    assert flags == [
        "outcomes[3]: events ≤ total (intervention arm) does not hold: events_intervention = 26 is not ≤ "
        "total_intervention = 20"
    ]
    assert fields["outcomes[3].total_intervention"]["flags"] == flags
    assert record.status == "partial" and "1 consistency violation(s): outcomes[3]" in record.reason
    assert "outcomes[4].outcome" not in fields

    assert run.defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    outcomes = pl.read_parquet(tmp_path / "exports" / "atlas_outcomes.parquet")
    assert outcomes.height == 3 and outcomes["entry"].to_list() == [1, 2, 3]
    first = outcomes.row(0, named=True)
    assert (first["outcome"], first["mean_intervention"], first["sd_comparator"]) == (
        "Duration of diarrhea",
        47.5,
        27.4,
    )
    assert first["mean_intervention__tier"] == "verified" and first["mean_intervention__page"] is not None
    assert first["mean_intervention__quote"] == "White Grape Juice | 47.5 | 38.9"
    assert outcomes.schema["events_intervention"] == pl.Int64 and outcomes.schema["mean_comparator"] == pl.Float64
    anemia = outcomes.row(2, named=True)  # flagged: nobody accepted 26, so the value column is empty
    assert anemia["events_intervention"] is None and anemia["events_intervention__model"] == 26
    fields_export = pl.read_parquet(tmp_path / "exports" / "atlas_fields.parquet")
    assert "outcomes[2].sd_intervention" in fields_export["field"].to_list()
    sheets = pl.read_excel(tmp_path / "exports" / "atlas_documents.xlsx", sheet_id=0)
    assert sheets["outcomes"].height == 3


def test_chunks_merge_entries_by_identity_and_flag_conflicts(
    llm_server, knowledge_base, settings_for, instance, tmp_path
):
    copy_into(knowledge_base, f"rct/{KEY}")
    seeds = tmp_path / "seeds"
    shutil.copytree(PROJECT_ROOT / "seeds" / "templates", seeds / "templates")
    (seeds / "rules").mkdir()
    rule = {"name": "chunked", "strategy": "chunked", "chunk_size_chars": 15000, "chunk_overlap_chars": 500}
    (seeds / "rules" / "chunked.json").write_text(json.dumps(rule))
    settings = settings_for(knowledge_base, rule="chunked", llm_base_url=llm_server.base_url, seeds_dir=str(seeds))
    atlas = Deployment.from_settings(settings)
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, [KEY])
    # chunk 2 reads the duration from the abstract's sentence (apple juice's 49.4 as the intervention mean): the same
    # outcome, named differently in case and punctuation, with another verified value
    other_duration = {
        **DURATION,
        "outcome": {"value": "duration of diarrhea.", "quote": "Duration of diarrhea in hours after randomization"},
        "mean_intervention": {"value": 49.4, "quote": "the mean +/- SD duration in hours was 49.4 ± 32.6"},
    }
    llm_server.script(  # the chunks are asked at the same time: each answer goes to its part
        {"content": json.dumps({"outcomes": [DURATION]}), "when": "part 1 of"},
        {"content": json.dumps({"outcomes": [other_duration, FECAL]}), "when": "part 2 of"},
        default={"content": json.dumps({"outcomes": []})},
    )
    job = build_definitions(settings).resolve_job_def("document_job")
    assert job.execute_in_process(partition_key=KEY, instance=instance).success
    record = read_record(atlas.store(), KEY, "extraction", ExtractionRecord)
    assert record.chunks >= 3
    names = sorted({name.split("].")[0] for name in record.fields if name.startswith("outcomes[")})
    assert names == ["outcomes[1", "outcomes[2"]  # two outcomes, not three
    mean = record.fields["outcomes[1].mean_intervention"]
    assert [(c["chunk"], c["value"]) for c in mean["candidates"]] == [(1, 47.5), (2, 49.4)]
    assert mean["flags"] == [
        "chunks disagree on outcomes[1].mean_intervention: chunk 1: 47.5 (verified), chunk 2: 49.4 (verified)"
    ]
    assert record.fields["outcomes[1].sd_intervention"]["flags"] == []  # both chunks agree on it
    assert record.fields["outcomes[2].outcome"]["value"] == "Fecal losses"


# ---------------------------------------------------------------------------------------------- evaluation

EVALUATED = ["PMC1216327", "PMC5777645", "PMC4675066"]  # 9 continuous outcomes in the corpus gold
ARM_FIELDS = {  # corpus gold column → our field (continuous outcomes)
    "intervention_group_size": "n_intervention",
    "comparator_group_size": "n_comparator",
    "intervention_mean": "mean_intervention",
    "intervention_standard_deviation": "sd_intervention",
    "comparator_mean": "mean_comparator",
    "comparator_standard_deviation": "sd_comparator",
}
SWAPPED_FIELDS = {
    "mean_intervention": "mean_comparator",
    "mean_comparator": "mean_intervention",
    "sd_intervention": "sd_comparator",
    "sd_comparator": "sd_intervention",
}


def corpus_gold(pmcids: list[str]) -> list[dict]:
    """The corpus's human outcome extraction converted to the gold format ``atlas evaluate`` reads."""
    rows = [json.loads(line) for line in (CORPUS / "gold" / "outcome_values.jsonl").read_text().splitlines()]
    gold = []
    for row in rows:
        if f"PMC{row['pmcid']}" not in pmcids:
            continue
        for column, field in ARM_FIELDS.items():
            if row[column] is not None:
                document, identity = f"PMC{row['pmcid']}.pdf", {"outcome": row["outcome"]}
                gold.append({"document": document, "group": "outcomes", "entry": identity, "field": field})
                gold[-1]["value"] = row[column]
    return gold


def _injected(gold: list[dict]) -> tuple[dict[str, list[dict]], dict[str, list[int]]]:
    """Answers from the gold with counted errors — one wrong mean, one outcome with its arms swapped, one outcome
    left out — and what they must score per field: [gold values, extracted, correct]."""
    by_outcome: dict[tuple[str, str], dict] = {}
    for row in gold:
        by_outcome.setdefault((row["document"], row["entry"]["outcome"]), {})[row["field"]] = row["value"]
    outcomes = list(by_outcome)
    wrong_mean, swapped, missing = outcomes[0], outcomes[1], outcomes[-1]
    answers: dict[str, list[dict]] = {}
    for (document, outcome), values in by_outcome.items():
        if (document, outcome) == missing:
            continue
        given = dict(values)
        if (document, outcome) == wrong_mean:
            given["mean_intervention"] += 10
        if (document, outcome) == swapped:
            given |= {field: values.get(partner) for field, partner in SWAPPED_FIELDS.items()}
        name = outcome.lower().removeprefix("the ")  # named a little differently from the gold
        answer = {"outcome": {"value": name, "quote": None}}
        answer |= {field: {"value": value, "quote": None} for field, value in given.items()}
        answers.setdefault(document, []).append(answer)
    expected: dict[str, list[int]] = {}
    for row in gold:
        key, field = (row["document"], row["entry"]["outcome"]), row["field"]
        counts = expected.setdefault(f"outcomes.{field}", [0, 0, 0])
        counts[0] += 1
        if key == missing:
            continue
        if key == swapped and field in SWAPPED_FIELDS:
            extracted = by_outcome[key].get(SWAPPED_FIELDS[field])
            if extracted is not None:
                counts[1] += 1
                counts[2] += extracted == row["value"]
            continue
        counts[1] += 1
        counts[2] += not (key == wrong_mean and field == "mean_intervention")
    return answers, expected


def test_atlas_evaluate_reports_exactly_the_injected_errors(llm_server, knowledge_base, tmp_path):
    gold = corpus_gold(EVALUATED)
    answers, expected = _injected(gold)
    assert len(gold) > 40 and sum(counts[2] for counts in expected.values()) < len(gold)
    for pmcid in EVALUATED:
        copy_into(knowledge_base, f"rct/{pmcid}.pdf")
    gold_file = tmp_path / "gold.jsonl"
    gold_file.write_text("\n".join(json.dumps(row) for row in gold) + "\n")
    env = {
        "DAGSTER_HOME": str(tmp_path / "home"),
        **local_env(tmp_path, knowledge_base),
        "ATLAS_LLM_BASE_URL": llm_server.base_url,
        "ATLAS_LLM_MODEL": "scripted-model",
    }
    for pmcid in EVALUATED:  # one document at a time, each with its own scripted answer
        document = f"{pmcid}.pdf"
        llm_server.script(default={"content": json.dumps({"outcomes": answers.get(document, [])})})
        done = run_atlas("run", "--only", document, env=env, cwd=tmp_path)
        assert done.returncode in (0, 1) and f"[1/1] {document}: incomplete" in done.stdout, done.stdout + done.stderr

    evaluated = run_atlas("evaluate", "--gold", str(gold_file), env=env, cwd=tmp_path)
    assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
    report = (tmp_path / "exports" / "atlas_evaluation.md").read_text()
    assert report in evaluated.stdout and "1 gold entr(y/ies) had no extracted match" in report
    for field, (n_gold, n_extracted, n_correct) in expected.items():
        accuracy = f"{n_correct / n_extracted:.1%}" if n_extracted else "—"
        assert f"| {field} | {n_gold} | {n_extracted} | {n_correct} | {accuracy} | {n_correct / n_gold:.1%} |" in report

    # the corpus's own file as it is (Yun et al.'s rows): the same figures, written and derived values apart
    rows = [line for line in (CORPUS / "gold" / "outcome_values.jsonl").read_text().splitlines() if line.strip()]
    raw = tmp_path / "outcome_values.jsonl"
    wanted = {pmcid.removeprefix("PMC") for pmcid in EVALUATED}
    raw.write_text("\n".join(line for line in rows if str(json.loads(line)["pmcid"]) in wanted) + "\n")
    as_is = run_atlas("evaluate", "--gold", str(raw), env=env, cwd=tmp_path)
    assert as_is.returncode == 0, as_is.stdout + as_is.stderr
    for field, (n_gold, n_extracted, n_correct) in expected.items():
        assert f"| {field} | {n_gold} | {n_extracted} | {n_correct} |" in as_is.stdout, field
    assert "recall of written / derived" in as_is.stdout

    # with ATLAS_GOLD set, the evaluation is an asset refreshed with the aggregates
    with_gold = run_atlas("run", env={**env, "ATLAS_GOLD": str(gold_file)}, cwd=tmp_path)
    assert with_gold.returncode in (0, 1), with_gold.stdout + with_gold.stderr
    with dg.DagsterInstance.from_config(env["DAGSTER_HOME"]) as instance:
        metadata = latest_metadata(instance, "extraction_evaluation")
    assert metadata["documents"].value == 3 and metadata["unmatched_entries"].value == 1
    assert "| outcomes.mean_intervention |" in metadata["accuracy_table"].value

    atlas = Deployment.from_settings(load_settings(env))
    records = {f"{p}.pdf": read_record(atlas.store(), f"{p}.pdf", "extraction", ExtractionRecord) for p in EVALUATED}
    scores = {
        row["field"]: row for row in evaluate(read_gold(gold_file.read_text()), records, atlas.load_template()).rows()
    }
    assert {field: [scores[field][k] for k in ("gold", "extracted", "correct")] for field in expected} == expected
    assert (
        scores["outcomes.mean_intervention"]["accuracy"] < 1.0 and scores["outcomes.n_intervention"]["accuracy"] == 1.0
    )


def test_a_gold_file_with_a_bad_line_is_refused_with_its_number(tmp_path):
    gold = tmp_path / "gold.jsonl"
    gold.write_text('{"document": "a.pdf", "field": "n", "value": 1}\n{"document": "b.pdf"}\n')
    result = run_atlas("evaluate", "--gold", str(gold), env={"ATLAS_ARTIFACTS": str(tmp_path / "a")}, cwd=tmp_path)
    assert result.returncode == 2 and "gold line 2:" in result.stderr
    missing = run_atlas("evaluate", "--gold", str(tmp_path / "none.jsonl"), env={}, cwd=tmp_path)
    assert missing.returncode == 2 and "gold file not found" in missing.stderr


def test_a_reviewer_adds_an_outcome_the_model_missed_and_deletes_a_wrong_one(llm_server, run, instance, tmp_path):
    from atlas_pipeline.review_page.app import create_app

    llm_server.script({"content": _answer(outcomes=[DURATION, ANEMIA])})
    _, record = run()
    shown = {"sha256": record.sha256, "extraction_version": record.extraction_version, "reviewer": "ana"}
    with serve(create_app(Deployment.from_settings(run.settings), instance=lambda: instance)) as site:
        page = http_request(f"{site}/documents/{KEY}")[1]
        assert 'id="entry-outcomes-2"' in page and 'id="entry-outcomes-new"' in page  # the grid: entries, a new row
        added = {
            "outcome": "Fecal losses",
            "mean_intervention": "3.59",
            "sd_intervention": "2.35",
            "n_intervention": "x",
        }
        form = urllib.parse.urlencode({**shown, **added}).encode()
        status, body = http_request(f"{site}/documents/{KEY}/groups/outcomes/entries", form)
        assert status == 409 and "&#39;x&#39; is not a whole number" in body
        assert load_decisions(run.atlas.store(), KEY) == []  # nothing half-added
        added["n_intervention"] = "30"
        form = urllib.parse.urlencode({**shown, **added, "note": "Table 6"}).encode()
        status, body = http_request(f"{site}/documents/{KEY}/groups/outcomes/entries", form)
        assert status == 200 and "entry 1001 of outcomes added by ana" in html.unescape(body)
        form = urllib.parse.urlencode({**shown, "note": "mild anemia is a baseline finding"}).encode()
        status, body = http_request(f"{site}/documents/{KEY}/groups/outcomes/entries/2/reject", form)
        assert status == 200 and "entry 2 of outcomes rejected by ana" in html.unescape(body)

    review = review_document(record, load_decisions(run.atlas.store(), KEY), frozenset({"verified"}))
    assert review.fields["outcomes[1001].mean_intervention"].provenance == "reviewer_added"
    assert review.fields["outcomes[1001].n_intervention"].final_value == 30
    assert {f.provenance for n, f in review.fields.items() if n.startswith("outcomes[2].")} == {"rejected"}
    assert run.defs.resolve_job_def("review_job").execute_in_process(partition_key=KEY, instance=instance).success
    assert run.defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance).success
    outcomes = pl.read_parquet(tmp_path / "exports" / "atlas_outcomes.parquet")
    assert outcomes["entry"].to_list() == [1, 1001]  # the deleted entry is gone, the added one is there
    row = outcomes.row(1, named=True)
    assert (row["outcome"], row["mean_intervention"], row["n_intervention"]) == ("Fecal losses", 3.59, 30)
    assert row["mean_intervention__provenance"] == "reviewer_added" and row["mean_intervention__tier"] is None


def test_a_decision_on_an_entry_never_lands_on_another_outcome_after_renumbering(llm_server, run):
    from atlas_pipeline.review.decisions import decide

    n_30 = {"n_intervention": {"value": 30, "quote": "White Grape | Juice n = 30"}}
    llm_server.script({"content": _answer(outcomes=[{**DURATION, **n_30}, {**FECAL, **n_30}])})
    _, record = run()
    template = run.atlas.load_template()
    name = "outcomes[1].n_intervention"
    decide(
        run.atlas.store(),
        record,
        DecisionRequest(
            name,
            "approve",
            reviewer="ana",
            shown=(record.sha256, record.extraction_version),
            template_field=template.field_definition(name),
            identity=template.identity_for(name),
        ),
    )
    decisions = load_decisions(run.atlas.store(), KEY)
    assert decisions[0].made_on.entry["outcome"] == "Duration of diarrhea"
    assert review_document(record, decisions, frozenset()).fields[name].provenance == "reviewer_approved"
    # a re-extraction gives the same two outcomes in the other order: entry 1 is now the fecal losses, with the
    # same value 30 — the approval was about the duration, so it does not carry over
    swapped = {}
    for field, value in record.fields.items():
        if field.startswith("outcomes[1]."):
            swapped[field.replace("[1]", "[2]")] = value
        elif field.startswith("outcomes[2]."):
            swapped[field.replace("[2]", "[1]")] = value
        else:
            swapped[field] = value
    renumbered = record.model_copy(update={"fields": swapped})
    final = review_document(renumbered, decisions, frozenset()).fields[name]
    assert (final.provenance, final.model_value, final.previous_model_value) == ("recheck", 30, 30)


def _record(key: str, entries: list[dict]) -> ExtractionRecord:
    fields = {}
    for number, entry in enumerate(entries, 1):
        for name, (value, tier) in entry.items():
            fields[f"outcomes[{number}].{name}"] = {"value": value, "tier": tier, "module": "outcomes"}
    return ExtractionRecord(
        key=key, sha256="0" * 64, status="done", reason="", mode="llm", rule="default", template_code="rct_base",
        template_version="1.2.0", template_hash="x", extracted_at="-", fields=fields,
    )  # fmt: skip


def test_evaluation_matches_time_points_by_their_numbers_counts_exactly_and_penalises_extra_outcomes():
    from atlas_pipeline.core.templates import load_template
    from atlas_pipeline.outputs.evaluation import GoldError, GoldValue

    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")

    def gold(time_point: str, field: str, value: object) -> GoldValue:
        entry = {"outcome": "Pain score", "time_point": time_point}
        return GoldValue(document="a.pdf", group="outcomes", entry=entry, field=field, value=value)

    values = [
        gold("6 months", "mean_intervention", 3.1),
        gold("12 months", "mean_intervention", 2.4),
        gold("12 Months", "mean_intervention", 2.4),  # the same entry spelled otherwise: counted once
        gold("6 months", "n_intervention", 200),
        gold("6 months", "sd_intervention", None),  # the report gives no SD
    ]
    pain = ("pain score", "verified")
    extracted = _record(  # in the other order; a count one off; an SD the gold says is absent; an outcome not in gold
        "a.pdf",
        [
            {"outcome": pain, "time_point": ("12 months", "verified"), "mean_intervention": (2.4, "verified")},
            {
                "outcome": pain,
                "time_point": ("6 months", "verified"),
                "mean_intervention": (3.1, "verified"),
                "n_intervention": (201, "verified"),
                "sd_intervention": (1.2, "approximate"),
            },
            {"outcome": ("Nausea", "verified"), "mean_intervention": (0.5, "unverified")},
        ],
    )
    result = evaluate(values, {"a.pdf": extracted}, template, tolerance=0.01)
    scores = {row["field"]: row for row in result.rows()}
    mean = scores["outcomes.mean_intervention"]
    assert (mean["gold"], mean["extracted"], mean["correct"]) == (2, 3, 2)  # the extra outcome's value is wrong
    assert mean["accuracy_unverified"] == 0.0 and mean["verified_precision"] == 1.0
    assert scores["outcomes.n_intervention"]["correct"] == 0  # 201 is not 200, whatever the tolerance
    assert (scores["outcomes.sd_intervention"]["gold"], scores["outcomes.sd_intervention"]["extracted"]) == (0, 1)
    assert result.unmatched_entries == 0 and result.extra_entries == 1
    row = "| outcomes.mean_intervention | 2 | 3 | 2 | 66.7% | 100.0% | 100.0% | unverified 0% (1), verified 100% (2) |"
    assert row in result.markdown()
    with pytest.raises(GoldError, match=r"the template has no outcomes\.mean_arm"):
        evaluate([gold("6 months", "mean_arm", 1)], {}, template)
    nameless = GoldValue(document="a.pdf", group="outcomes", entry={}, field="mean_intervention", value=1)
    with pytest.raises(GoldError, match="needs its outcome"):
        evaluate([nameless], {}, template)


def test_a_decision_on_an_entry_the_model_no_longer_gives_asks_for_a_recheck(llm_server, run):
    from atlas_pipeline.review.decisions import decide

    llm_server.script({"content": _answer(outcomes=[DURATION, FECAL])})
    _, record = run()
    name = "outcomes[2].mean_comparator"
    decide(
        run.atlas.store(),
        record,
        DecisionRequest(name, "approve", reviewer="ana", shown=(record.sha256, record.extraction_version)),
    )
    fewer = {field: value for field, value in record.fields.items() if not field.startswith("outcomes[2].")}
    final = review_document(
        record.model_copy(update={"fields": fewer}), load_decisions(run.atlas.store(), KEY), frozenset()
    )
    assert (final.fields[name].provenance, final.fields[name].previous_model_value) == ("recheck", 2.19)
    assert not final.approved  # never approved on a value that is gone


def test_items_that_are_not_entries_are_dropped_and_two_analyses_of_one_outcome_stay_two(llm_server, run):
    per_protocol = {**DURATION, "mean_intervention": {"value": 49.4, "quote": "49.4 ± 32.6"}}
    llm_server.script({"content": _answer(outcomes=[DURATION, None, "Mortality", per_protocol])})
    result, record = run()
    assert result.success and record.status != "failed"
    entries = sorted({name.split("].")[0] for name in record.fields if name.startswith("outcomes[")})
    assert entries == ["outcomes[1", "outcomes[2"]
    assert (
        record.fields["outcomes[1].mean_intervention"]["value"],
        record.fields["outcomes[2].mean_intervention"]["value"],
    ) == (47.5, 49.4)


def test_a_custom_field_cannot_take_a_groups_name_and_a_field_named_description_stays_in_the_prompt():
    from atlas_pipeline.core.templates import CustomField, TemplateError, assemble_template, load_template
    from atlas_pipeline.extraction.prompt import build_messages

    template = load_template(PROJECT_ROOT / "seeds" / "templates", "rct_base")
    with pytest.raises(TemplateError, match="clash"):
        assemble_template(template, [CustomField(name="outcomes", instruction="all of them")])
    custom = assemble_template(template, [CustomField(name="description", instruction="the trial in a sentence")])
    prompt = build_messages(custom, "text", [], schema=json_schema(custom))[1]["content"]
    shown = json.loads(prompt.split("Answer schema (JSON Schema):\n", 1)[1])
    assert shown["properties"]["description"] == {"$ref": "#/$defs/string"} and "description" in shown["required"]
