"""The document's outcome as the colour of its partition in the Dagster UI: ``document_status``.

Dagster colours an asset partition green once it is materialised, and red only when the run that planned it failed
without materialising it. Atlas keeps a document that failed (a corrupt file, an endpoint that never answered) as a
record with its reason — its snapshot, text and extraction assets all materialise, so completion and the exports
count it — which left every partition green. This last step of a document run says what became of the document:
materialised (green) when it went through, not materialised (missing) when it was skipped or waits at a Batch API,
and a failure of the step (red, the reason in the run's log) when it failed. A run failing here is the document's
failure, not a fault: ``atlas run`` does not retry it, and the daemon's run retries skip step failures.
"""

import dagster as dg

from atlas_pipeline.core.statuses import WENT_THROUGH, DocumentStatus
from atlas_pipeline.defs.asset_names import STATUS_ASSET_NAME
from atlas_pipeline.defs.document_batch import DocumentBatch
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.store.records import ExtractionRecord, read_record

GROUP = "documents"
# the step's failure carries this metadata key: the run failed because documents did, not because of a fault
FAILED_DOCUMENTS = "failed_documents"


@dg.asset(
    name=STATUS_ASSET_NAME,
    partitions_def=documents_partitions,
    group_name=GROUP,
    deps=["document_extraction", "document_review"],
    code_version="1",
    kinds={"python"},
    output_required=False,
    description="What became of the document, as its partition's colour: materialised when it went through (done, "
    "partial, incomplete), missing when it was skipped (unsupported, locked) or waits at the endpoint's Batch API, "
    "failed (red) when it failed — the reason is the step's error. Task completion and the exports count every "
    "document either way.",
)
def document_status(context: dg.AssetExecutionContext, atlas: AtlasResource):
    store, batch = atlas.deployment.store(), DocumentBatch(context)
    failed: dict[str, str] = {}
    for key in batch.keys:
        record = read_record(store, key, "extraction", ExtractionRecord)
        status = record.status if record is not None else None
        reason = record.reason if record is not None else "no extraction record"
        if status in WENT_THROUGH:
            context.log_event(
                dg.AssetMaterialization(
                    asset_key=STATUS_ASSET_NAME,
                    partition=key,
                    metadata={"status": status.value, "reason": reason, "review_page": atlas.review_link(key)},
                )
            )
        elif status is None or status == DocumentStatus.FAILED:
            failed[key] = reason
        else:
            context.log.warning(f"{key}: {status.value}: {reason}")
    if failed:
        listed = "; ".join(f"{key}: {reason}" for key, reason in list(failed.items())[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        raise dg.Failure(
            description=f"{len(failed)} document(s) failed — {listed}{more}",
            metadata={FAILED_DOCUMENTS: dg.MetadataValue.json(failed)},
            allow_retries=False,
        )
    yield from ()
