"""`atlas migrate`: copy a deployment into the one configured now, verified."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from atlas_pipeline.cli.summary import document_states
from atlas_pipeline.deployment import Deployment


def _rebuild_search(source, target, deployment: Deployment, states) -> None:
    """The search index is derived: it is rebuilt in the new deployment's backend (SQLite → PostgreSQL, say) from
    the migrated records, and its count printed beside the old index's (read only if it exists: an old deployment
    without one, or with a stale one, is not a failed migration)."""
    from atlas_pipeline.search.backends import SQLITE_NAME, open_index
    from atlas_pipeline.search.refresh import refresh_index

    with deployment.search_index(target) as index:
        report = refresh_index(index, deployment.store(), states)
    old = "none"
    old_sqlite = Path(source.storage_directory()) / SQLITE_NAME
    if old_sqlite.exists() or getattr(source.run_storage, "postgres_url", ""):
        try:
            with open_index("auto", str(old_sqlite), source) as previous:
                old = f"{previous.count()} in {previous.backend}"
        except Exception as error:  # the old index is only compared with, never needed
            old = f"unreadable ({type(error).__name__})"
    print(
        f"search index: {report.indexed} document(s) indexed in {index.backend} ({index.location}); the old "
        f"deployment's index: {old}"
    )


def command_migrate(args: argparse.Namespace) -> int:
    """Copy a deployment (default: the embedded var/ one) into the one configured now (e.g. PostgreSQL + S3)."""
    from pathlib import Path

    import dagster as dg

    from atlas_pipeline.core.locations import resolve_location
    from atlas_pipeline.defs.partitions import documents_partitions
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.migration import (
        MigrationError,
        changed_documents,
        copy_instance,
        copy_store,
        verify_instance,
        verify_runs,
    )
    from atlas_pipeline.store import layout
    from atlas_pipeline.store.files import Store

    target_deployment = Deployment.from_environment()
    source_deployment = target_deployment.with_values(
        artifacts=resolve_location(args.from_artifacts), exports=resolve_location(args.from_exports)
    )
    source_home = Path(args.from_home).expanduser().resolve()
    if not (source_home / "dagster.yaml").is_file():
        print(f"atlas migrate: {source_home} holds no dagster.yaml (not a Dagster home)", file=sys.stderr)
        return 2
    target_home = prepare_dagster_home(target_deployment.instance_config)
    if target_home == source_home:
        print("atlas migrate: DAGSTER_HOME is the source home; point it at the new deployment's home", file=sys.stderr)
        return 2
    pairs = [
        (source_deployment.store().location, target_deployment.store().location),
        (source_deployment.exports_store().location, target_deployment.exports_store().location),
    ]
    if any(old == new for old, new in pairs):
        print("atlas migrate: ATLAS_ARTIFACTS/ATLAS_EXPORTS must differ from the source stores", file=sys.stderr)
        return 2
    print(f"from: {source_home} + {pairs[0][0]} + {pairs[1][0]}")
    print(f"to:   {target_home} + {pairs[0][1]} + {pairs[1][1]}")
    progress = None if args.quiet else (lambda line: print(f"  {line}", flush=True))
    try:
        with (
            dg.DagsterInstance.from_config(str(source_home)) as source,
            dg.DagsterInstance.get() as target,
        ):
            for (old, new), derived in zip(pairs, (layout.is_derived, lambda relative: True), strict=True):
                copied = copy_store(Store(old), Store(new), progress, derived)
                kept = f"; {copied.kept_derived} recomputed there kept" if copied.kept_derived else ""
                print(
                    f"store {new}: {copied.objects} objects verified by sha256 "
                    f"({copied.copied} copied, {copied.bytes_copied:,} bytes; {copied.already_present} already there"
                    f"{kept})"
                )
            history = copy_instance(source, target, [documents_partitions.name], progress)
            repaired = f" ({history.runs_repaired} half-copied run(s) copied again)" if history.runs_repaired else ""
            print(
                f"instance: {history.runs_copied} of {history.runs} runs copied with {history.events_copied} events"
                f"{repaired}, {sum(history.partitions_added.values())} partitions registered, "
                f"{history.instigator_states} sensor/schedule states, {history.backfills} backfills"
            )
            comparisons = verify_instance(source, target)
            run_differences = verify_runs(source, target)
            before = document_states(source, source_deployment)
            after = document_states(target, target_deployment)
            _rebuild_search(source, target, target_deployment, after)
    except MigrationError as error:
        print(f"atlas migrate: {error}", file=sys.stderr)
        return 1
    print("materialisations (source → target):")
    for item in comparisons:
        print(
            f"  {item.asset_key:<24} {item.source_materialized:>6} → {item.target_materialized:<6} "
            f"{'same' if item.same else 'DIFFERENT'}"
        )
    print(f"runs: {len(run_differences)} differ in status or events (source → target)")
    for item in run_differences[:20]:
        print(
            f"  - {item.run_id[:8]}: {item.source_status} with {item.source_events} events → "
            f"{item.target_status} with {item.target_events}"
        )
    changed = changed_documents(before, after)
    print(f"documents: {len(before)} before, {len(after)} after, {len(changed)} with another status/reason")
    for key, old, new in changed[:20]:
        print(f"  - {key}: {old} → {new}")
    if changed or run_differences or not all(item.same for item in comparisons):
        print("atlas migrate: the new deployment differs from the old one (see above)", file=sys.stderr)
        return 1
    print("migrated without loss; start the new deployment (atlas dev / atlas run) with these settings")
    return 0
