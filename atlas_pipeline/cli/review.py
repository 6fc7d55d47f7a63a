"""`atlas review`: the review page alone."""

from __future__ import annotations

import argparse
import errno
import socket
import sys

from atlas_pipeline.config.hosts import LOOPBACK_ADDRESSES
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.accounts import AccountError, load_accounts


def command_review(args: argparse.Namespace) -> int:
    """Serve the review page on 127.0.0.1: each value beside its evidence, to approve, correct or reject."""
    import uvicorn

    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.review_page.app import create_app

    deployment = Deployment.from_environment()
    access = deployment.page_access()
    home = prepare_dagster_home(deployment.instance_config)
    port = args.port or deployment.review_policy().port
    if args.host not in LOOPBACK_ADDRESSES and access.auth_header:
        print(
            "atlas: behind a proxy that logs people in (ATLAS_REVIEW_AUTH_HEADER), the review page listens on "
            "127.0.0.1 and the proxy forwards to it: anyone reaching the page directly could send the header",
            file=sys.stderr,
        )
        return 2
    if args.host not in LOOPBACK_ADDRESSES:
        try:
            accounts = load_accounts(access.users_file)
        except AccountError as error:
            print(f"atlas: {error}", file=sys.stderr)
            return 2
        if not accounts:
            print(
                f"atlas: the review page listens beyond this machine ({args.host}) only with authentication: add "
                "accounts with `atlas users add NAME --role …` (or keep it on 127.0.0.1 behind a proxy that logs "
                "people in, with ATLAS_REVIEW_AUTH_HEADER)",
                file=sys.stderr,
            )
            return 2
    problem = port_problem(args.host, port)
    if problem:
        print(f"atlas: cannot serve the review page on {args.host}:{port}: {problem}", file=sys.stderr)
        return 2
    print(f"review page on http://{args.host}:{port} (instance {home}); Ctrl-C stops it", flush=True)
    app = create_app(deployment, host=args.host)
    # X-Forwarded-For/-Proto only from the documented proxy (ATLAS_REVIEW_AUTH_HEADER): never a local process's word
    uvicorn.run(app, host=args.host, port=port, log_level="warning", proxy_headers=bool(access.auth_header))
    return 0


def port_problem(host: str, port: int) -> str:
    """Why the page could not listen on ``host:port`` ("" when it can): said before anything claims to serve."""
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                return "the port is in use (another `atlas review` or `atlas dev`?): choose one with --port"
            return error.strerror or str(error)
    return ""
