"""Real servers for tests, started as child processes on 127.0.0.1 and stopped by their own pid."""

from __future__ import annotations

import contextlib
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
