"""`atlas cancel`: documents waiting in the run queue, cancelled by a person."""

from __future__ import annotations

import argparse
import sys

from atlas_pipeline.deployment import Deployment


def command_cancel(args: argparse.Namespace) -> int:
    """Cancel documents waiting in the run queue (a document being processed is refused); they end `cancelled`."""
    import dagster as dg

    from atlas_pipeline.defs.cancellation import CancelRefused, cancel_documents
    from atlas_pipeline.ops.instance import prepare_dagster_home

    deployment = Deployment.from_environment()
    prepare_dagster_home(deployment.instance_config)
    by = deployment.person(args.by)
    with dg.DagsterInstance.get() as instance:
        try:
            cancelled = cancel_documents(instance, deployment.store(), args.keys, by)
        except CancelRefused as refusal:
            for item in refusal.cancelled:
                print(f"{item.key}: cancelled (run {item.run_id[:8]}, queued since {item.queued_since}) by {by}")
            what = "the others were not cancelled" if refusal.cancelled else "nothing cancelled"
            print(f"atlas: {what}:\n{refusal}", file=sys.stderr)
            return 1
    for item in cancelled:
        print(f"{item.key}: cancelled (run {item.run_id[:8]}, queued since {item.queued_since}) by {by}")
    print("their status is `cancelled` until they run again: `atlas run --only KEY`, or materialise in the UI")
    return 0
