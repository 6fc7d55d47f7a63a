"""`atlas dev`: the Dagster UI and daemon and the review page, started together and stopped together."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import time


def command_dev(args: argparse.Namespace) -> int:
    """Open the Dagster UI and daemon (sensors live) on 127.0.0.1."""
    from atlas_pipeline.deployment import Deployment
    from atlas_pipeline.knowledge.listing import KnowledgeBase
    from atlas_pipeline.knowledge.state_owner import claim_state
    from atlas_pipeline.ops.instance import prepare_dagster_home, project_file
    from atlas_pipeline.store.files import Store

    deployment = Deployment.from_environment()  # fail early with a clear message
    KnowledgeBase(deployment.knowledge_base).check()  # … and not as a sensor traceback every 30 s
    home = prepare_dagster_home(deployment.instance_config)
    owned = [deployment.store(), deployment.exports_store(), Store(str(home))]
    claim_state(owned, deployment.knowledge_base)  # the sensors never bring another knowledge base into this state
    command = [
        sys.executable,
        "-m",
        "atlas_pipeline.ops.dagster_ui",
        "--workspace",
        str(project_file("workspace.yaml")),
    ]
    command += [
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--trusted-hosts",
        deployment.page_access().trusted_hosts,
    ]
    environment = dev_environment(deployment)
    import dagster as dg

    with dg.DagsterInstance.get():  # storage created once, before Dagster and the review page open it side by side
        pass
    port = deployment.review_policy().port
    review = [sys.executable, "-m", "atlas_pipeline.cli", "review", "--port", str(port)]
    print(
        f"Dagster UI on http://{args.host}:{args.port} with the daemon (instance {home}), the review page on "
        f"http://127.0.0.1:{port}; Ctrl-C stops them all",
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


LOCATION_VARIABLES = (
    "ATLAS_KNOWLEDGE_BASE",
    "ATLAS_ARTIFACTS",
    "ATLAS_EXPORTS",
    "ATLAS_SEEDS_DIR",
    "ATLAS_INSTANCE_CONFIG",
    "ATLAS_EXECUTOR_CONFIG",
)


def dev_environment(deployment) -> dict[str, str]:
    """The environment of the Dagster UI, daemon and review page: the resolved locations (they run in DAGSTER_HOME,
    where relative paths would mean something else)."""
    resolved = deployment.environment()
    return dict(os.environ) | {name: resolved[name] for name in LOCATION_VARIABLES if resolved[name]}
