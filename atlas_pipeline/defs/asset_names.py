"""The names of the pipeline's assets, for the modules that refer to assets they do not define (jobs, states read
from the instance, the CLI) — kept apart from the asset code so that naming an asset never imports it."""

# per document (partitioned by ``partitions.documents_partitions``), in pipeline order
DOCUMENT_ASSET_NAMES = (
    "document_snapshot",
    "document_text",
    "document_tables",
    "document_extraction",
    "document_review",
    "document_status",
)
EXTRACTION_ASSET_NAME = "document_extraction"
REVIEW_ASSET_NAME = "document_review"
STATUS_ASSET_NAME = "document_status"  # the outcome as the partition's colour; not read for the document's state
# over every document
AGGREGATE_ASSET_NAMES = ("duplicate_groups", "task_completion", "extraction_exports", "search_index")
# metadata key of the aggregates: when they read the document states (a document landing later is not in them)
STATES_READ_AT = "states_read_at"
# metadata key of the aggregates whose figures depend on what makes a value final (the team's acceptance policy, the
# derivation rules, the template): the policy they were made with (``Deployment.final_values_policy``)
FINAL_VALUES_POLICY = "final_values_policy"
# metadata key of extraction_exports: each export file that could not be written, with why (the others were)
FILES_NOT_WRITTEN = "files_not_written"
EVALUATION_ASSET_NAME = "extraction_evaluation"  # an aggregate too, when a gold file is configured (ATLAS_GOLD)
