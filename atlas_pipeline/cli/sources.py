"""`atlas sources`: the declared collectors and their health; collect now; resume a paused one."""

from __future__ import annotations

import argparse
import sys

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.sources.config import SourcesError


def print_sources(deployment: Deployment) -> None:
    """One line per declared source: its health, what it collected, what waits."""
    from atlas_pipeline.sources.state import load_state

    store = deployment.store()
    try:
        sources = deployment.declared_sources()
    except SourcesError as error:
        print(f"sources: none collects: {error}")
        return
    for source in sources:
        state = load_state(store, source.name)
        counts = ", ".join(f"{count} {outcome}" for outcome, count in sorted(state.counts().items())) or "nothing yet"
        health = (
            f"PAUSED ({state.paused_reason})"
            if state.paused
            else f"failing ({state.consecutive_failures} in a row: {state.last_error})"
            if state.consecutive_failures
            else "healthy"
        )
        print(f"source {source.name} [{source.kind} → {source.target}/]: {health}; items: {counts}")


def command_sources(args: argparse.Namespace) -> int:
    """List the declared sources and their health, collect now, or resume a paused source."""
    from atlas_pipeline.sources.collector import Collector
    from atlas_pipeline.sources.state import resume
    from atlas_pipeline.store.files import Store

    deployment = Deployment.from_environment()
    sources = {source.name: source for source in deployment.declared_sources()}
    if not sources:
        print("no sources declared: set ATLAS_SOURCES to a TOML file (see seeds/sources.example.toml)")
        return 0 if args.action == "list" else 2
    names = args.names or list(sources)
    unknown = [name for name in names if name not in sources]
    if unknown:
        print(f"atlas: unknown source(s) {', '.join(unknown)}; declared: {', '.join(sources)}", file=sys.stderr)
        return 2
    store = deployment.store()
    if args.action == "resume":
        for name in names:
            resume(store, name)
            print(f"{name}: resumed")
    elif args.action == "collect":
        for name in names:
            collector = Collector(sources[name], store, Store(deployment.knowledge_base), deployment.politeness())
            print(collector.run().summary(), flush=True)
    print_sources(deployment)
    return 0
