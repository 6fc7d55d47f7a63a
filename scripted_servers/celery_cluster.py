"""A scale-out deployment on one machine, as it would be on several: a Redis broker, Celery workers each in its own
working directory with its own ``DAGSTER_HOME`` (the instance config only), the daemon, the instance on PostgreSQL
and the knowledge base, artifacts and exports on S3. Used by ``test_celery.py`` and ``bench/scale.py``; the commands
are those of docs/operations.md §4."""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.store.files import filesystem_for
from scripted_servers.processes import (
    BIN,
    CELERY_EXECUTOR_CONFIG,
    celery_worker,
    dagster_daemon,
    dagster_webserver,
    redis_server,
)


@dataclass
class CeleryDeployment:
    folder: Path
    bucket: str
    env: dict[str, str]
    instance: dg.DagsterInstance
    daemon: object
    workers: dict[str, object] = field(default_factory=dict)
    webserver: str = ""  # the UI's URL, when asked for

    @property
    def fs(self):
        return filesystem_for(f"s3://{self.bucket}")[0]

    def drop(self, name: str, data: bytes) -> None:
        """A document into the knowledge base on S3."""
        self.fs.pipe_file(f"{self.bucket}/kb/{name}", data)

    def logs(self) -> str:
        parts = [
            ("daemon", self.folder / "daemon" / "daemon.log"),
            ("webserver", self.folder / "webserver" / "webserver.log"),
        ]
        parts += [(name, self.folder / name / "worker.log") for name in self.workers]
        return "".join(f"\n--- {name} ---\n{path.read_text()[-2500:]}" for name, path in parts if path.exists())


@contextlib.contextmanager
def celery_deployment(
    folder: Path,
    database: dict[str, str],
    *,
    workers: int = 2,
    bucket: str = "atlas-celery",
    visibility_timeout: int = 15,
    pool_limit: int = 16,
    extra_env: dict[str, str] | None = None,
    webserver: bool = False,
) -> Iterator[CeleryDeployment]:
    """Start it all; S3 credentials and ``ATLAS_S3_ENDPOINT_URL`` must be in this process's environment, and
    ``database`` (``DAGSTER_PG_*``) too, since this process reads the instance."""
    fs, _ = filesystem_for(f"s3://{bucket}")
    fs.mkdir(bucket)
    folder.mkdir(parents=True, exist_ok=True)
    executor = folder / "executor.yaml"  # the deployment's own, with a shorter Redis visibility timeout
    executor.write_text(
        project_file(CELERY_EXECUTOR_CONFIG)
        .read_text()
        .replace("visibility_timeout: 3600", f"visibility_timeout: {visibility_timeout}")
    )
    instance_config = project_file("deploy/celery/dagster.yaml").read_text()
    instance_config = instance_config.replace("default_limit: 16", f"default_limit: {pool_limit}")
    names = ["daemon", "webserver", *(f"worker{n}" for n in range(1, workers + 1))]
    homes = {name: folder / name / "dagster_home" for name in names}
    for home in homes.values():
        home.mkdir(parents=True)
        (home / "dagster.yaml").write_text(instance_config)
    # the broker asks for a password, as it must when workers reach it from other machines
    with redis_server(folder / "redis", password=secrets.token_hex(12)) as broker, contextlib.ExitStack() as stack:
        env = {
            **os.environ,
            **database,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "ATLAS_KNOWLEDGE_BASE": f"s3://{bucket}/kb",
            "ATLAS_ARTIFACTS": f"s3://{bucket}/artifacts",
            "ATLAS_EXPORTS": f"s3://{bucket}/exports",
            "ATLAS_EXECUTOR": "celery",
            "ATLAS_EXECUTOR_CONFIG": str(executor),
            "ATLAS_CELERY_BROKER": f"{broker}/0",
            "ATLAS_CELERY_BACKEND": f"{broker}/1",
            "ATLAS_SENSOR_INTERVAL_SECONDS": "2",
            "ATLAS_AUTOMATION_INTERVAL_SECONDS": "2",
            **(extra_env or {}),
        }
        started = {
            name: stack.enter_context(
                celery_worker(name, {**env, "DAGSTER_HOME": str(homes[name])}, folder / name, str(executor))
            )
            for name in names[2:]
        }
        daemon = stack.enter_context(dagster_daemon({**env, "DAGSTER_HOME": str(homes["daemon"])}, folder / "daemon"))
        ui = ""
        if webserver:
            ui = stack.enter_context(
                dagster_webserver({**env, "DAGSTER_HOME": str(homes["webserver"])}, folder / "webserver")
            )
        instance = dg.DagsterInstance.from_config(str(homes["daemon"]))
        yield CeleryDeployment(folder, bucket, env, instance, daemon, started, ui)
