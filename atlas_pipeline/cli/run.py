"""`atlas run`: scan the knowledge base, extract what is new or changed, refresh the aggregates and exports."""

from __future__ import annotations

import argparse
import signal
import sys
import time

from atlas_pipeline.cli.exit_status import EXIT_NOT_STARTED, exit_status
from atlas_pipeline.cli.invocation import atlas_command
from atlas_pipeline.cli.sources import print_sources
from atlas_pipeline.cli.summary import document_states, print_summary, run_cost


def command_run(args: argparse.Namespace) -> int:
    """Scan the knowledge base, materialise every new or changed document, then task completion and the exports."""
    import dagster as dg

    from atlas_pipeline.core.clock import now_iso
    from atlas_pipeline.core.errors import AtlasError
    from atlas_pipeline.definitions import build_definitions
    from atlas_pipeline.defs.asset_names import AGGREGATE_ASSET_NAMES, EVALUATION_ASSET_NAME
    from atlas_pipeline.defs.partitions import documents_partitions
    from atlas_pipeline.defs.run_history import InstanceFacts, aggregate_facts
    from atlas_pipeline.deployment import Deployment
    from atlas_pipeline.knowledge.catalog import load_catalog, refresh_catalog
    from atlas_pipeline.knowledge.duplicate_records import load_splits
    from atlas_pipeline.knowledge.planning import StepKind, aggregates_stale, plan_runs, plan_steps, reviews_to_merge
    from atlas_pipeline.knowledge.state_owner import claim_state
    from atlas_pipeline.ops.instance import prepare_dagster_home
    from atlas_pipeline.ops.runs import QUIET_RUN_CONFIG, reap_dead_runs
    from atlas_pipeline.outputs.analysis_files import read_excluded
    from atlas_pipeline.outputs.export_files import AGREEMENT, EXCLUDED, export_files
    from atlas_pipeline.review.decisions import decision_marks
    from atlas_pipeline.review.final_values import merged_marks
    from atlas_pipeline.review.study_values import choices_changed_at
    from atlas_pipeline.store.files import Store
    from atlas_pipeline.store.layout import COMPLETION_PATH
    from atlas_pipeline.store.records import ExtractionRecord, read_record

    atlas = Deployment.from_environment()
    home = prepare_dagster_home(atlas.instance_config)
    defs = build_definitions(atlas)
    store = atlas.store()
    template, rule = atlas.load_template(), atlas.load_rule()  # a broken rule or template stops here
    atlas.open_knowledge_base().check()  # a knowledge base that is not there claims nothing
    if args.only:  # a key no document has is refused before anything is scanned or written
        unknown, known = unknown_keys(atlas.open_knowledge_base(), store, args.only)
        if unknown:
            return _no_such_document(unknown, known, atlas.knowledge_base)
    owned = [store, atlas.exports_store(), Store(str(home))]  # never two knowledge bases in one state
    unused = not load_catalog(store).active()  # a state with no document yet may still take another
    claim_state(owned, atlas.knowledge_base, args.knowledge_base_moved or unused)
    print(f"knowledge base: {atlas.knowledge_base}")
    print(f"rule:           {atlas.rule_name} ({atlas.mode(rule)} mode, template {template.code})")
    print(f"parser:         {atlas.parser_choice().summary()}")
    print(f"dagster home:   {home}")
    llm, second = atlas.llm_config(), atlas.second_llm_config()
    batch = atlas.documents_per_run(rule, args.batch)
    if atlas.mode(rule) == "llm":
        print(f"llm:            {llm.model}, {llm.concurrency} request(s) in flight at most, {batch} document(s) a run")
        if second is not None:
            endpoint = second.base_url if second.base_url != llm.base_url else "the same endpoint"
            print(f"second extractor: {second.model} ({endpoint}); differences go to a person")
    scan = refresh_catalog(atlas.open_knowledge_base(), store, progress=_scan_progress)
    print(f"scan: {scan.summary()}")
    with dg.DagsterInstance.get() as instance:
        for run_id in reap_dead_runs(instance):
            print(f"run {run_id[:8]} had lost its process: marked failed, its document runs again")
        batch_mode = atlas.llm_batch and atlas.mode(rule) == "llm" and not args.estimate
        if batch_mode:  # answers that arrived: their documents are `waiting`, so they run below and are graded
            batch_tick(atlas, store, "start")
        existing = set(instance.get_dynamic_partitions(documents_partitions.name))
        facts = InstanceFacts(instance, store, atlas.extraction_version().tag)
        plan = plan_runs(scan.catalog, existing, facts, only=set(args.only or ()) or None, force=args.force)
        entries = scan.catalog.active()
        if args.only:
            gone = sorted(set(args.only) - {entry.key for entry in entries})  # removed since the last scan
            if gone:
                return _no_such_document(gone, {entry.key for entry in entries}, atlas.knowledge_base)
            entries = [entry for entry in entries if entry.key in set(args.only)]
        if not args.estimate:  # reviewed workbooks, as the review sensor takes them in: before any extraction, so
            # their decisions are recorded on the extraction the workbook showed, before this run may make another
            try:
                for report in atlas.import_review_inbox():
                    print(f"review inbox: {report.summary()}")
            except (AtlasError, OSError) as error:  # an inbox that cannot be read stops nothing else
                print(f"review inbox {atlas.review_policy().inbox}: not read: {error}", file=sys.stderr)
        keys, unchanged = plan.keys, plan.unchanged
        if plan.cancelled:  # a person cancelled these: they run when named
            print(f"{len(plan.cancelled)} cancelled document(s) left alone (`atlas run --only KEY` runs one again)")
        if unchanged:
            print(
                f"{len(unchanged)} unchanged document(s) already extracted with this version: not run again "
                "(--force redoes them)"
            )
        if args.estimate:
            if plan.new_partitions:
                instance.add_dynamic_partitions(documents_partitions.name, plan.new_partitions)
            return _print_estimate(atlas, store, [entry for entry in entries if entry.key in set(keys)])

        def reviews_behind(keys: list[str]) -> list[str]:
            marks, candidates = decision_marks(store), set(keys)
            return reviews_to_merge(marks, merged_marks(store, [key for key in marks if key in candidates]), candidates)

        exports = atlas.exports_store()
        exported = all(exports.exists(name) for name in export_files()) and store.exists(COMPLETION_PATH)
        aggregates = AGGREGATE_ASSET_NAMES + ((EVALUATION_ASSET_NAME,) if atlas.gold() else ())
        people_changed = max(load_splits(store).changed_at, choices_changed_at(store))  # groups split, values chosen
        policy = atlas.final_values_policy()
        made = aggregate_facts(instance, aggregates, scan.catalog, people_changed, exported, policy)
        merges = reviews_behind([entry.key for entry in entries if entry.key not in keys])
        steps = plan_steps(plan, merges, catalog_changed=scan.changed, stale=aggregates_stale(made), automated=False)
        started, run_began, seconds_each = time.perf_counter(), now_iso(), []
        for step in steps:
            if step.kind == StepKind.ADD_PARTITIONS:
                instance.add_dynamic_partitions(documents_partitions.name, list(step.keys))
            elif step.kind == StepKind.EXTRACT:
                signum = _extract(list(step.keys), args, defs, instance, batch, store, atlas, seconds_each)
                if signum is not None:
                    return 128 + signum
                if batch_mode:  # the requests this run queued go out now, as one batch
                    _send_batch(atlas, store, keys)
            elif step.kind == StepKind.MERGE_REVIEWS:  # decisions made on the review page or imported
                for key in step.keys:
                    defs.resolve_job_def("review_job").execute_in_process(
                        partition_key=key, instance=instance, run_config=QUIET_RUN_CONFIG
                    )
                print(f"review decisions merged for {len(step.keys)} document(s): {', '.join(step.keys[:5])}")
            elif step.kind == StepKind.REFRESH_AGGREGATES:
                if made.policy_changed and made.refreshed_at is not None:
                    print("the acceptance policy, derivation rules or template changed: exports written again with it")
                defs.resolve_job_def("aggregates_job").execute_in_process(
                    instance=instance, run_config=QUIET_RUN_CONFIG
                )
                late = reviews_behind([entry.key for entry in entries])
                if late:  # decided while this run worked: merged now, and the exports written again with them
                    for key in late:
                        defs.resolve_job_def("review_job").execute_in_process(
                            partition_key=key, instance=instance, run_config=QUIET_RUN_CONFIG
                        )
                    print(f"{len(late)} document(s) decided on while this run worked: merged, exports written again")
                    defs.resolve_job_def("aggregates_job").execute_in_process(
                        instance=instance, run_config=QUIET_RUN_CONFIG
                    )
        if batch_mode and StepKind.EXTRACT not in {step.kind for step in steps}:
            _send_batch(atlas, store, keys)
        if StepKind.REFRESH_AGGREGATES not in {step.kind for step in steps}:
            print("task completion and exports are up to date: not refreshed")
        states = document_states(instance, atlas)
        records = [read_record(store, key, "extraction", ExtractionRecord) for key in keys]
        ran = [record for record in records if record is not None and record.extracted_at >= run_began]
        print(f"\nprocessed {len(keys)} document(s) in {time.perf_counter() - started:.1f} s", end="")
        own = [record.processing_seconds for record in ran if record.processing_seconds]
        if seconds_each and own:  # the per-document lines are whole runs: the documents' own work is the smaller part
            print(
                f" ({sum(seconds_each) / len(seconds_each):.1f} s a document as listed above, of which "
                f"{sum(own) / len(own):.1f} s its snapshot, parse and extraction, the rest the Dagster run around it)"
            )
        else:
            print()
        if any(record.llm_calls or record.llm_cache_hits for record in ran):
            print(run_cost(ran))
        print_summary(states)
        by_hand = bool(states) and all(s.extraction is None or s.extraction.mode == "skip" for s in states)
        print_exports(exports, by_hand)
        left_out = read_excluded(exports)
        if left_out:
            print(
                f"  {len(left_out)} value(s) left out of the analysis files (not final yet, sources that disagree, "
                f"implausible numbers): {exports.url(EXCLUDED.path())}"
            )
            for row in left_out[:5]:
                print(f"    {row['study_id']} {row['entry']}: {row['field']}: {row['reason']}")
            if len(left_out) > 5:
                print(f"    … and {len(left_out) - 5} more")
        not_written = files_not_written(instance)
        for path, reason in not_written.items():
            print(f"  not written: {exports.url(path)}: {reason} (every other file was)")
        if second is not None:
            print(f"  {AGREEMENT.holds}: {exports.url(AGREEMENT.path())}")
        atlas_cli = atlas_command()
        print(f"  review them: `{atlas_cli} review` ({atlas.review_policy().page_url})")
        print(f"  search them: `{atlas_cli} search WORDS`")
        print_sources(atlas)
    return exit_status(states, set(keys), not_written)


def _extract(keys, args, defs, instance, batch, store, atlas, seconds_each) -> int | None:
    """The EXTRACT step: the documents run, one line each as they finish; the signal that stopped it, if one did
    (what was not done stays pending)."""
    from atlas_pipeline.core.statuses import TERMINAL
    from atlas_pipeline.definitions import build_definitions
    from atlas_pipeline.extraction.modes import agreement_summary
    from atlas_pipeline.ops.runs import RunStopped, run_documents, stop_on_signals
    from atlas_pipeline.store.records import ExtractionRecord, read_record

    stopped = False
    with stop_on_signals() as received:
        try:
            for number, (key, success, seconds) in enumerate(
                run_documents(keys, args.workers, defs, instance, batch, build=build_definitions), 1
            ):
                record = read_record(store, key, "extraction", ExtractionRecord)
                if success and record is not None:
                    outcome = record.status.value + ("" if record.status == "done" else f": {record.reason}")
                    if record.second_model and record.agreement:
                        outcome += f" ({agreement_summary(record.agreement, record.second_model)})"
                else:
                    (state,) = document_states(instance, atlas, only=[key])
                    outcome = f"{state.status.value}: {state.reason}"
                print(f"[{number}/{len(keys)}] {key}: {outcome} ({seconds:.1f} s)", flush=True)
                seconds_each.append(seconds)
        except (KeyboardInterrupt, RunStopped):
            stopped = True
    if not stopped:
        return None
    # said once the signal handlers are the process's own again: a second signal now ends it as signals do
    left = [state for state in document_states(instance, atlas) if state.status not in TERMINAL]
    print(
        f"\nstopped: {len(left)} document(s) not done stay pending (none is left extracting); "
        "run `atlas run` again to continue",
        flush=True,
    )
    return received.get("signal", signal.SIGINT)


def _send_batch(atlas, store, keys: list[str]) -> None:
    """Batch API mode, at the end of a pass: what this run queued goes out as one batch."""
    from atlas_pipeline.store.records import ExtractionRecord, read_record

    batch_tick(atlas, store, "end")
    waiting = [
        key for key in keys if (r := read_record(store, key, "extraction", ExtractionRecord)) and r.status == "waiting"
    ]
    if waiting:
        print(
            f"{len(waiting)} document(s) waiting at the endpoint's Batch API: run `atlas run` again later, or "
            "keep `atlas dev` running (the llm_batch_sensor looks every ATLAS_LLM_BATCH_POLL_SECONDS)"
        )


def print_exports(exports, by_hand: bool) -> None:
    """Where the exports are (``outputs.export_files``), the files a person opens first."""
    from atlas_pipeline.outputs.export_files import (
        APPROVED,
        ARMS,
        DOCUMENTS,
        ESCALC,
        FIELDS,
        FOREST_FOLDER,
        REVMAN,
        ROB2,
        STUDIES,
    )

    print("exports:")
    for fmt in DOCUMENTS.formats:
        print(f"  {fmt:<8} {exports.url(DOCUMENTS.path(fmt))}")
    rows = "one row per field to extract by hand" if by_hand else "one row per extracted field"
    for fmt in FIELDS.formats:
        print(f"  {fmt:<8} {exports.url(FIELDS.path(fmt))} ({rows})")
    print(f"  approved values (one typed row per approved document): {exports.url(APPROVED.path())}")
    print(f"  studies (each trial's values reconciled across its reports): {exports.url(STUDIES.path())}")
    print(f"  meta-analysis (final values only): {exports.url(ARMS.path())} (one row per arm),")
    first, *others = ESCALC  # the kinds' names are the ends of their stems
    more = ", ".join(f"_{kind}" for kind in others)
    print(f"           {exports.url(ESCALC[first].path())} (and {more}: R's escalc reads them as they are),")
    if exports.files(FOREST_FOLDER):
        print(f"           {exports.url(FOREST_FOLDER)}/ (a forest plot per outcome),")
    first, *others = REVMAN
    more = ", ".join(f"_{part}" for part in others)
    print(f"           {exports.url(REVMAN[first].path())} (and {more}: RevMan Web's import)")
    print("           — docs/analysis.md")
    if exports.exists(ROB2["table"].path()):
        print(f"  risk of bias (RoB 2, per result): {exports.url(ROB2['table'].path())}")
        others = ", ".join(exports.url(ROB2[part].path()) for part in ("revman", "robvis", "traffic_light", "summary"))
        print(f"           (RevMan's and robvis's files, the plots: {others}) — docs/rob2.md")


def _no_such_document(unknown: list[str], known: set[str], knowledge_base: str) -> int:
    listed = ", ".join(sorted(known)[:10]) or "none"
    print(f"atlas: no document {', '.join(unknown)} in {knowledge_base} (known: {listed})", file=sys.stderr)
    return EXIT_NOT_STARTED


def unknown_keys(knowledge_base, store, keys: list[str]) -> tuple[list[str], set[str]]:
    """The keys among ``keys`` no document has — not in the catalog, nor the key a file now listed would get — and
    the keys known (nothing is hashed or written to find them)."""
    from atlas_pipeline.knowledge.catalog import load_catalog
    from atlas_pipeline.knowledge.partition_keys import make_key

    catalog = load_catalog(store)
    known = {key for key, entry in catalog.entries.items() if not entry.removed}
    if set(keys) <= known:
        return [], known
    known |= {make_key(source.path, ()) for source in knowledge_base.list()}
    return sorted(set(keys) - known), known


def files_not_written(instance) -> dict[str, str]:
    """The export files the latest extraction_exports could not write, with why (its metadata)."""
    import dagster as dg

    from atlas_pipeline.defs.asset_names import FILES_NOT_WRITTEN

    event = instance.get_latest_materialization_event(dg.AssetKey("extraction_exports"))
    entry = (
        event.asset_materialization.metadata.get(FILES_NOT_WRITTEN) if event and event.asset_materialization else None
    )
    return dict(entry.value) if entry is not None and isinstance(entry.value, dict) else {}


def _scan_progress(done: int, total: int) -> None:
    """A long scan (many files, a slow share) says how far it got, about once a second."""
    print(f"scanning the knowledge base: {done:,} of {total:,} files", flush=True)


def _print_estimate(atlas, store, entries) -> int:
    """``atlas run --estimate``: what the run would send and cost; nothing is parsed or sent."""
    from atlas_pipeline.extraction.document_extraction import estimate_extractions

    rule = atlas.load_rule()
    if atlas.mode(rule) != "llm":
        print(f"estimate: {len(entries)} document(s) would run in skip mode: no LLM request, nothing to pay")
        return 0
    llm = atlas.llm_client(cache=store)
    print(f"estimate (nothing sent): {len(entries)} document(s) to extract; prices: {atlas.price_file()}")
    estimate = estimate_extractions(atlas.open_knowledge_base(), store, entries, atlas.load_template(), rule, llm)
    for line in estimate.lines(llm.config.concurrency):
        print(line)
    second = atlas.second_llm_config()
    if second is not None:
        print(
            f"second extractor {second.model}: as many requests and tokens again (its own prices), "
            "plus one follow-up request per document where neither finds a required field"
        )
    if estimate.cost is None:
        print(f"no price for {llm.config.model} in {atlas.price_file()}: add it there (or set ATLAS_LLM_PRICES)")
    return 0


def batch_tick(deployment, store, when: str) -> None:
    """Batch API mode: take in what arrived and submit what is queued (``atlas run`` at its start and end); the
    documents that read their answers since are no longer ready."""
    from atlas_pipeline.store.records import ExtractionRecord, read_record

    print(f"Batch API ({when}): {deployment.llm_client(cache=store).batch_tick().summary()}")
    queue = deployment.batch_queue(store)
    for key in queue.ready():
        record = read_record(store, key, "extraction", ExtractionRecord)
        if record is not None and record.status != "waiting":
            queue.read(key)
