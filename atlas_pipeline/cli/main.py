"""The `atlas` command: its arguments, and the errors every command reports the same way."""

from __future__ import annotations

import argparse
import os
import sys
import warnings
from pathlib import Path

from atlas_pipeline.cli.cancel import command_cancel
from atlas_pipeline.cli.check_instance import command_check_instance
from atlas_pipeline.cli.dev import command_dev
from atlas_pipeline.cli.duplicates import command_duplicates
from atlas_pipeline.cli.evaluate import command_evaluate
from atlas_pipeline.cli.init import command_init
from atlas_pipeline.cli.migrate import command_migrate
from atlas_pipeline.cli.review import command_review
from atlas_pipeline.cli.run import command_run
from atlas_pipeline.cli.search import command_search
from atlas_pipeline.cli.show_settings import command_settings
from atlas_pipeline.cli.sources import command_sources
from atlas_pipeline.cli.status import command_status
from atlas_pipeline.cli.users import add_users_parser
from atlas_pipeline.config.review_folder import REVIEW_VARIABLE, ReviewFolderError, find_review
from atlas_pipeline.config.settings import SettingsError, SettingsWarning
from atlas_pipeline.core.redaction import install_log_redaction, redact
from atlas_pipeline.core.templates import TemplateError
from atlas_pipeline.extraction.prices import PriceError
from atlas_pipeline.knowledge.state_owner import StateOwnerError
from atlas_pipeline.sources.config import SourcesError

DESCRIPTION = (
    "atlas command line: start a review, run the whole pipeline, print task completion, open the UI, show settings, "
    "migrate."
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atlas", description=DESCRIPTION)
    parser.add_argument(
        "--review",
        metavar="DIR",
        default="",
        help="the review folder to work on (default: ATLAS_REVIEW, else the folder holding atlas.toml from here up; "
        "outside any review: the settings alone, e.g. the repository's sample)",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help=command_init.__doc__)
    init.add_argument("folder", metavar="DIR", help="the review's folder (created; an existing review is refused)")
    init.add_argument(
        "--knowledge-base",
        default="",
        metavar="PATH",
        help="the documents: a folder or s3:// prefix (default: DIR/knowledge_base, created empty)",
    )
    init.add_argument("--rule", default="default", help="the rule in seeds/rules (default %(default)s)")
    init.set_defaults(handler=command_init)
    run = commands.add_parser("run", help=command_run.__doc__)
    run.add_argument(
        "--only", nargs="+", metavar="KEY", help="process only these partition keys (cancelled ones run again)"
    )
    run.add_argument(
        "--force",
        action="store_true",
        help="run documents again even when they were already extracted from the same bytes with this version "
        "(cancelled ones included)",
    )
    run.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="documents processed in parallel processes (default 1; the layout model already uses several threads)",
    )
    run.add_argument(
        "--batch",
        type=int,
        default=0,
        metavar="N",
        help="documents per Dagster run (default: ATLAS_DOCUMENTS_PER_RUN, else ATLAS_LLM_CONCURRENCY in LLM mode so "
        "that a run's documents are extracted at once, else 1; e.g. 50 for bulk loads: Dagster's per-run cost is paid "
        "once)",
    )
    run.add_argument(
        "--knowledge-base-moved",
        action="store_true",
        help="the knowledge base this state belongs to moved to ATLAS_KNOWLEDGE_BASE (same documents): take it",
    )
    run.add_argument(
        "--estimate",
        action="store_true",
        help="print the LLM requests, tokens and cost of what would run, and stop: nothing is parsed or sent",
    )
    run.set_defaults(handler=command_run)
    status = commands.add_parser("status", help=command_status.__doc__)
    status.add_argument("--documents", action="store_true", help="also list every document")
    status.set_defaults(handler=command_status)
    dev = commands.add_parser("dev", help=command_dev.__doc__)
    dev.add_argument("--host", default="127.0.0.1", help="the Dagster UI's, default 127.0.0.1 (this machine only)")
    dev.add_argument(
        "--port", type=int, default=3000, help="the Dagster UI's, default 3000 (the review page's: ATLAS_REVIEW_PORT)"
    )
    dev.set_defaults(handler=command_dev)
    review = commands.add_parser("review", help=command_review.__doc__)
    review.add_argument("--host", default="127.0.0.1", help="default 127.0.0.1 (this machine only)")
    review.add_argument("--port", type=int, default=0, help="default: ATLAS_REVIEW_PORT (3001)")
    review.set_defaults(handler=command_review)
    evaluate = commands.add_parser("evaluate", help=command_evaluate.__doc__)
    evaluate.add_argument(
        "--gold", required=True, metavar="FILE", help="gold values, JSON lines (see docs/extraction.md)"
    )
    evaluate.add_argument(
        "--tolerance", type=float, default=None, help="relative tolerance for numbers (default ATLAS_GOLD_TOLERANCE)"
    )
    evaluate.add_argument(
        "--values",
        choices=("auto", "model", "final"),
        default="auto",
        help="whose values: the model's, or the final ones (people's decisions and the team's policy); auto: final "
        "when no model extracted (the default mode), else the model's",
    )
    evaluate.set_defaults(handler=command_evaluate)
    migrate = commands.add_parser("migrate", help=command_migrate.__doc__)
    migrate.add_argument("--from-home", default="var/dagster_home", help="old DAGSTER_HOME (default %(default)s)")
    migrate.add_argument("--from-artifacts", default="var/artifacts", help="old ATLAS_ARTIFACTS (default %(default)s)")
    migrate.add_argument("--from-exports", default="var/exports", help="old ATLAS_EXPORTS (default %(default)s)")
    migrate.add_argument("--quiet", action="store_true", help="no progress lines")
    migrate.set_defaults(handler=command_migrate)
    check = commands.add_parser("check-instance", help=command_check_instance.__doc__)
    check.add_argument("files", nargs="+", metavar="DAGSTER_YAML")
    check.set_defaults(handler=command_check_instance)
    search = commands.add_parser("search", help=command_search.__doc__)
    search.add_argument("query", help='words and "quoted phrases" (all must match)')
    search.add_argument("--status", default="", help="only documents in this status (done, approved, failed, …)")
    search.add_argument("--field", default="", help="only this extracted field's values (e.g. sample_size)")
    search.add_argument("--source", default="", help="only documents brought by this collector")
    search.add_argument("--limit", type=int, default=20)
    search.set_defaults(handler=command_search)
    duplicates = commands.add_parser("duplicates", help=command_duplicates.__doc__)
    duplicates.add_argument("action", nargs="?", choices=["list", "split", "join"], default="list")
    duplicates.add_argument("key", nargs="?", metavar="KEY", help="the document to split out of its group, or join")
    duplicates.add_argument("--reviewer", default="", help="who splits (default ATLAS_REVIEWER, then $USER)")
    duplicates.set_defaults(handler=command_duplicates)
    cancel = commands.add_parser("cancel", help=command_cancel.__doc__)
    cancel.add_argument("keys", nargs="+", metavar="KEY", help="documents whose queued run to cancel")
    cancel.add_argument("--by", default="", help="who cancels (default ATLAS_REVIEWER, then $USER)")
    cancel.set_defaults(handler=command_cancel)
    sources = commands.add_parser("sources", help=command_sources.__doc__)
    sources.add_argument("action", nargs="?", choices=["list", "collect", "resume"], default="list")
    sources.add_argument("names", nargs="*", metavar="NAME", help="sources (default: every declared source)")
    sources.set_defaults(handler=command_sources)
    settings = commands.add_parser("settings", help=command_settings.__doc__)
    settings.set_defaults(handler=command_settings)
    add_users_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    install_log_redaction()
    if args.review:
        os.environ[REVIEW_VARIABLE] = str(Path(args.review).expanduser().resolve())
    show = warnings.showwarning
    shown: set[str] = set()

    def show_settings_warnings(message, category, filename, lineno, file=None, line=None):
        """A settings warning once a command: a command may read the settings more than once (`atlas run`: its
        definitions, then itself), each read warning again."""
        if issubclass(category, SettingsWarning):
            if str(message) not in shown:
                shown.add(str(message))
                print(f"atlas: warning: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = show_settings_warnings
    try:
        review = find_review() if args.command != "init" else None
        if review is not None:  # the processes a command starts (Dagster, the review page) work on it too
            os.environ[REVIEW_VARIABLE] = str(review.root)
        return args.handler(args)
    except (
        SettingsError,
        ReviewFolderError,
        StateOwnerError,
        TemplateError,
        SourcesError,
        PriceError,
        FileNotFoundError,
        PermissionError,
    ) as error:
        print(f"atlas: {redact(str(error))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `atlas settings | head`: the reader left, nothing is wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as error:  # an LLM endpoint that cannot be used (no URL in forced llm mode): its reason
        reason = getattr(error, "reason", None)
        if reason is None or type(error).__name__ != "LLMPermanentError":
            raise
        print(f"atlas: {reason}", file=sys.stderr)
        return 2
