"""Running documents as Dagster runs from a plain process — what ``atlas run`` does — and stopping cleanly.

One run per document, or a partition range per run (``batch`` > 1: Dagster's per-run cost paid once), in this process
or in ``workers`` processes. A run that an interrupt stopped (SIGINT, SIGTERM) raises ``RunStopped``: nothing more
is started, and the document in flight counts as pending, not failed (``defs.document_states``). Runs whose process
died without a word (SIGKILL, a crash) stay STARTED in the instance; ``reap_dead_runs`` marks them failed when
``atlas`` next starts, so no document stays ``extracting`` for ever.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from collections.abc import Iterator

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.deployment import Deployment

QUIET_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "ERROR"}}}}
# a document run says nothing on the console: its outcome is printed per document with the reason (a failed document's
# document_status step, or a fault, with its root cause); the full error stays in the run's event log
DOCUMENT_RUN_CONFIG = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}
PID_TAG, HOST_TAG = "atlas/pid", "atlas/host"
INTERRUPTED_ERRORS = ("DagsterExecutionInterruptedError", "KeyboardInterrupt")


class RunStopped(AtlasError):
    """A run was interrupted (SIGINT or SIGTERM): the caller stops starting documents."""


def run_tags() -> dict[str, str]:
    """Tags of a run launched here: who launched it, and the process that runs it (for ``reap_dead_runs``)."""
    return {"atlas/launched_by": "atlas run", PID_TAG: str(os.getpid()), HOST_TAG: socket.gethostname()}


def was_interrupted(result) -> bool:  # an ExecuteInProcessResult
    """Did an interrupt stop this run (rather than a document or a fault)?"""
    for event in result.all_events:
        if event.event_type_value in ("STEP_FAILURE", "RUN_FAILURE"):
            data = event.event_specific_data
            error = getattr(data, "error", None)
            while error is not None:
                if error.cls_name in INTERRUPTED_ERRORS:
                    return True
                error = error.cause
    return False


def went_through(result) -> bool:  # an ExecuteInProcessResult
    """Did every step do its work? A run whose only failed step is ``document_status`` did: the step fails because
    a document failed (so its partition is red in the Dagster UI), and the document's record says why."""
    from atlas_pipeline.defs.asset_names import STATUS_ASSET_NAME

    if result.success:
        return True
    failed = {event.step_key for event in result.all_events if event.event_type_value == "STEP_FAILURE"}
    return failed == {STATUS_ASSET_NAME}


_WORKER: dict = {}


def _worker_context(defs=None, instance=None, build=None):
    """Definitions and instance: given, or (in a worker process) built once with ``build`` — the composition root's
    ``build_definitions``, handed down so that ``ops`` never imports the definitions it serves — and cached."""
    import dagster as dg

    if defs is None:
        if not _WORKER:
            _WORKER["defs"] = build(Deployment.from_environment())
            _WORKER["instance"] = dg.DagsterInstance.get()
        defs, instance = _WORKER["defs"], _WORKER["instance"]
    return defs, instance


def _run_batch(keys: list[str], defs=None, instance=None, build=None) -> list[tuple[str, bool, float]]:
    """Materialise the documents of ``keys`` (consecutive partitions) in one Dagster run — one run per document
    when there is one key. A batch whose run fails at a step (a fault, not a failed document) is run again one
    document per run, so a document that raises fails alone, with its own reason."""
    from atlas_pipeline.dagster_internals import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

    defs, instance = _worker_context(defs, instance, build)
    tags = run_tags()
    began = time.perf_counter()
    if len(keys) == 1:
        result = defs.resolve_job_def("document_job").execute_in_process(
            partition_key=keys[0], instance=instance, raise_on_error=False, run_config=DOCUMENT_RUN_CONFIG, tags=tags
        )
        if was_interrupted(result):
            raise RunStopped(keys[0])
        return [(keys[0], went_through(result), time.perf_counter() - began)]
    tags |= {ASSET_PARTITION_RANGE_START_TAG: keys[0], ASSET_PARTITION_RANGE_END_TAG: keys[-1]}
    job = defs.resolve_job_def("document_batch_job")  # a partition range: the checks are logged per document
    result = job.execute_in_process(instance=instance, raise_on_error=False, run_config=DOCUMENT_RUN_CONFIG, tags=tags)
    if was_interrupted(result):
        raise RunStopped(keys[0])
    if not went_through(result):
        return [outcome for key in keys for outcome in _run_batch([key], defs, instance)]
    each = (time.perf_counter() - began) / len(keys)
    return [(key, True, each) for key in keys]


def run_documents(keys: list[str], workers: int, defs, instance, batch: int = 1, build=None):
    """Yield (key, success, seconds) per document as runs finish; ``batch`` > 1 materialises up to that many
    documents per Dagster run, ``workers`` > 1 runs batches in parallel processes, each building its definitions
    with ``build`` (a module-level function taking a Deployment, so that it can be sent to another process)."""
    from atlas_pipeline.defs.partitions import documents_partitions
    from atlas_pipeline.knowledge.planning import plan_batches

    ordered = list(instance.get_dynamic_partitions(documents_partitions.name))
    groups = plan_batches(keys, ordered, max(1, batch))
    if workers <= 1 or len(groups) <= 1:
        for group in groups:
            yield from _run_batch(group, defs, instance)
        return
    if build is None:
        raise ValueError("run_documents: workers > 1 needs build (the function that builds the definitions)")
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    with ProcessPoolExecutor(max_workers=workers, mp_context=get_context("spawn")) as pool:
        futures = [pool.submit(_run_batch, group, None, None, build) for group in groups]
        try:
            for future in as_completed(futures):
                yield from future.result()
        except (KeyboardInterrupt, RunStopped):
            for future in futures:
                future.cancel()
            for process in list(getattr(pool, "_processes", {}).values()):  # their runs stop as interrupted
                with contextlib.suppress(Exception):
                    process.terminate()
            raise


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def reap_dead_runs(instance) -> list[str]:
    """Mark failed the runs launched here whose process is gone (killed with SIGKILL, crashed); their ids."""
    import dagster as dg

    reaped = []
    host = socket.gethostname()
    unfinished = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED]
    active = instance.get_runs(dg.RunsFilter(statuses=unfinished))  # in-process runs can die before STARTED
    for run in active:
        pid, run_host = run.tags.get(PID_TAG), run.tags.get(HOST_TAG)
        if not pid or run_host != host or int(pid) == os.getpid() or _alive(int(pid)):
            continue
        instance.report_run_failed(run, message=f"interrupted: the process running it (pid {pid}) died")
        reaped.append(run.run_id)
    return reaped


@contextlib.contextmanager
def stop_on_signals() -> Iterator[dict[str, int]]:
    """SIGTERM (as SIGINT already does) stops the work between runs with ``KeyboardInterrupt``; inside a run
    Dagster turns either into an interrupted run. Yields a dict that holds the last signal received."""
    received: dict[str, int] = {}

    def interrupt(signum: int, frame: object) -> None:
        received["signal"] = signum
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, interrupt) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield received
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
