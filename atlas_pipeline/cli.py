"""``atlas`` command line: run the whole pipeline, print task completion, open the UI, show settings, migrate."""

from __future__ import annotations

import argparse
import os
import sys
import time

from atlas_pipeline.extraction.templates import TemplateError
from atlas_pipeline.settings import SettingsError, describe_settings, load_settings

QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}


def _states(instance, atlas):
    return atlas.document_states(instance)


def _print_summary(states) -> None:
    from atlas_pipeline.completion import summarise

    for line in summarise(states).lines():
        print(line)
    problems = [s for s in states if s.status.value in ("failed", "skipped", "pending", "extracting")]
    for state in problems:
        print(f"  - {state.key}: {state.status.value}: {state.reason}")


_WORKER: dict = {}


def _worker_context(defs=None, instance=None):
    """Definitions and instance: given, or (in a worker process) built once and cached."""
    import dagster as dg

    from atlas_pipeline.definitions import build_definitions

    if defs is None:
        if not _WORKER:
            _WORKER["defs"] = build_definitions(load_settings())
            _WORKER["instance"] = dg.DagsterInstance.get()
        defs, instance = _WORKER["defs"], _WORKER["instance"]
    return defs, instance


def _run_batch(keys: list[str], defs=None, instance=None) -> list[tuple[str, bool, float]]:
    """Materialise the documents of ``keys`` (consecutive partitions) in one Dagster run — one run per document
    when there is one key. A batch whose run fails is run again one document per run, so a document that raises
    fails alone, with its own reason."""
    from dagster._core.storage.tags import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    defs, instance = _worker_context(defs, instance)
    tags = {"atlas/launched_by": "atlas run"}
    began = time.perf_counter()
    if len(keys) == 1:
        result = defs.resolve_job_def("document_job").execute_in_process(
            partition_key=keys[0], instance=instance, raise_on_error=False, run_config=QUIET_RUN_CONFIG, tags=tags
        )
        return [(keys[0], result.success, time.perf_counter() - began)]
    tags |= {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]}
    job = defs.resolve_job_def("document_batch_job")  # a partition range: the checks are logged per document
    result = job.execute_in_process(instance=instance, raise_on_error=False, run_config=QUIET_RUN_CONFIG, tags=tags)
    if not result.success:
        return [outcome for key in keys for outcome in _run_batch([key], defs, instance)]
    each = (time.perf_counter() - began) / len(keys)
    return [(key, True, each) for key in keys]


def batches(keys: list[str], ordered: list[str], size: int) -> list[list[str]]:
    """``keys`` cut into runs of at most ``size`` partitions that are consecutive in the partition order
    (``ordered``): a batched run targets a partition range, which must not take in documents not asked for."""
    wanted, groups, current = set(keys), [], []
    for key in ordered:
        if key in wanted:
            current.append(key)
            if len(current) == size:
                groups.append(current)
                current = []
        elif current:
            groups.append(current)
            current = []
    if current:
        groups.append(current)
    registered = set(ordered)
    return groups + [[key] for key in keys if key not in registered]


def run_documents(keys: list[str], workers: int, defs, instance, batch: int = 1):
    """Yield (key, success, seconds) per document as runs finish; ``batch`` > 1 materialises up to that many
    documents per Dagster run, ``workers`` > 1 runs batches in parallel processes."""
    from atlas_pipeline.defs.partitions import documents_partitions

    ordered = list(instance.get_dynamic_partitions(documents_partitions.name))
    groups = batches(keys, ordered, max(1, batch))
    if workers <= 1 or len(groups) <= 1:
        for group in groups:
            yield from _run_batch(group, defs, instance)
        return
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_run_batch, group) for group in groups]
        for future in as_completed(futures):
            yield from future.result()


def command_run(args: argparse.Namespace) -> int:
    """Scan the knowledge base, materialise every document, then task completion and the exports."""
    import dagster as dg

    from atlas_pipeline.catalog import refresh_catalog
    from atlas_pipeline.definitions import build_definitions
    from atlas_pipeline.defs.partitions import documents_partitions
    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.instance import prepare_dagster_home
    from atlas_pipeline.records import ExtractionRecord, read_record
    from atlas_pipeline.status import TERMINAL

    settings = load_settings()
    home = prepare_dagster_home(settings.instance_config)
    atlas = AtlasResource.from_settings(settings)
    defs = build_definitions(settings)
    store = atlas.store()
    template = atlas.load_template()  # a broken rule or template stops here, before any document runs
    print(f"knowledge base: {settings.knowledge_base}")
    print(f"rule:           {atlas.rule} ({atlas.load_rule().postprocess_mode} mode, template {template.code})")
    print(f"dagster home:   {home}")
    scan = refresh_catalog(atlas.open_knowledge_base(), store)
    print(f"scan: {scan.summary()}")
    with dg.DagsterInstance.get() as instance:
        existing = set(instance.get_dynamic_partitions(documents_partitions.name))
        new_keys = [key for key in scan.catalog.entries if key not in existing]
        if new_keys:
            instance.add_dynamic_partitions(documents_partitions.name, new_keys)
        entries = scan.catalog.active()
        if args.only:
            entries = [entry for entry in entries if entry.key in set(args.only)]
        started = time.perf_counter()
        keys = [entry.key for entry in entries]
        for number, (key, success, seconds) in enumerate(
            run_documents(keys, args.workers, defs, instance, args.batch), 1
        ):
            record = read_record(store, key, "extraction", ExtractionRecord)
            if success and record is not None:
                outcome = record.status.value + ("" if record.status == "done" else f": {record.reason}")
            else:
                outcome = "failed: run error (see `atlas status` and the Dagster UI)"
            print(f"[{number}/{len(keys)}] {key}: {outcome} ({seconds:.1f} s)", flush=True)
        defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance, run_config=QUIET_RUN_CONFIG)
        states = _states(instance, atlas)
        print(f"\nprocessed {len(entries)} document(s) in {time.perf_counter() - started:.1f} s")
        _print_summary(states)
        print("exports:")
        from atlas_pipeline.exports import EXPORT_STEM, FIELDS_STEM, FORMATS

        exports = atlas.exports_store()
        for fmt in FORMATS:
            print(f"  {fmt:<8} {exports.url(f'{EXPORT_STEM}.{fmt}')}")
        for fmt in FORMATS[1:]:
            print(f"  {fmt:<8} {exports.url(f'{FIELDS_STEM}.{fmt}')} (one row per extracted field)")
        open_states = [s for s in states if s.status not in TERMINAL]
    return 1 if open_states else 0


def command_status(args: argparse.Namespace) -> int:
    """Task completion computed live from the instance (pending and running documents included)."""
    import dagster as dg

    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.instance import prepare_dagster_home

    settings = load_settings()
    prepare_dagster_home(settings.instance_config)
    with dg.DagsterInstance.get() as instance:
        states = _states(instance, AtlasResource.from_settings(settings))
    _print_summary(states)
    if args.documents:
        for state in states:
            print(f"{state.key:<50} {state.status.value:<11} {state.reason}")
    return 0


def command_dev(args: argparse.Namespace) -> int:
    """Open the Dagster UI and daemon (sensors live) on 127.0.0.1."""
    from atlas_pipeline.instance import prepare_dagster_home, project_file

    settings = load_settings()  # fail early with a clear message
    prepare_dagster_home(settings.instance_config)
    command = [
        "dagster",
        "dev",
        "-w",
        str(project_file("workspace.yaml")),
        "-h",
        args.host,
        "-p",
        str(args.port),
    ]
    print("starting:", " ".join(command), flush=True)
    os.execvp(command[0], command)
    return 0  # not reached


def command_settings(args: argparse.Namespace) -> int:
    """Every ATLAS_* variable with its current value."""
    current = load_settings()
    for variable, _default, description in describe_settings():
        value = getattr(current, variable.removeprefix("ATLAS_").lower())
        if hasattr(value, "get_secret_value"):
            value = "(set)" if value.get_secret_value() else "(empty)"
        print(f"{variable:<34} {value!s:<40} {description}")
    return 0


def command_migrate(args: argparse.Namespace) -> int:
    """Copy a deployment (default: the embedded var/ one) into the one configured now (e.g. PostgreSQL + S3)."""
    from pathlib import Path

    import dagster as dg

    from atlas_pipeline.defs.partitions import documents_partitions
    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.instance import prepare_dagster_home
    from atlas_pipeline.migration import (
        MigrationError,
        changed_documents,
        copy_instance,
        copy_store,
        verify_instance,
    )
    from atlas_pipeline.settings import resolve_location
    from atlas_pipeline.storage import Store

    target_settings = load_settings()
    source_settings = target_settings.model_copy(
        update={"artifacts": resolve_location(args.from_artifacts), "exports": resolve_location(args.from_exports)}
    )
    source_home = Path(args.from_home).expanduser().resolve()
    if not (source_home / "dagster.yaml").is_file():
        print(f"atlas migrate: {source_home} holds no dagster.yaml (not a Dagster home)", file=sys.stderr)
        return 2
    target_home = prepare_dagster_home(target_settings.instance_config)
    if target_home == source_home:
        print("atlas migrate: DAGSTER_HOME is the source home; point it at the new deployment's home", file=sys.stderr)
        return 2
    pairs = [
        (source_settings.artifacts, target_settings.artifacts),
        (source_settings.exports, target_settings.exports),
    ]
    if any(old == new for old, new in pairs):
        print("atlas migrate: ATLAS_ARTIFACTS/ATLAS_EXPORTS must differ from the source stores", file=sys.stderr)
        return 2
    print(f"from: {source_home} + {source_settings.artifacts} + {source_settings.exports}")
    print(f"to:   {target_home} + {target_settings.artifacts} + {target_settings.exports}")
    progress = None if args.quiet else (lambda line: print(f"  {line}", flush=True))
    try:
        with (
            dg.DagsterInstance.from_config(str(source_home)) as source,
            dg.DagsterInstance.get() as target,
        ):
            for old, new in pairs:
                copied = copy_store(Store(old), Store(new), progress)
                print(
                    f"store {new}: {copied.objects} objects verified by sha256 "
                    f"({copied.copied} copied, {copied.bytes_copied:,} bytes; {copied.already_present} already there)"
                )
            history = copy_instance(source, target, [documents_partitions.name], progress)
            print(
                f"instance: {history.runs_copied} of {history.runs} runs copied with {history.events_copied} events, "
                f"{sum(history.partitions_added.values())} partitions registered, "
                f"{history.instigator_states} sensor/schedule states, {history.backfills} backfills"
            )
            comparisons = verify_instance(source, target)
            before = _states(source, AtlasResource.from_settings(source_settings))
            after = _states(target, AtlasResource.from_settings(target_settings))
    except MigrationError as error:
        print(f"atlas migrate: {error}", file=sys.stderr)
        return 1
    print("materialisations (source → target):")
    for item in comparisons:
        print(
            f"  {item.asset_key:<24} {item.source_materialized:>6} → {item.target_materialized:<6} "
            f"{'same' if item.same else 'DIFFERENT'}"
        )
    changed = changed_documents(before, after)
    print(f"documents: {len(before)} before, {len(after)} after, {len(changed)} with another status/reason")
    for key, old, new in changed[:20]:
        print(f"  - {key}: {old} → {new}")
    if changed or not all(item.same for item in comparisons):
        print("atlas migrate: the new deployment differs from the old one (see above)", file=sys.stderr)
        return 1
    print("migrated without loss; start the new deployment (atlas dev / atlas run) with these settings")
    return 0


def command_check_instance(args: argparse.Namespace) -> int:
    """Validate Dagster instance config files (e.g. deploy/k8s/dagster.yaml) without connecting to anything."""
    from pathlib import Path

    from atlas_pipeline.instance import validate_instance_config

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atlas", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help=command_run.__doc__)
    run.add_argument("--only", nargs="+", metavar="KEY", help="process only these partition keys")
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
        default=1,
        metavar="N",
        help="documents per Dagster run (default 1; e.g. 50 for bulk loads: Dagster's per-run cost is paid once)",
    )
    run.set_defaults(handler=command_run)
    status = commands.add_parser("status", help=command_status.__doc__)
    status.add_argument("--documents", action="store_true", help="also list every document")
    status.set_defaults(handler=command_status)
    dev = commands.add_parser("dev", help=command_dev.__doc__)
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=3000)
    dev.set_defaults(handler=command_dev)
    migrate = commands.add_parser("migrate", help=command_migrate.__doc__)
    migrate.add_argument("--from-home", default="var/dagster_home", help="old DAGSTER_HOME (default %(default)s)")
    migrate.add_argument("--from-artifacts", default="var/artifacts", help="old ATLAS_ARTIFACTS (default %(default)s)")
    migrate.add_argument("--from-exports", default="var/exports", help="old ATLAS_EXPORTS (default %(default)s)")
    migrate.add_argument("--quiet", action="store_true", help="no progress lines")
    migrate.set_defaults(handler=command_migrate)
    check = commands.add_parser("check-instance", help=command_check_instance.__doc__)
    check.add_argument("files", nargs="+", metavar="DAGSTER_YAML")
    check.set_defaults(handler=command_check_instance)
    settings = commands.add_parser("settings", help=command_settings.__doc__)
    settings.set_defaults(handler=command_settings)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.handler(args)
    except (SettingsError, TemplateError, FileNotFoundError) as error:
        print(f"atlas: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
