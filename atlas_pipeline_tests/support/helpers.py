"""Helpers several test modules share: the ``atlas`` command, a sensor evaluated tick by tick, asset metadata, and
the review page served over real HTTP in the test's process."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import dagster as dg

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.defs.resources import AtlasResource
from atlas_pipeline.deployment import Deployment
from scripted_servers.processes import free_port

BIN = Path(sys.executable).parent
_PID = re.compile(r"\(pid: (\d+)\)")


def register(instance: dg.DagsterInstance, atlas) -> list[str]:
    """Scan the knowledge base into the catalog and add every document as a partition (what the sensor does)."""
    from atlas_pipeline.knowledge.catalog import refresh_catalog

    scan = refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    keys = list(scan.catalog.entries)
    instance.add_dynamic_partitions(documents_partitions.name, keys)
    return keys


def run_document(defs: dg.Definitions, instance: dg.DagsterInstance, key: str):
    """The document job for one partition, in process, failures returned rather than raised."""
    return defs.resolve_job_def("document_job").execute_in_process(
        partition_key=key, instance=instance, raise_on_error=False
    )


def document_failed(result) -> bool:
    """A document run that failed because its document did (``document_status`` red in the Dagster UI), every
    other step having gone through."""
    failed = {event.step_key for event in result.all_events if event.event_type_value == "STEP_FAILURE"}
    return not result.success and failed == {"document_status"}


def ran_as_its_document(result, status: str) -> bool:
    """The run went through every step, and failed at ``document_status`` exactly when its document failed."""
    failed = str(status) == "failed"
    return (result.success, document_failed(result)) == (not failed, failed)


def run_atlas(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess:
    """``atlas <args>`` as a user runs it: the installed script, in ``cwd``, with ``env`` over the environment."""
    return subprocess.run(
        [str(BIN / "atlas"), *args], env={**os.environ, **env}, cwd=cwd, capture_output=True, text=True, timeout=600
    )


class SensorHarness:
    """Evaluates the sensor tick after tick like the daemon does: applies partition requests, keeps the cursor."""

    def __init__(self, instance, settings, atlas):
        """``atlas``: the deployment the test reads results from (the sensor gets the same, as its resource)."""
        self.instance = instance
        self.atlas = atlas
        self.defs = build_definitions(settings)
        self.resource = AtlasResource.from_deployment(Deployment.from_settings(settings))
        self.sensor = self.defs.resolve_sensor_def("knowledge_base_sensor")
        self.cursor = None

    def tick(self) -> dg.SensorResult:
        context = dg.build_sensor_context(
            instance=self.instance, cursor=self.cursor, resources={"atlas": self.resource}, definitions=self.defs
        )
        result = self.sensor(context)
        for request in result.dynamic_partitions_requests or []:
            self.instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))
        self.cursor = result.cursor
        return result

    @property
    def partitions(self) -> set[str]:
        return set(self.instance.get_dynamic_partitions(documents_partitions.name))


def latest_metadata(instance: dg.DagsterInstance, asset: str, partition: str | None = None):
    """The metadata of the newest materialization of ``asset`` (one partition of it), or None."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=dg.AssetKey(asset), asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    return records[0].asset_materialization.metadata if records else None


def run_worker_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    """The pid of the process executing the run's steps, once it has started parsing."""
    started = [e.step_key for e in instance.all_logs(run_id, of_type=dg.DagsterEventType.STEP_START)]
    if "document_parse" not in started:
        return None
    for entry in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        match = _PID.search(entry.message or "")
        if match:
            return int(match.group(1))
    return None


@contextlib.contextmanager
def serve(app):
    """The review app on a real HTTP server (uvicorn on 127.0.0.1) in this process, so it can share the test's
    ephemeral Dagster instance."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def http_request(url: str, data: bytes | None = None, headers: dict | None = None) -> tuple[int, str]:
    request = urllib.request.Request(
        url, data=data, headers=headers or {}, method="POST" if data is not None else "GET"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode("utf-8", "replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """Keeps the redirect response itself (to look at its Location and cookie)."""

    last = None

    def http_error_303(self, req, fp, code, msg, headers):
        NoRedirect.last = fp
        return fp


def multipart(name: str, filename: str, data: bytes) -> tuple[bytes, dict]:
    boundary = "atlas-test-boundary"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        ).encode()
        + data
        + f"\r\n--{boundary}--\r\n".encode()
    )
    return body, {"Content-Type": f"multipart/form-data; boundary={boundary}"}


def post_form(url: str, form: dict, cookie: str = "") -> tuple[int, str]:
    """(status, body) of a form POST (redirects followed), as the person with the session ``cookie``."""
    import urllib.parse

    return http_request(url, urllib.parse.urlencode(form, doseq=True).encode(), {"Cookie": cookie} if cookie else {})


def session_cookie(site: str, name: str, password: str, back: str = "/") -> tuple[int, str]:
    """(status, the session cookie) of a login to the review page at ``site``."""
    import urllib.parse

    form = urllib.parse.urlencode({"name": name, "password": password, "next": back}).encode()
    request = urllib.request.Request(f"{site}/login", data=form, method="POST")
    try:
        urllib.request.build_opener(NoRedirect).open(request, timeout=30).close()
    except urllib.error.HTTPError as error:
        return error.code, ""
    answer = NoRedirect.last
    return answer.status, (answer.headers.get("set-cookie") or "").split(";")[0]
