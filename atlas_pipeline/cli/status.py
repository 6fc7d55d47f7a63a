"""`atlas status`: task completion computed live from the instance, sources and the Batch API queue."""

from __future__ import annotations

import argparse

from atlas_pipeline.cli.sources import print_sources
from atlas_pipeline.cli.summary import document_states, print_summary
from atlas_pipeline.deployment import Deployment


def command_status(args: argparse.Namespace) -> int:
    """Task completion computed live from the instance (pending and running documents included)."""
    import dagster as dg

    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.runs import reap_dead_runs

    deployment = Deployment.from_environment()
    prepare_dagster_home(deployment.instance_config)
    with dg.DagsterInstance.get() as instance:
        reap_dead_runs(instance)
        states = document_states(instance, deployment)
    print_summary(states)
    print_sources(deployment)
    if deployment.llm_batch:
        print_batches(deployment.store())
    if args.documents:
        for state in states:
            removed = " [source removed]" if state.source_removed else ""
            print(f"{state.key:<50} {state.status.value:<11} {state.reason}{removed}")
    return 0


def print_batches(store) -> None:
    """Batch API mode: what waits to be sent and what waits at the endpoint (as last seen; nothing is asked)."""
    from atlas_pipeline.extraction.llm.batch import BatchQueue

    queue = BatchQueue(store)
    batches = queue.open_batches()
    print(f"Batch API: {len(queue.queued())} request(s) queued for the next batch, {len(batches)} batch(es) open")
    for batch in batches:
        print(
            f"  {batch['id']}: {batch['status']}, {len(batch['keys'])} request(s) for {len(batch['documents'])} "
            f"document(s), submitted {batch['submitted_at']}"
        )
