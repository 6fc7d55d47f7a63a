"""A living knowledge base under the real daemon, for a bounded time: a local feed publishes documents over time, a
collector brings them in, the knowledge-base sensor has them extracted, the aggregates group duplicates and index
them. What it measures: nothing crashes, memory stays bounded, nothing is stuck, and the counts add up.

Used by ``test_soak.py`` (under a minute) and ``bench/soak.py`` (as long as you like)."""

from __future__ import annotations

import io
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg
import polars as pl
import pymupdf

from atlas_pipeline.defs.document_runs import WAITING_OR_RUNNING
from atlas_pipeline.ops.instance import project_file
from atlas_pipeline.outputs.export_files import FIELDS_STEM
from atlas_pipeline.review.decisions import DecisionRequest, decide
from atlas_pipeline.sources.state import load_state
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import export_path
from atlas_pipeline.store.records import ExtractionRecord, read_record
from scripted_servers.processes import dagster_daemon, feed_site, watched_folder_env

SOURCE = "soak-feed"
REVIEWER = "soak reviewer"


@dataclass
class SoakResult:
    seconds: float = 0.0
    published: int = 0
    collected: int = 0
    partitions: int = 0
    finished: int = 0  # documents in a terminal status
    indexed: int = 0
    duplicates: int = 0
    runs_failed: int = 0
    documents_failed: int = 0  # documents whose status is failed (an error on the document, the run went on)
    runs_unfinished: int = 0
    daemon_alive: bool = True
    peak_rss_mb: float = 0.0
    rss_samples: list[float] = field(default_factory=list)
    # [minute, MB, collected, finished, failed documents, failed runs, decisions, decisions exported]
    timeline: list[list[object]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    decisions: int = 0  # values a reviewer approved while the run went on (LLM mode)
    decisions_exported: int = 0  # of those, how many the fields export shows as decided
    log_tail: str = ""

    def summary(self) -> str:
        return (
            f"{self.seconds:.0f} s: {self.published} published, {self.collected} collected, {self.partitions} "
            f"partitions, {self.finished} finished, {self.indexed} indexed, {self.duplicates} duplicates; runs: "
            f"{self.runs_failed} failed, {self.runs_unfinished} unfinished; {self.decisions} decisions made, "
            f"{self.decisions_exported} in the exports; peak memory {self.peak_rss_mb:.0f} MB; "
            f"daemon {'alive' if self.daemon_alive else 'DEAD'}"
        )


def group_rss_mb(pgid: int) -> float:
    """Memory of every process of a process group (the daemon, its code server, its runs), in MB: each process's
    proportional share (PSS: a library page three processes map counts a third in each — resident sizes added up
    would count it three times, and a moment with several runs at once would pass a bound no real use does), its
    resident size where the kernel has no ``smaps_rollup``."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            if int(stat.rsplit(")", 1)[1].split()[2]) != pgid:
                continue
            total += _kilobytes(entry)
        except (OSError, ValueError, IndexError):
            continue
    return total / 1024


def _kilobytes(pid: str) -> int:
    for source, label in (("smaps_rollup", "Pss:"), ("status", "VmRSS:")):
        try:
            for line in Path(f"/proc/{pid}/{source}").read_text().splitlines():
                if line.startswith(label):
                    return int(line.split()[1])
        except OSError:
            continue
    return 0


def distinct_copy(source: Path, number: int, folder: Path) -> Path:
    """The document under other bytes (the same work): a PDF re-saved with other metadata, a text with a comment."""
    target = folder / f"{source.stem}-{number}{source.suffix}"
    if number == 0:
        shutil.copyfile(source, target)
    elif source.suffix == ".pdf":
        document = pymupdf.open(source)
        document.set_metadata({"title": f"copy {number}", "producer": "soak"})
        document.save(target)
    else:
        target.write_bytes(source.read_bytes() + f"\n<!-- copy {number} -->\n".encode())
    return target


def run_soak(
    folder: Path,
    documents: list[Path],
    publish_seconds: float,
    settle_seconds: float,
    extra_env: dict[str, str] | None = None,
    every_seconds: float = 600,
    review_every_seconds: float = 0,
) -> SoakResult:
    """Publish ``documents`` evenly over ``publish_seconds``, then wait up to ``settle_seconds`` for every one to be
    collected, extracted and indexed (``extra_env``: more settings, e.g. an LLM endpoint; a line of figures every
    ``every_seconds``). ``review_every_seconds`` (LLM mode): a reviewer approves a value of an extracted document that
    often while documents are published, as on the review page, and the run also waits for every decision to reach
    the fields export."""
    folder.mkdir(parents=True, exist_ok=True)
    home, kb = folder / "dagster_home", folder / "kb"
    home.mkdir(exist_ok=True)
    kb.mkdir(exist_ok=True)
    shutil.copyfile(project_file("dagster.yaml"), home / "dagster.yaml")
    result = SoakResult()
    started = time.monotonic()
    with feed_site(folder / "site") as site:
        spacing = publish_seconds / max(1, len(documents))
        for number, document in enumerate(documents):
            site.publish(f"item-{number}", document, after=number * spacing)
        sources = folder / "sources.toml"
        sources.write_text(
            f'[[source]]\nname = "{SOURCE}"\nfeed = "{site.feed}"\ntarget = "collected"\npoll_minutes = 0.02\n'
            "min_domain_interval_seconds = 0\nmax_items_per_tick = 20\ntimeout_seconds = 20\n"
        )
        env = {
            **os.environ,
            "DAGSTER_HOME": str(home),
            **watched_folder_env(folder, kb),
            "ATLAS_SOURCES": str(sources),
            "ATLAS_SOURCES_INTERVAL_SECONDS": "2",
            **(extra_env or {}),
        }
        store = Store(str(folder / "artifacts"))
        instance = dg.DagsterInstance.from_config(str(home))
        deadline = started + publish_seconds + settle_seconds
        exports, reviewed, last_review = Store(env["ATLAS_EXPORTS"]), set(), started
        with dagster_daemon(env, folder) as daemon:
            while time.monotonic() < deadline:
                if daemon.poll() is not None:
                    result.daemon_alive = False
                    break
                rss = group_rss_mb(daemon.pid)
                result.rss_samples.append(rss)
                result.peak_rss_mb = max(result.peak_rss_mb, rss)
                _count(result, instance, store, len(documents))
                minute = (time.monotonic() - started) / 60
                if not result.timeline or minute - float(result.timeline[-1][0]) >= every_seconds / 60:
                    figures = [result.collected, result.finished, result.documents_failed, result.runs_failed]
                    figures += [result.decisions, result.decisions_exported]
                    result.timeline.append([round(minute, 1), round(rss), *figures])
                reviewing = review_every_seconds and time.monotonic() - started < publish_seconds
                if reviewing and time.monotonic() - last_review >= review_every_seconds:
                    last_review = time.monotonic()
                    result.decisions += _approve_one(store, instance, reviewed)
                    result.decisions_exported = _exported_decisions(exports)
                done = result.indexed == len(documents) and result.finished == len(documents)
                done = done and result.decisions_exported == result.decisions
                if time.monotonic() - started > publish_seconds and done and _aggregates_settled(instance):
                    break
                time.sleep(2)
            result.seconds = time.monotonic() - started
            _count(result, instance, store, len(documents))
            result.decisions_exported = _exported_decisions(exports) if review_every_seconds else 0
            result.log_tail = (folder / "daemon.log").read_text(errors="replace")[-4000:]
        instance.dispose()
    return result


def _approve_one(store: Store, instance: dg.DagsterInstance, reviewed: set[str]) -> int:
    """A reviewer approves the first value of an extracted document not yet reviewed: 1 when one was approved."""
    for key in instance.get_dynamic_partitions("documents"):
        record = read_record(store, key, "extraction", ExtractionRecord)
        fields = [name for name, value in record.fields.items() if isinstance(value, dict)] if record else []
        if key in reviewed or not fields:
            continue
        reviewed.add(key)
        shown = (record.sha256, record.extraction_version)
        return int(
            decide(store, record, DecisionRequest(fields[0], "approve", reviewer=REVIEWER, shown=shown)) is not None
        )
    return 0


def _exported_decisions(exports: Store) -> int:
    path = export_path(FIELDS_STEM, "parquet")
    if not exports.exists(path):
        return 0
    fields = pl.read_parquet(io.BytesIO(exports.read_bytes(path)))
    return fields.filter(pl.col("decided_by") == REVIEWER).height


def _aggregates_settled(instance: dg.DagsterInstance) -> bool:
    return instance.get_runs_count(dg.RunsFilter(statuses=WAITING_OR_RUNNING)) == 0


def _count(result: SoakResult, instance: dg.DagsterInstance, store: Store, published: int) -> None:
    from atlas_pipeline.knowledge.duplicate_records import load_groups

    result.published = published
    state = load_state(store, SOURCE)
    result.collected = sum(1 for item in state.items.values() if item.outcome == "collected")
    result.problems = [
        f"{key}: {item.outcome} {item.reason}"
        for key, item in state.items.items()
        if item.outcome and item.outcome != "collected"
    ]
    keys = instance.get_dynamic_partitions("documents")
    result.partitions = len(keys)
    completion = instance.get_latest_materialization_event(dg.AssetKey("task_completion"))
    if completion is not None:
        metadata = completion.asset_materialization.metadata
        total, open_ = (
            metadata["total"].value,
            sum(metadata.get(f"count_{status}", dg.MetadataValue.int(0)).value for status in ("pending", "extracting")),
        )
        result.finished = total - open_
        result.documents_failed = metadata.get("count_failed", dg.MetadataValue.int(0)).value
    search = instance.get_latest_materialization_event(dg.AssetKey("search_index"))
    result.indexed = search.asset_materialization.metadata["documents"].value if search else 0
    result.duplicates = len(load_groups(store).duplicate_of)
    result.runs_failed = instance.get_runs_count(dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))
    result.runs_unfinished = instance.get_runs_count(dg.RunsFilter(statuses=WAITING_OR_RUNNING))
