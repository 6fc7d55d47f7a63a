"""Jobs: one run per document (what the sensor requests), and the aggregates."""

import dagster as dg

from atlas_pipeline.defs.aggregate_assets import GROUP as AGGREGATES_GROUP
from atlas_pipeline.defs.asset_names import DOCUMENT_ASSET_NAMES, REVIEW_ASSET_NAME
from atlas_pipeline.defs.partitions import documents_partitions

document_job = dg.define_asset_job(
    "document_job",
    selection=dg.AssetSelection.assets(*DOCUMENT_ASSET_NAMES),
    partitions_def=documents_partitions,
    description="Snapshot, parse and extract one document (one partition).",
)

document_batch_job = dg.define_asset_job(
    "document_batch_job",
    selection=dg.AssetSelection.assets(*DOCUMENT_ASSET_NAMES).without_checks(),
    partitions_def=documents_partitions,
    description="Snapshot, parse and extract a range of documents in one run (`atlas run --batch N`); the "
    "extraction's checks are logged per document.",
)

aggregates_job = dg.define_asset_job(
    "aggregates_job",
    selection=dg.AssetSelection.groups(AGGREGATES_GROUP),
    description="Recompute task completion and the exports (and the evaluation against the gold, when configured).",
)

review_job = dg.define_asset_job(
    "review_job",
    selection=dg.AssetSelection.assets(REVIEW_ASSET_NAME),
    partitions_def=documents_partitions,
    description="Merge a document's extraction and its review decisions into final values (the review sensor "
    "requests one run per document a person decided on).",
)
