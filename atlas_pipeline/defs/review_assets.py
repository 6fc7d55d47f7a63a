"""The review of each document: the model's answer and the people's decisions merged into final values
(``review.final_values``). Materialised after every extraction (``document_job``) and whenever a decision is made
(``review_job``, requested by the review sensor)."""

import dagster as dg

from atlas_pipeline.defs.document_batch import DocumentBatch
from atlas_pipeline.defs.document_runs import wait_for_older_runs
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.extraction.kept_extraction import values_record
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.store.records import ExtractionRecord, read_record, write_record

GROUP = "documents"


@dg.asset(
    partitions_def=documents_partitions,
    group_name=GROUP,
    deps=["document_extraction"],
    code_version="1",
    kinds={"python"},
    description="Final values with provenance: model-verified, reviewer-approved, reviewer-corrected, rejected, "
    "awaiting review or re-check (a decision made on a value the model no longer gives). Decisions come from the "
    "review page and imported workbooks and are never lost; the document is `approved` once every field is decided "
    "or accepted by the team's policy (ATLAS_REVIEW_ACCEPT_TIERS).",
)
def document_review(context: dg.AssetExecutionContext, atlas: AtlasResource) -> dg.MaterializeResult:
    batch = DocumentBatch(context)
    if context.dagster_run.job_name == "review_job":
        wait_for_older_runs(context, batch.keys)  # never merge against an extraction that is being rewritten
    store = atlas.deployment.store()
    accepted, derivations = atlas.deployment.accepted_tiers(), atlas.deployment.derivations()
    team = atlas.deployment.team_review()
    for key in batch.keys:
        record = values_record(store, key, read_record(store, key, "extraction", ExtractionRecord))
        review = review_document(record, load_decisions(store, key, withdrawn=True), accepted, derivations, team)
        if review is None:
            batch.add_metadata(key, {"status": "no extraction", "review_page": atlas.review_link(key)})
            continue
        write_record(store, key, "review", review)
        metadata = {
            "status": review.state,
            "summary": review.summary(),
            "fields_to_review": review.to_review,
            "decisions": review.decisions,
            "reviewers": ", ".join(review.reviewers) or "none",
            "disagreements": review.disagreements,
            **{f"fields_{name}": count for name, count in review.counts.items()},
            "review_page": atlas.review_link(key),
        }
        batch.add_metadata(key, metadata)
    return dg.MaterializeResult()
