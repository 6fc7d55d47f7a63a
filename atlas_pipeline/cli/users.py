"""`atlas users`: the review page's accounts (names, roles, password hashes in ``ATLAS_REVIEW_USERS``)."""

from __future__ import annotations

import argparse
import getpass
import sys

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.accounts import ROLES, AccountError, add_account, change_account, load_accounts


def _password(args: argparse.Namespace) -> str:
    """From standard input with --password-stdin (scripts), else asked twice without echo."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\n")
    first = getpass.getpass("password: ")
    if first != getpass.getpass("again: "):
        raise AccountError("the two passwords differ")
    return first


def _assign(args: argparse.Namespace) -> int:
    """Who extracts which document: one by hand (``KEY --to A --to B``; no --to: whoever starts first), or every
    study not yet assigned or started shared out in turn (``--round-robin``, among --to or every extractor account)."""
    import dagster as dg

    from atlas_pipeline.cli.summary import document_states
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.outputs.study_report import studies
    from atlas_pipeline.review.extraction_team import assign, load_assignments, round_robin, teams
    from atlas_pipeline.review.study_values import load_choices

    deployment = Deployment.from_environment()
    store, extractors = deployment.store(), deployment.review_policy().extractors
    accounts = load_accounts(deployment.page_access().users_file)
    names = args.to or [name for name, account in accounts.items() if account.role == "extractor"]
    unknown = [name for name in args.to if name not in accounts] if accounts else []
    if unknown:
        raise AccountError(f"no account {', '.join(map(repr, unknown))} (accounts: {', '.join(accounts) or 'none'})")
    if not args.round_robin:
        if not args.name:
            raise AccountError("`atlas users assign KEY --to NAME …` (or --round-robin)")
        team = teams(store, [args.name], extractors)[args.name]
        if team.open:
            raise AccountError(f"{args.name} is compared already: its extractors stay who they were")
        assign(store, {args.name: args.to}, by="atlas users")
        print(f"{args.name}: " + (f"extracted by {' and '.join(args.to)}" if args.to else "whoever starts first"))
        return 0
    prepare_dagster_home(deployment.instance_config)  # $DAGSTER_HOME, or var/dagster_home as every command
    with dg.DagsterInstance.get() as instance:
        states = document_states(instance, deployment)
    taken = {key for key, t in teams(store, [s.key for s in states], extractors).items() if t.started}
    taken |= set(load_assignments(store))
    groups = [
        [report.key for report in study.reports]
        for study in studies(states, deployment.load_template(), load_choices(store))
        if not any(report.key in taken for report in study.reports)
    ]
    try:
        shared = round_robin(groups, names, extractors)
    except ValueError as error:
        raise AccountError(str(error)) from None
    count = assign(store, shared, by="atlas users")
    print(f"{count} document(s) of {len(groups)} study(ies) shared out among {', '.join(names)}")
    return 0


def command_users(args: argparse.Namespace) -> int:
    """Manage the review page's accounts: list, add NAME --role R, role NAME R, passwd NAME, remove NAME; and who
    extracts what: assign KEY --to NAME --to NAME, assign --round-robin."""
    path = Deployment.from_environment().page_access().users_file
    try:
        if args.action == "assign":
            return _assign(args)
        if args.action == "list":
            accounts = load_accounts(path)
            if not accounts:
                print(f"no accounts in {path}: the review page is open on this machine only")
            for account in accounts.values():
                how = "password" if account.password_hash else "proxy header only"
                print(f"{account.name}\t{account.role}\t{how}\tsince {account.created_at[:10]}")
            return 0
        if not args.name:
            raise AccountError(f"`atlas users {args.action}` needs a NAME")
        if args.action == "add":
            password = None if args.proxy_only else _password(args)
            account = add_account(path, args.name, args.role, password)
            print(f"added {account.name} ({account.role}) to {path}")
        elif args.action == "role":
            if args.value not in ROLES:
                raise AccountError(f"`atlas users role NAME ROLE`: ROLE is one of {', '.join(ROLES)}")
            change_account(path, args.name, role=args.value)
            print(f"{args.name} is now {args.value}")
        elif args.action == "passwd":
            change_account(path, args.name, password=_password(args))
            print(f"password of {args.name} changed: their open sessions end at once (they log in again with it)")
        elif args.action == "remove":
            change_account(path, args.name, remove=True)
            print(f"removed {args.name}; their decisions stay in the log under their name")
    except AccountError as error:
        print(f"atlas: {error}", file=sys.stderr)
        return 2
    return 0


def add_users_parser(commands) -> None:
    users = commands.add_parser("users", help=command_users.__doc__)
    users.add_argument(
        "action", choices=["list", "add", "role", "passwd", "remove", "assign"], nargs="?", default="list"
    )
    users.add_argument(
        "name", nargs="?", default="", help="the person's name, as it appears in the audit log (`assign`: a document)"
    )
    users.add_argument("value", nargs="?", default="", help="`role`: the new role")
    users.add_argument("--role", choices=ROLES, default="extractor", help="`add`: the role (default extractor)")
    users.add_argument("--password-stdin", action="store_true", help="read the password from standard input")
    users.add_argument("--proxy-only", action="store_true", help="`add`: no password (ATLAS_REVIEW_AUTH_HEADER)")
    users.add_argument("--to", action="append", default=[], help="`assign`: an extractor (give it twice for two)")
    users.add_argument(
        "--round-robin", action="store_true", help="`assign`: share out every study not yet assigned or started"
    )
    users.set_defaults(handler=command_users)
