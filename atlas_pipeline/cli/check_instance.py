"""`atlas check-instance`: Dagster instance configs validated without connecting to anything."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def command_check_instance(args: argparse.Namespace) -> int:
    """Validate Dagster instance config files (e.g. deploy/k8s/dagster.yaml) without connecting to anything."""

    from atlas_pipeline.ops.instance import validate_instance_config

    failed = 0
    for name in args.files:
        path = Path(name)
        if not path.is_file():
            print(f"{name}: no such file", file=sys.stderr)
            failed += 1
            continue
        problems = validate_instance_config(path)
        failed += bool(problems)
        for problem in problems:
            print(problem, file=sys.stderr)
        if not problems:
            print(f"{name}: valid")
    return 1 if failed else 0
