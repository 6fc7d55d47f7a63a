"""`atlas duplicates`: documents recognised as one work, and a person's split or join."""

from __future__ import annotations

import argparse
import sys

from atlas_pipeline.deployment import Deployment


def command_duplicates(args: argparse.Namespace) -> int:
    """List the documents recognised as one work, or split a wrong grouping (join undoes a split)."""
    import dagster as dg

    from atlas_pipeline.definitions import build_definitions
    from atlas_pipeline.knowledge.duplicate_records import join, load_groups, load_splits, split
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.runs import QUIET_RUN_CONFIG

    deployment = Deployment.from_environment()
    store = deployment.store()
    if args.action in ("split", "join"):
        if not args.key:
            print(f"atlas: `atlas duplicates {args.action}` needs a document KEY", file=sys.stderr)
            return 2
        groups = load_groups(store)
        grouped = {key for group in groups.groups for key in group["members"]}
        if args.action == "split":
            if args.key not in grouped:
                print(f"atlas: {args.key} is in no duplicate group (see `atlas duplicates`)", file=sys.stderr)
                return 2
            split(store, args.key, by=deployment.person(args.reviewer))
        elif not join(store, args.key):
            print(f"atlas: {args.key} was not split", file=sys.stderr)
            return 2
        prepare_dagster_home(deployment.instance_config)
        with dg.DagsterInstance.get() as instance:  # the groups, task completion and exports follow now
            build_definitions(deployment).resolve_job_def("aggregates_job").execute_in_process(
                instance=instance, run_config=QUIET_RUN_CONFIG
            )
    groups = load_groups(store)
    if not groups.groups:
        print(f"no duplicates among {groups.documents} document(s)")
    for group in groups.groups:
        print(f"{group['canonical']} (canonical)")
        for key, why in group["evidence"].items():
            print(f"  = {key}: {why}")
    for key, made in load_splits(store).splits.items():
        print(f"split by {made.by}: {key} (never grouped; `atlas duplicates join {key}` undoes it)")
    return 0
