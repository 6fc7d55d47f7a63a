"""`atlas init DIR`: start a review of one's own in a folder."""

from __future__ import annotations

import argparse
from pathlib import Path

from atlas_pipeline.cli.invocation import atlas_command
from atlas_pipeline.config.review_folder import init_review


def command_init(args: argparse.Namespace) -> int:
    """Start a review in a folder: its settings in DIR/atlas.toml, its state and exports inside it."""
    review = init_review(Path(args.folder), args.knowledge_base, args.rule)
    knowledge_base = review.setting_values()["knowledge_base"]
    atlas = atlas_command()
    print(f"review started in {review.root}")
    print(f"  settings:       {review.file} (knowledge base, rule; `{atlas} settings` lists the others)")
    print(f"  knowledge base: {knowledge_base}" + ("" if args.knowledge_base else " (put your documents here)"))
    print(f"  state:          {review.root / 'state'} (instance, artifacts, decisions, accounts)")
    print(f"  exports:        {review.root / 'exports'}")
    anywhere = atlas if atlas == "atlas" else str(Path(atlas).resolve())  # still right after a `cd`
    print(f"next: `ATLAS_REVIEW={review.root} make run` from the checkout, `{atlas} --review {review.root} run`, or")
    print(f"      `cd {review.root}` and `{anywhere} run`")
    return 0
