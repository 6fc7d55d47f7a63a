"""`atlas review`: the review page alone."""

from __future__ import annotations

import argparse

from atlas_pipeline.config.settings import load_settings


def command_review(args: argparse.Namespace) -> int:
    """Serve the review page on 127.0.0.1: each value beside its evidence, to approve, correct or reject."""
    import uvicorn

    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.review_page.app import create_app

    settings = load_settings()
    home = prepare_dagster_home(settings.instance_config)
    port = args.port or settings.review_port
    print(f"review page on http://{args.host}:{port} (instance {home}); Ctrl-C stops it", flush=True)
    uvicorn.run(create_app(settings), host=args.host, port=port, log_level="warning")
    return 0
