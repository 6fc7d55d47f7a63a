"""`atlas search`: ranked full-text search over texts, tables and extracted values."""

from __future__ import annotations

import argparse
import sys
import time

from atlas_pipeline.deployment import Deployment


def command_search(args: argparse.Namespace) -> int:
    """Search every document's text, tables and extracted values (ranked, with snippets)."""
    import dagster as dg

    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.search.entries import QueryTooLongError

    deployment = Deployment.from_environment()
    prepare_dagster_home(deployment.instance_config)
    with dg.DagsterInstance.get() as instance, deployment.search_index(instance) as index:
        started = time.perf_counter()
        try:
            hits = index.search(args.query, args.status, args.field, args.source, max(1, args.limit))
        except QueryTooLongError as error:
            print(f"atlas: {error}", file=sys.stderr)
            return 2
        took = time.perf_counter() - started
        total = index.count()
    if not total:
        print("the search index is empty: `atlas run` (or the daemon) builds it as documents are processed")
        return 1
    print(f"{len(hits)} document(s) for {args.query!r} among {total} ({index.backend}, {took * 1000:.0f} ms)")
    for rank, hit in enumerate(hits, start=1):
        where = f"value {hit.field}" if hit.field else hit.part
        source = f", from {hit.source}" if hit.source else ""
        print(f"{rank:>3}. {hit.key}  [{hit.status}{source}]  {hit.title[:90]}")
        print(f"     {where}: {hit.marked()}")
    return 0 if hits else 1
