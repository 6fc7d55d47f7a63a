"""The Dagster UI and daemon that ``atlas dev`` starts, the UI behind the review page's trusted-host rule.

``dagster dev`` serves its UI to any ``Host`` header: a page on another site whose name resolves to 127.0.0.1 (DNS
rebinding) could read and drive the deployment through GraphQL. This is ``dagster dev`` with that closed: one code
server shared by the UI and the daemon (as ``dagster dev`` does), the daemon as a child process, and Dagster's own ASGI
app served by uvicorn behind Starlette's ``TrustedHostMiddleware`` (see ``config/hosts.py``).

``python -m atlas_pipeline.ops.dagster_ui --workspace W --host H --port P``; Ctrl-C (SIGINT) or SIGTERM stops the UI,
then the daemon and the code server.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import uvicorn
import yaml
from starlette.middleware.trustedhost import TrustedHostMiddleware

from atlas_pipeline.config.hosts import trusted_hosts
from atlas_pipeline.dagster_internals import workspace_tools

DAEMON_STOP_SECONDS = 30


def dagster_program(name: str = "dagster") -> str:
    """The ``dagster`` command of the environment ``atlas`` runs in (a virtual environment need not be on PATH)."""
    beside = Path(sys.executable).parent / name
    if beside.is_file():
        return str(beside)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(
            f"atlas dev needs the `{name}` command of the dagster package: not found next to {sys.executable} nor "
            "on PATH (run `make setup`, or install the project into this environment)"
        )
    return found


def guarded_app(app, listed_hosts: str = ""):
    """``app`` answering only the trusted hosts: any other ``Host`` gets 400 before Dagster sees the request."""
    return TrustedHostMiddleware(app, allowed_hosts=trusted_hosts(listed_hosts))


@contextlib.contextmanager
def shared_code_server(instance, workspace: str) -> Iterator[str]:
    """One code server for the UI and the daemon, as ``dagster dev`` runs it: the path of a workspace file naming it."""
    ProxyServerManager, WorkspaceFileTarget, _ = workspace_tools()
    target = WorkspaceFileTarget(paths=[workspace])
    with (
        ProxyServerManager(instance=instance, workspace_load_target=target, code_server_log_level="warning") as proxy,
        tempfile.TemporaryDirectory(prefix="atlas-dev-") as folder,
    ):
        path = Path(folder) / "workspace.yaml"
        path.write_text(yaml.dump({"load_from": proxy.get_code_server_specs()}))
        yield str(path)


def serve(workspace: str, host: str, port: int, listed_hosts: str = "") -> int:
    """Run the daemon and serve the UI until interrupted (or until the daemon dies: then 1)."""
    import dagster as dg

    _, WorkspaceFileTarget, WorkspaceProcessContext = workspace_tools()
    from dagster_webserver.app import create_app_from_workspace_process_context
    from dagster_webserver.version import __version__

    os.environ["DAGSTER_IS_DEV_CLI"] = "1"  # as under `dagster dev`: the UI offers to reload definitions
    with dg.DagsterInstance.get() as instance, shared_code_server(instance, workspace) as served:
        daemon = subprocess.Popen([dagster_program("dagster-daemon"), "run", "-w", served])
        try:
            with WorkspaceProcessContext(
                instance, version=__version__, read_only=False, workspace_load_target=WorkspaceFileTarget([served])
            ) as context:
                app = guarded_app(create_app_from_workspace_process_context(context), listed_hosts)
                server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
                died: list[int] = []
                threading.Thread(target=_stop_when_dead, args=(daemon, server, died), daemon=True).start()
                print(f"Dagster UI serving on http://{host}:{port} (Host: {', '.join(trusted_hosts(listed_hosts))})")
                with contextlib.suppress(KeyboardInterrupt):  # uvicorn re-raises the Ctrl-C it shut down on
                    server.run()
        finally:
            _stop(daemon)
    if died:
        print(f"atlas dev: the Dagster daemon stopped unexpectedly (exit code {died[0]})", file=sys.stderr)
        return 1
    return 0


def _stop_when_dead(daemon: subprocess.Popen, server: uvicorn.Server, died: list[int]) -> None:
    code = daemon.wait()
    time.sleep(2)  # a Ctrl-C reaches the daemon and the UI at once: the UI's own handler may not have run yet
    if not server.should_exit:  # not a shutdown we asked for: the UI without its daemon would lie about sensors
        died.append(code)
        server.should_exit = True


def _stop(daemon: subprocess.Popen) -> None:
    if daemon.poll() is None:
        daemon.send_signal(signal.SIGINT)  # the daemon stops its threads and runs' monitoring cleanly on SIGINT
    try:
        daemon.wait(timeout=DAEMON_STOP_SECONDS)
    except subprocess.TimeoutExpired:
        daemon.kill()
        daemon.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--trusted-hosts", default="", help="more Host names answered (ATLAS_TRUSTED_HOSTS)")
    args = parser.parse_args(argv)
    return serve(args.workspace, args.host, args.port, args.trusted_hosts)


if __name__ == "__main__":
    sys.exit(main())
