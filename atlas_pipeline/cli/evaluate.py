"""`atlas evaluate`: the extractions measured against a gold file."""

from __future__ import annotations

import argparse
import sys

from atlas_pipeline.deployment import Deployment


def command_evaluate(args: argparse.Namespace) -> int:
    """Measure the extractions against a gold file: accuracy, recall and precision of `verified` per field."""
    from atlas_pipeline.core.locations import resolve_location
    from atlas_pipeline.outputs.evaluation import GoldError, evaluate_gold
    from atlas_pipeline.outputs.export_files import EVALUATION_STEM
    from atlas_pipeline.store.layout import export_path

    atlas = Deployment.from_environment()
    tolerance = atlas.gold_tolerance if args.tolerance is None else args.tolerance
    if not 0 <= tolerance <= 1:
        print(f"atlas: --tolerance {tolerance} must be between 0 and 1 (a share: 0.005 is 0.5%)", file=sys.stderr)
        return 2
    try:
        report = evaluate_gold(
            atlas.store(),
            atlas.load_template(),
            resolve_location(args.gold),
            tolerance,
            values=args.values,
            accepted_tiers=atlas.accepted_tiers(),
            derivations=atlas.derivations(),
        )
    except GoldError as error:
        print(f"atlas: {error}", file=sys.stderr)
        return 2
    text = report.markdown()
    print(text)
    print(f"report: {atlas.exports_store().write_text(export_path(EVALUATION_STEM, 'md'), text)}")
    return 0
