"""``atlas`` command line: run the whole pipeline, print task completion, open the UI, show settings, migrate."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

from atlas_pipeline.config.redaction import install_log_redaction, redact
from atlas_pipeline.config.settings import SettingsError, SettingsWarning, describe_settings, load_settings
from atlas_pipeline.extraction.prices import PriceError
from atlas_pipeline.extraction.templates import TemplateError
from atlas_pipeline.sources.config import SourcesError


def _states(instance, atlas):
    return atlas.document_states(instance)


def _print_summary(states) -> None:
    from atlas_pipeline.outputs.completion import summarise

    for line in summarise(states).lines():
        print(line)
    problems = [s for s in states if s.status.value in ("failed", "skipped", "cancelled", "pending", "extracting")]
    for state in problems:
        print(f"  - {state.key}: {state.status.value}: {state.reason}")
    for state in (s for s in states if s.source_removed):
        print(f"  - {state.key}: source removed from the knowledge base ({state.source_path}); its results are kept")


def command_run(args: argparse.Namespace) -> int:
    """Scan the knowledge base, materialise every new or changed document, then task completion and the exports."""
    import dagster as dg

    from atlas_pipeline.core.statuses import TERMINAL
    from atlas_pipeline.definitions import build_definitions
    from atlas_pipeline.defs.asset_names import AGGREGATE_ASSET_NAMES, EVALUATION_ASSET_NAME
    from atlas_pipeline.defs.cancellation import cancelled_documents
    from atlas_pipeline.defs.document_states import aggregates_up_to_date, already_extracted
    from atlas_pipeline.defs.partitions import documents_partitions
    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.knowledge.catalog import now_iso, refresh_catalog
    from atlas_pipeline.knowledge.duplicate_records import load_splits
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.runs import QUIET_RUN_CONFIG, RunStopped, reap_dead_runs, run_documents, stop_on_signals
    from atlas_pipeline.outputs.exports import FORMATS, export_files
    from atlas_pipeline.review.outcome import reviews_behind
    from atlas_pipeline.review.workbook_import import import_inbox
    from atlas_pipeline.store.files import Store
    from atlas_pipeline.store.layout import APPROVED_STEM, COMPLETION_PATH, EXPORT_STEM, FIELDS_STEM, export_path
    from atlas_pipeline.store.records import ExtractionRecord, read_record

    settings = load_settings()
    home = prepare_dagster_home(settings.instance_config)
    atlas = AtlasResource.from_settings(settings)
    defs = build_definitions(settings)
    store = atlas.store()
    template, rule = atlas.load_template(), atlas.load_rule()  # a broken rule or template stops here
    print(f"knowledge base: {settings.knowledge_base}")
    print(f"rule:           {atlas.rule} ({atlas.mode(rule)} mode, template {template.code})")
    print(f"parser:         {atlas.parser_choice().summary()}")
    print(f"dagster home:   {home}")
    batch = args.batch or (settings.llm_concurrency if atlas.mode(rule) == "llm" else 1)
    if atlas.mode(rule) == "llm":
        print(
            f"llm:            {settings.llm_model}, {settings.llm_concurrency} request(s) in flight at most, "
            f"{batch} document(s) a run"
        )
    scan = refresh_catalog(atlas.open_knowledge_base(), store)
    print(f"scan: {scan.summary()}")
    with dg.DagsterInstance.get() as instance:
        for run_id in reap_dead_runs(instance):
            print(f"run {run_id[:8]} had lost its process: marked failed, its document runs again")
        batch_mode = settings.llm_batch and atlas.mode(rule) == "llm" and not args.estimate
        if batch_mode:  # answers that arrived: their documents are `waiting`, so they run below and are graded
            _batch_tick(settings, store, "start")
        existing = set(instance.get_dynamic_partitions(documents_partitions.name))
        new_keys = [key for key in scan.catalog.entries if key not in existing]
        if new_keys:
            instance.add_dynamic_partitions(documents_partitions.name, new_keys)
        entries = scan.catalog.active()
        if args.only:
            unknown = sorted(set(args.only) - {entry.key for entry in entries})
            if unknown:
                known = ", ".join(sorted(entry.key for entry in entries)[:10]) or "none"
                print(
                    f"atlas: no document {', '.join(unknown)} in {settings.knowledge_base} (known: {known})",
                    file=sys.stderr,
                )
                return 2
            entries = [entry for entry in entries if entry.key in set(args.only)]
        unchanged = set() if args.force else already_extracted(instance, entries, atlas.extraction_version().tag)
        if args.only:  # a cancelled document named here runs again, even one extracted before its cancelled run
            unchanged -= set(cancelled_documents(instance, store, list(unchanged)))
        keys = [entry.key for entry in entries if entry.key not in unchanged]
        if not args.only and not args.force:  # a person cancelled these: they run when named
            cancelled = cancelled_documents(instance, store, keys)
            keys = [key for key in keys if key not in cancelled]
            if cancelled:
                print(f"{len(cancelled)} cancelled document(s) left alone (`atlas run --only KEY` runs one again)")
        if unchanged:
            print(
                f"{len(unchanged)} unchanged document(s) already extracted with this version: not run again "
                "(--force redoes them)"
            )
        if args.estimate:
            return _print_estimate(settings, atlas, store, [entry for entry in entries if entry.key in set(keys)])
        started, stopped, run_began = time.perf_counter(), False, now_iso()
        with stop_on_signals() as received:
            try:
                for number, (key, success, seconds) in enumerate(
                    run_documents(keys, args.workers, defs, instance, batch), 1
                ):
                    record = read_record(store, key, "extraction", ExtractionRecord)
                    if success and record is not None:
                        outcome = record.status.value + ("" if record.status == "done" else f": {record.reason}")
                    else:
                        (state,) = atlas.document_states(instance, only=[key])
                        outcome = f"{state.status.value}: {state.reason}"
                    print(f"[{number}/{len(keys)}] {key}: {outcome} ({seconds:.1f} s)", flush=True)
            except (KeyboardInterrupt, RunStopped):
                stopped = True
        if stopped:
            states = _states(instance, atlas)
            left = [s for s in states if s.status not in TERMINAL]
            print(
                f"\nstopped: {len(left)} document(s) not done stay pending (none is left extracting); "
                "run `atlas run` again to continue",
                flush=True,
            )
            return 128 + received.get("signal", signal.SIGINT)
        if batch_mode:  # the requests this run queued go out now, as one batch
            _batch_tick(settings, store, "end")
            waiting = [
                key
                for key in keys
                if (r := read_record(store, key, "extraction", ExtractionRecord)) and r.status == "waiting"
            ]
            if waiting:
                print(
                    f"{len(waiting)} document(s) waiting at the endpoint's Batch API: run `atlas run` again later, or "
                    "keep `atlas dev` running (the llm_batch_sensor looks every ATLAS_LLM_BATCH_POLL_SECONDS)"
                )
        if settings.review_inbox:  # reviewed workbooks, as the review sensor would import them
            for report in import_inbox(Store(settings.review_inbox), store, template, settings.reviewer):
                print(f"review inbox: {report.summary()}")
        behind = reviews_behind(store, [entry.key for entry in entries if entry.key not in keys])
        for key in behind:  # decisions made on the review page or imported while no daemon ran
            defs.resolve_job_def("review_job").execute_in_process(
                partition_key=key, instance=instance, run_config=QUIET_RUN_CONFIG
            )
        if behind:
            print(f"review decisions merged for {len(behind)} document(s): {', '.join(behind[:5])}")
        exports = atlas.exports_store()
        exported = all(exports.exists(name) for name in export_files()) and store.exists(COMPLETION_PATH)
        aggregates = AGGREGATE_ASSET_NAMES + ((EVALUATION_ASSET_NAME,) if settings.gold else ())
        splits_changed = load_splits(store).changed_at
        stale = not exported or not aggregates_up_to_date(instance, scan.catalog, aggregates, splits_changed)
        if keys or behind or scan.changed or stale:
            defs.resolve_job_def("aggregates_job").execute_in_process(instance=instance, run_config=QUIET_RUN_CONFIG)
            late = reviews_behind(store, [entry.key for entry in entries])
            if late:  # decided while this run worked: merged now, and the exports written again with them
                for key in late:
                    defs.resolve_job_def("review_job").execute_in_process(
                        partition_key=key, instance=instance, run_config=QUIET_RUN_CONFIG
                    )
                print(f"{len(late)} document(s) decided on while this run worked: merged, exports written again")
                defs.resolve_job_def("aggregates_job").execute_in_process(
                    instance=instance, run_config=QUIET_RUN_CONFIG
                )
        else:
            print("task completion and exports are up to date: not refreshed")
        states = _states(instance, atlas)
        print(f"\nprocessed {len(keys)} document(s) in {time.perf_counter() - started:.1f} s")
        records = [read_record(store, key, "extraction", ExtractionRecord) for key in keys]
        ran = [record for record in records if record is not None and record.extracted_at >= run_began]
        if any(record.llm_calls or record.llm_cache_hits for record in ran):
            print(_run_cost(ran))
        _print_summary(states)
        print("exports:")
        for fmt in FORMATS:
            print(f"  {fmt:<8} {exports.url(export_path(EXPORT_STEM, fmt))}")
        for fmt in FORMATS[1:]:
            print(f"  {fmt:<8} {exports.url(export_path(FIELDS_STEM, fmt))} (one row per extracted field)")
        print(
            f"  approved values (one typed row per approved document): {exports.url(export_path(APPROVED_STEM, 'csv'))}"
        )
        print(f"  review them: `atlas review` (http://127.0.0.1:{settings.review_port})")
        print("  search them: `atlas search WORDS`")
        _print_sources(settings)
        open_states = [s for s in states if s.status not in TERMINAL]
    return 1 if open_states else 0


def _run_cost(records) -> str:
    """What this run's LLM requests cost (answers from the cache are free)."""
    from atlas_pipeline.extraction.prices import money

    calls = sum(r.llm_calls for r in records)
    priced = [r for r in records if r.llm_calls and r.cost_paid is not None]
    unpriced = sum(1 for r in records if r.llm_calls and r.cost_paid is None)
    currency = next((r.cost_currency for r in priced if r.cost_currency), "USD")
    line = (
        f"LLM this run: {calls} request(s), {sum(r.llm_cache_hits for r in records)} answered by the cache, "
        f"paid {money(sum(r.cost_paid for r in priced), currency)}"
    )
    return line + (f" ({unpriced} document(s) by a model with no price: not counted)" if unpriced else "")


def _print_estimate(settings, atlas, store, entries) -> int:
    """``atlas run --estimate``: what the run would send and cost; nothing is parsed or sent."""
    from atlas_pipeline.defs.resources import LLMResource
    from atlas_pipeline.processing import estimate_extractions

    rule = atlas.load_rule()
    if atlas.mode(rule) != "llm":
        print(f"estimate: {len(entries)} document(s) would run in skip mode: no LLM request, nothing to pay")
        return 0
    resource = LLMResource.from_settings(settings)
    llm = resource.client(cache=store)
    print(f"estimate (nothing sent): {len(entries)} document(s) to extract; prices: {resource.prices}")
    estimate = estimate_extractions(atlas.open_knowledge_base(), store, entries, atlas.load_template(), rule, llm)
    for line in estimate.lines(settings.llm_concurrency):
        print(line)
    if estimate.cost is None:
        print(f"no price for {llm.config.model} in {resource.prices}: add it there (or set ATLAS_LLM_PRICES)")
    return 0


def command_status(args: argparse.Namespace) -> int:
    """Task completion computed live from the instance (pending and running documents included)."""
    import dagster as dg

    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.runs import reap_dead_runs

    settings = load_settings()
    prepare_dagster_home(settings.instance_config)
    with dg.DagsterInstance.get() as instance:
        reap_dead_runs(instance)
        states = _states(instance, AtlasResource.from_settings(settings))
    _print_summary(states)
    _print_sources(settings)
    if settings.llm_batch:
        _print_batches(AtlasResource.from_settings(settings).store())
    if args.documents:
        for state in states:
            removed = " [source removed]" if state.source_removed else ""
            print(f"{state.key:<50} {state.status.value:<11} {state.reason}{removed}")
    return 0


def _print_batches(store) -> None:
    """Batch API mode: what waits to be sent and what waits at the endpoint (as last seen; nothing is asked)."""
    from atlas_pipeline.extraction.batches import BatchQueue

    queue = BatchQueue(store)
    batches = queue.open_batches()
    print(f"Batch API: {len(queue.queued())} request(s) queued for the next batch, {len(batches)} batch(es) open")
    for batch in batches:
        print(
            f"  {batch['id']}: {batch['status']}, {len(batch['keys'])} request(s) for {len(batch['documents'])} "
            f"document(s), submitted {batch['submitted_at']}"
        )


def _batch_tick(settings, store, when: str) -> None:
    """Batch API mode: take in what arrived and submit what is queued (``atlas run`` at its start and end); the
    documents that read their answers since are no longer ready."""
    from atlas_pipeline.defs.resources import LLMResource
    from atlas_pipeline.store.records import ExtractionRecord, read_record

    llm = LLMResource.from_settings(settings)
    print(f"Batch API ({when}): {llm.client(cache=store).batch_tick().summary()}")
    queue = llm.batch_queue(store)
    for key in queue.ready():
        record = read_record(store, key, "extraction", ExtractionRecord)
        if record is not None and record.status != "waiting":
            queue.read(key)


def _print_sources(settings) -> None:
    """One line per declared source: its health, what it collected, what waits."""
    from atlas_pipeline.defs.source_sensors import declared_sources
    from atlas_pipeline.sources.state import load_state
    from atlas_pipeline.store.files import Store

    store = Store(settings.artifacts)
    try:
        sources = declared_sources(settings)
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
    from atlas_pipeline.defs.source_sensors import declared_sources, politeness
    from atlas_pipeline.sources.collector import Collector
    from atlas_pipeline.sources.state import resume
    from atlas_pipeline.store.files import Store

    settings = load_settings()
    sources = {source.name: source for source in declared_sources(settings)}
    if not sources:
        print("no sources declared: set ATLAS_SOURCES to a TOML file (see seeds/sources.example.toml)")
        return 0 if args.action == "list" else 2
    names = args.names or list(sources)
    unknown = [name for name in names if name not in sources]
    if unknown:
        print(f"atlas: unknown source(s) {', '.join(unknown)}; declared: {', '.join(sources)}", file=sys.stderr)
        return 2
    store = Store(settings.artifacts)
    if args.action == "resume":
        for name in names:
            resume(store, name)
            print(f"{name}: resumed")
    elif args.action == "collect":
        for name in names:
            collector = Collector(sources[name], store, Store(settings.knowledge_base), politeness(settings))
            print(collector.run().summary(), flush=True)
    _print_sources(settings)
    return 0


def command_search(args: argparse.Namespace) -> int:
    """Search every document's text, tables and extracted values (ranked, with snippets)."""
    import dagster as dg

    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.search.backends import open_index
    from atlas_pipeline.search.entries import QueryTooLongError

    settings = load_settings()
    prepare_dagster_home(settings.instance_config)
    with (
        dg.DagsterInstance.get() as instance,
        open_index(settings.search_backend, settings.search_sqlite, instance) as index,
    ):
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


def command_duplicates(args: argparse.Namespace) -> int:
    """List the documents recognised as one work, or split a wrong grouping (join undoes a split)."""
    import dagster as dg

    from atlas_pipeline.definitions import build_definitions
    from atlas_pipeline.knowledge.duplicate_records import join, load_groups, load_splits, split
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.runs import QUIET_RUN_CONFIG
    from atlas_pipeline.store.files import Store

    settings = load_settings()
    store = Store(settings.artifacts)
    if args.action in ("split", "join"):
        if not args.key:
            print(f"atlas: `atlas duplicates {args.action}` needs a document KEY", file=sys.stderr)
            return 2
        groups = load_groups(store)
        grouped = {key for group in groups.groups for key in group["members"]}
        if args.action == "split":
            if args.key not in grouped:
                print(f"atlas: {args.key} is in no duplicate group (see `atlas duplicates`)", file=sys.stderr)
                return 2
            split(store, args.key, by=args.reviewer or settings.reviewer or os.environ.get("USER", "unknown"))
        elif not join(store, args.key):
            print(f"atlas: {args.key} was not split", file=sys.stderr)
            return 2
        prepare_dagster_home(settings.instance_config)
        with dg.DagsterInstance.get() as instance:  # the groups, task completion and exports follow now
            build_definitions(settings).resolve_job_def("aggregates_job").execute_in_process(
                instance=instance, run_config=QUIET_RUN_CONFIG
            )
    groups = load_groups(store)
    if not groups.groups:
        print(f"no duplicates among {groups.documents} document(s)")
    for group in groups.groups:
        print(f"{group['canonical']} (canonical)")
        for key, why in group["evidence"].items():
            print(f"  = {key}: {why}")
    for key, made in load_splits(store).splits.items():
        print(f"split by {made.by}: {key} (never grouped; `atlas duplicates join {key}` undoes it)")
    return 0


def command_cancel(args: argparse.Namespace) -> int:
    """Cancel documents waiting in the run queue (a document being processed is refused); they end `cancelled`."""
    import dagster as dg

    from atlas_pipeline.defs.cancellation import CancelRefused, cancel_documents
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.store.files import Store

    settings = load_settings()
    prepare_dagster_home(settings.instance_config)
    by = args.by or settings.reviewer or os.environ.get("USER", "unknown")
    with dg.DagsterInstance.get() as instance:
        try:
            cancelled = cancel_documents(instance, Store(settings.artifacts), args.keys, by)
        except CancelRefused as refusal:
            for item in refusal.cancelled:
                print(f"{item.key}: cancelled (run {item.run_id[:8]}, queued since {item.queued_since}) by {by}")
            what = "the others were not cancelled" if refusal.cancelled else "nothing cancelled"
            print(f"atlas: {what}:\n{refusal}", file=sys.stderr)
            return 1
    for item in cancelled:
        print(f"{item.key}: cancelled (run {item.run_id[:8]}, queued since {item.queued_since}) by {by}")
    print("their status is `cancelled` until they run again: `atlas run --only KEY`, or materialise in the UI")
    return 0


def command_dev(args: argparse.Namespace) -> int:
    """Open the Dagster UI and daemon (sensors live) on 127.0.0.1."""
    from atlas_pipeline.knowledge.listing import KnowledgeBase
    from atlas_pipeline.ops.instance import prepare_dagster_home, project_file

    settings = load_settings()  # fail early with a clear message
    KnowledgeBase(settings.knowledge_base).check()  # … and not as a sensor traceback every 30 s
    home = prepare_dagster_home(settings.instance_config)
    command = [
        sys.executable,
        "-m",
        "atlas_pipeline.ops.dagster_ui",
        "--workspace",
        str(project_file("workspace.yaml")),
    ]
    command += ["--host", args.host, "--port", str(args.port), "--trusted-hosts", settings.trusted_hosts]
    environment = dev_environment(settings)
    import dagster as dg

    with dg.DagsterInstance.get():  # storage created once, before Dagster and the review page open it side by side
        pass
    review = [sys.executable, "-m", "atlas_pipeline.cli", "review", "--port", str(settings.review_port)]
    print(
        f"Dagster UI on http://{args.host}:{args.port} with the daemon (instance {home}), the review page on "
        f"http://127.0.0.1:{settings.review_port}; Ctrl-C stops them all",
        flush=True,
    )
    # Dagster in a process group of its own (same session), so that `atlas dev` decides how it stops: Ctrl-C is
    # passed on, and a Dagster that does not stop in time is stopped harder; it runs in DAGSTER_HOME (it warns about
    # any dagster.yaml in its folder that is not DAGSTER_HOME's). The review page stays in our group.
    # Ctrl-C and `kill` stop it, also when started from a shell that ignores SIGINT (a background job, nohup): our
    # own handlers, installed before the children start, so that they begin with the default ones, not "ignore"
    signal.signal(signal.SIGINT, _interrupt)
    signal.signal(signal.SIGTERM, _interrupt)
    page = subprocess.Popen(review, env=environment)
    dagster = subprocess.Popen(command, env=environment, cwd=home, process_group=0)
    try:
        return dagster.wait()
    except KeyboardInterrupt:
        return _stop_dagster(dagster, page)
    finally:
        if page.poll() is None:
            page.terminate()


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _stop_dagster(dagster: subprocess.Popen, page: subprocess.Popen, grace: float = 20.0) -> int:
    """After Ctrl-C: pass it on to Dagster's process group and give it ``grace`` seconds to shut its services and runs
    down, then SIGTERM, then SIGKILL — a loaded machine never leaves `atlas dev` hanging, nor processes behind."""
    _signal_group(dagster.pid, signal.SIGINT)
    for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C does not cut the shutdown short
        signal.signal(signum, signal.SIG_IGN)
    for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0), (None, 10.0)):
        try:
            dagster.wait(timeout=wait)
            break
        except subprocess.TimeoutExpired:
            if signum is not None:
                _signal_group(dagster.pid, signum)
    deadline = time.monotonic() + 10  # a run worker may take a few seconds to see its run stopped
    while time.monotonic() < deadline and _group_alive(dagster.pid):
        time.sleep(0.5)
    _signal_group(dagster.pid, signal.SIGKILL)
    page.terminate()  # it had the same Ctrl-C only when it came from the terminal
    try:
        page.wait(timeout=5)
    except subprocess.TimeoutExpired:
        page.kill()
    return 130


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def dev_environment(settings) -> dict[str, str]:
    """The environment of the Dagster UI, daemon and review page: the resolved locations (they run in DAGSTER_HOME,
    where relative paths would mean something else)."""
    env = dict(os.environ)
    for name in ("knowledge_base", "artifacts", "exports", "seeds_dir", "instance_config", "executor_config"):
        if getattr(settings, name):
            env[f"ATLAS_{name.upper()}"] = getattr(settings, name)
    return env


def command_review(args: argparse.Namespace) -> int:
    """Serve the review page on 127.0.0.1: each value beside its evidence, to approve, correct or reject."""
    import uvicorn

    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.review.app import create_app

    settings = load_settings()
    home = prepare_dagster_home(settings.instance_config)
    port = args.port or settings.review_port
    print(f"review page on http://{args.host}:{port} (instance {home}); Ctrl-C stops it", flush=True)
    uvicorn.run(create_app(settings), host=args.host, port=port, log_level="warning")
    return 0


def command_evaluate(args: argparse.Namespace) -> int:
    """Measure the extractions against a gold file: accuracy, recall and precision of `verified` per field."""
    from atlas_pipeline.config.settings import resolve_location
    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.outputs.evaluation import GoldError, evaluate_gold
    from atlas_pipeline.store.layout import EVALUATION_STEM, export_path

    settings = load_settings()
    atlas = AtlasResource.from_settings(settings)
    tolerance = settings.gold_tolerance if args.tolerance is None else args.tolerance
    if not 0 <= tolerance <= 1:
        print(f"atlas: --tolerance {tolerance} must be between 0 and 1 (a share: 0.005 is 0.5%)", file=sys.stderr)
        return 2
    try:
        report = evaluate_gold(atlas, resolve_location(args.gold), tolerance)
    except GoldError as error:
        print(f"atlas: {error}", file=sys.stderr)
        return 2
    text = report.markdown()
    print(text)
    print(f"report: {atlas.exports_store().write_text(export_path(EVALUATION_STEM, 'md'), text)}")
    return 0


def command_settings(args: argparse.Namespace) -> int:
    """Every ATLAS_* variable with its current value."""
    current = load_settings()
    for variable, _default, description in describe_settings():
        value = getattr(current, variable.removeprefix("ATLAS_").lower())
        if hasattr(value, "get_secret_value"):
            value = "(set)" if value.get_secret_value() else "(empty)"
        print(f"{variable:<34} {value!s:<40} {description}")
    return 0


def _rebuild_search(source, target, target_settings, states) -> None:
    """The search index is derived: it is rebuilt in the new deployment's backend (SQLite → PostgreSQL, say) from
    the migrated records, and its count printed beside the old index's (read only if it exists: an old deployment
    without one, or with a stale one, is not a failed migration)."""
    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.search.backends import SQLITE_NAME, open_index
    from atlas_pipeline.search.refresh import refresh_index
    from atlas_pipeline.store.files import Store

    with AtlasResource.from_settings(target_settings).search_index(target) as index:
        report = refresh_index(index, Store(target_settings.artifacts), states)
    old = "none"
    old_sqlite = Path(source.storage_directory()) / SQLITE_NAME
    if old_sqlite.exists() or getattr(source.run_storage, "postgres_url", ""):
        try:
            with open_index("auto", str(old_sqlite), source) as previous:
                old = f"{previous.count()} in {previous.backend}"
        except Exception as error:  # the old index is only compared with, never needed
            old = f"unreadable ({type(error).__name__})"
    print(
        f"search index: {report.indexed} document(s) indexed in {index.backend} ({index.location}); the old "
        f"deployment's index: {old}"
    )


def command_migrate(args: argparse.Namespace) -> int:
    """Copy a deployment (default: the embedded var/ one) into the one configured now (e.g. PostgreSQL + S3)."""
    from pathlib import Path

    import dagster as dg

    from atlas_pipeline.config.settings import resolve_location
    from atlas_pipeline.defs.partitions import documents_partitions
    from atlas_pipeline.defs.resources import AtlasResource
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.migration import (
        MigrationError,
        changed_documents,
        copy_instance,
        copy_store,
        verify_instance,
        verify_runs,
    )
    from atlas_pipeline.store import layout
    from atlas_pipeline.store.files import Store

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
            for (old, new), derived in zip(pairs, (layout.is_derived, lambda relative: True), strict=True):
                copied = copy_store(Store(old), Store(new), progress, derived)
                kept = f"; {copied.kept_derived} recomputed there kept" if copied.kept_derived else ""
                print(
                    f"store {new}: {copied.objects} objects verified by sha256 "
                    f"({copied.copied} copied, {copied.bytes_copied:,} bytes; {copied.already_present} already there"
                    f"{kept})"
                )
            history = copy_instance(source, target, [documents_partitions.name], progress)
            repaired = f" ({history.runs_repaired} half-copied run(s) copied again)" if history.runs_repaired else ""
            print(
                f"instance: {history.runs_copied} of {history.runs} runs copied with {history.events_copied} events"
                f"{repaired}, {sum(history.partitions_added.values())} partitions registered, "
                f"{history.instigator_states} sensor/schedule states, {history.backfills} backfills"
            )
            comparisons = verify_instance(source, target)
            run_differences = verify_runs(source, target)
            before = _states(source, AtlasResource.from_settings(source_settings))
            after = _states(target, AtlasResource.from_settings(target_settings))
            _rebuild_search(source, target, target_settings, after)
    except MigrationError as error:
        print(f"atlas migrate: {error}", file=sys.stderr)
        return 1
    print("materialisations (source → target):")
    for item in comparisons:
        print(
            f"  {item.asset_key:<24} {item.source_materialized:>6} → {item.target_materialized:<6} "
            f"{'same' if item.same else 'DIFFERENT'}"
        )
    print(f"runs: {len(run_differences)} differ in status or events (source → target)")
    for item in run_differences[:20]:
        print(
            f"  - {item.run_id[:8]}: {item.source_status} with {item.source_events} events → "
            f"{item.target_status} with {item.target_events}"
        )
    changed = changed_documents(before, after)
    print(f"documents: {len(before)} before, {len(after)} after, {len(changed)} with another status/reason")
    for key, old, new in changed[:20]:
        print(f"  - {key}: {old} → {new}")
    if changed or run_differences or not all(item.same for item in comparisons):
        print("atlas migrate: the new deployment differs from the old one (see above)", file=sys.stderr)
        return 1
    print("migrated without loss; start the new deployment (atlas dev / atlas run) with these settings")
    return 0


def command_check_instance(args: argparse.Namespace) -> int:
    """Validate Dagster instance config files (e.g. deploy/k8s/dagster.yaml) without connecting to anything."""
    from pathlib import Path

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="atlas", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
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
        help="documents per Dagster run (default: 1, or ATLAS_LLM_CONCURRENCY in LLM mode so that a run's documents "
        "are extracted at once; e.g. 50 for bulk loads: Dagster's per-run cost is paid once)",
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
    dev.add_argument("--host", default="127.0.0.1")
    dev.add_argument("--port", type=int, default=3000)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    install_log_redaction()
    show = warnings.showwarning

    def show_settings_warnings(message, category, filename, lineno, file=None, line=None):
        if issubclass(category, SettingsWarning):
            print(f"atlas: warning: {message}", file=sys.stderr)
        else:
            show(message, category, filename, lineno, file, line)

    warnings.showwarning = show_settings_warnings
    try:
        return args.handler(args)
    except (SettingsError, TemplateError, SourcesError, PriceError, FileNotFoundError, PermissionError) as error:
        print(f"atlas: {redact(str(error))}", file=sys.stderr)
        return 2
    except Exception as error:  # an LLM endpoint that cannot be used (no URL in forced llm mode): its reason
        reason = getattr(error, "reason", None)
        if reason is None or type(error).__name__ != "LLMPermanentError":
            raise
        print(f"atlas: {reason}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
