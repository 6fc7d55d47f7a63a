"""Bulk loads at half price: extraction requests sent through an OpenAI-compatible Batch API, the state in the store.

With ``ATLAS_LLM_BATCH`` on, a request the LLM cache cannot answer is *queued* instead of sent
(``llm_batches/queued/``) and its document ends ``waiting``. ``BatchQueue.submit`` uploads the queued requests as one
JSONL file (``POST /files``, purpose ``batch``) and creates a batch (``POST /batches``, 24 h window); ``poll`` reads
each open batch (``GET /batches/{id}``) and, once it has ended, its output and error files: every answer goes into the
LLM cache under its request's key — where the document's next run finds it and grades it as usual — and the
documents that were waiting for it are returned, to be run again (the ``llm_batch_sensor`` does this under the
daemon; ``atlas run`` at its start and end). Everything lives in the artifact store, so a restart, another process or
another worker picks up where the last one stopped.

A request the batch could not answer: expired (the window ended) or a transient error (429, 5xx) → queued again for
the next batch; a permanent error (a 4xx) → recorded under ``failed/``, read once by the document's next run, which
fails with that reason. A batch that failed as a whole (its file refused) fails its requests the same way.

A batch still open ``deadline_hours`` after it was sent (``ATLAS_LLM_BATCH_DEADLINE_HOURS``: an endpoint that never
ends it) is cancelled at the endpoint (as far as it lets us) and given up here: its requests are sent directly at the
documents' next run — said in their record and the poll's report — so no document waits for ever.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import openai

from atlas_pipeline.core.clock import now_iso, utc_now
from atlas_pipeline.core.redaction import redact
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import (
    LLM_BATCHES,
    llm_batch_path,
    llm_batch_ready_path,
    llm_batch_request_path,
    llm_cache_path,
)

LOG = logging.getLogger("atlas.llm")
ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
ENDED = ("completed", "expired", "failed", "cancelled")
RETRIED_STATUS = (408, 409, 429)  # and every 5xx: asked again in the next batch
MAX_BATCH_BYTES = 150_000_000  # OpenAI takes input files up to 200 MB
REQUEUED_BATCH_ERRORS = ("token_limit_exceeded",)  # the endpoint's queue was full: the batch is worth sending again


@dataclass
class PollReport:
    """What one look at the endpoint found."""

    submitted: list[str] = field(default_factory=list)  # batch ids created now
    open: dict[str, str] = field(default_factory=dict)  # batch id → its status and counts
    answered: int = 0
    requeued: int = 0
    failed: int = 0
    overdue: int = 0  # requests of batches past the local deadline: sent directly at their documents' next run
    ready: set[str] = field(default_factory=set)  # documents with new answers: to be run again
    problems: list[str] = field(default_factory=list)  # what could not be done this time (tried again next time)

    def summary(self) -> str:
        parts = [f"{len(self.open)} batch(es) at the endpoint"]
        parts += [f"{batch}: {state}" for batch, state in self.open.items()]
        if self.submitted:
            parts.append(f"submitted {', '.join(self.submitted)}")
        if self.answered or self.requeued or self.failed:
            parts.append(f"{self.answered} answer(s) in, {self.requeued} queued again, {self.failed} refused")
        if self.overdue:
            parts.append(f"{self.overdue} request(s) of overdue batches to be sent directly")
        if self.ready:
            parts.append(f"{len(self.ready)} document(s) ready to grade")
        return "; ".join(parts + self.problems)


class BatchQueue:
    """The Batch API queue of one artifact store."""

    def __init__(self, store: Store, deadline_hours: float = 26.0) -> None:
        self.store = store
        self.deadline_hours = deadline_hours  # the endpoint's 24 h window and a margin: then given up here

    # -- the extraction side ------------------------------------------------------------------------------------
    def enqueue(self, key: str, body: dict[str, Any], document: str) -> str:
        """Queue a request for the next batch (once: a request already queued or sent only learns one more document
        waiting for it). Where it stands: ``queued`` or the batch id."""
        for state in ("queued", "sent"):
            path = llm_batch_request_path(state, key)
            entry = self.store.read_json_or(path, None)
            if entry is not None:
                if document not in entry["documents"]:
                    entry["documents"].append(document)
                    self.store.write_json(path, entry)
                return "queued" if state == "queued" else entry["batch"]
        entry = {"key": key, "body": body, "documents": [document], "queued_at": now_iso()}
        self.store.write_json(llm_batch_request_path("queued", key), entry)
        return "queued"

    def take_failure(self, key: str) -> tuple[str, bool] | None:
        """Why the batch gave this request up, and whether it is to be sent directly instead (a batch past the local
        deadline) — once: the next ask queues it again."""
        path = llm_batch_request_path("failed", key)
        entry = self.store.read_json_or(path, None)
        if entry is None:
            return None
        self.store.delete(path)
        return entry["reason"], bool(entry.get("direct"))

    def queued(self) -> list[str]:
        return self._keys("queued")

    def open_batches(self) -> list[dict[str, Any]]:
        records = (self.store.read_json(path) for path in self.store.files(f"{LLM_BATCHES}/batches"))
        return [record for record in records if record.get("status") not in (*ENDED, "lost", "overdue")]

    def _keys(self, state: str) -> list[str]:
        prefix = f"{LLM_BATCHES}/{state}/"
        return [path[len(prefix) : -len(".json")] for path in self.store.files(prefix.rstrip("/"))]

    # -- the endpoint side ----------------------------------------------------------------------------------------
    def submit(self, client: openai.OpenAI, report: PollReport, max_requests: int = 50_000) -> None:
        """Send the queued requests as batches of at most ``max_requests`` and ``MAX_BATCH_BYTES``. A batch the
        endpoint refuses (a 4xx) fails its requests with the endpoint's words; any other error is raised (the
        requests stay queued for the next look)."""
        group: list[tuple[dict[str, Any], str]] = []
        size = 0
        for key in self.queued():
            entry = self.store.read_json_or(llm_batch_request_path("queued", key), None)
            if entry is None:
                continue
            line = json.dumps({"custom_id": entry["key"], "method": "POST", "url": ENDPOINT, "body": entry["body"]})
            if group and (len(group) >= max_requests or size + len(line) + 1 > MAX_BATCH_BYTES):
                self._send(client, group, report)
                group, size = [], 0
            group.append((entry, line))
            size += len(line) + 1
        if group:
            self._send(client, group, report)

    def _send(self, client: openai.OpenAI, group: list[tuple[dict[str, Any], str]], report: PollReport) -> None:
        entries = [entry for entry, _ in group]
        try:
            data = "\n".join(line for _, line in group).encode()
            upload = client.files.create(file=("atlas-batch.jsonl", data), purpose="batch")
            batch = client.batches.create(
                input_file_id=upload.id, endpoint=ENDPOINT, completion_window=COMPLETION_WINDOW
            )
        except openai.APIStatusError as error:
            if error.status_code in RETRIED_STATUS or error.status_code >= 500:
                raise
            message = f"the Batch API refused the batch (HTTP {error.status_code}): {error.message}"
            for entry in entries:
                self._record(entry, "queued", "failed", {"reason": redact(message), "at": now_iso()}, report)
                report.failed += 1
            return
        documents = sorted({document for entry in entries for document in entry["documents"]})
        record = {
            "id": batch.id,
            "input_file_id": upload.id,
            "status": batch.status,
            "keys": [entry["key"] for entry in entries],
            "documents": documents,
            "submitted_at": now_iso(),
        }
        self.store.write_json(llm_batch_path(batch.id), record)
        for entry in entries:
            self._record(entry, "queued", "sent", {**entry, "batch": batch.id, "sent_at": record["submitted_at"]})
        LOG.info("Batch API: submitted %s: %d request(s), %d document(s)", batch.id, len(entries), len(documents))
        report.submitted.append(batch.id)
        report.open[batch.id] = f"{batch.status} 0/{len(entries)}"

    def _record(
        self, entry: dict[str, Any], old: str, new: str, value: dict[str, Any], report: PollReport | None = None
    ) -> None:
        """Move a request from state ``old`` to ``new`` keeping every document that waits for it (one may have
        joined since it was read); documents told when it failed for good."""
        current = self.store.read_json_or(llm_batch_request_path(old, entry["key"]), None) or entry
        documents = sorted(set(entry["documents"]) | set(current.get("documents", [])))
        if new != "failed":
            value = {**value, "documents": documents}
        self.store.write_json(llm_batch_request_path(new, entry["key"]), value)
        self.store.delete(llm_batch_request_path(old, entry["key"]))
        if new == "failed" and report is not None:
            self._mark_ready(documents, report)

    def _mark_ready(self, documents: list[str], report: PollReport) -> None:
        """These documents have something new to read: kept in the store until their run has read it."""
        for document in documents:
            self.store.write_json(llm_batch_ready_path(document), {"document": document, "at": now_iso()})
        report.ready.update(documents)

    def ready(self) -> dict[str, str]:
        """Documents with answers (or refusals) not read yet → when they arrived."""
        marks = {}
        for path in self.store.files(f"{LLM_BATCHES}/ready"):
            mark = self.store.read_json_or(path, None)
            if mark is not None:
                marks[mark["document"]] = mark["at"]
        return marks

    def read(self, document: str) -> None:
        """The document ran since its answers came: nothing new for it."""
        self.store.delete(llm_batch_ready_path(document))

    def poll(self, client: openai.OpenAI, model: str, report: PollReport) -> None:
        """Look at every open batch; take in the answers of those that ended. A batch that cannot be read now is
        looked at again next time (said in ``report.problems``)."""
        for record in self.open_batches():
            try:
                self._poll_one(client, record, model, report)
            except openai.NotFoundError:  # gone at the endpoint: its requests go out again
                for key in record["keys"]:
                    self._requeue(key, report)
                record["status"], record["ended_at"] = "lost", now_iso()
                self.store.write_json(llm_batch_path(record["id"]), record)
            except (openai.APIError, ValueError) as error:
                report.problems.append(f"{record['id']}: {redact(str(error))[:200]}")

    def _poll_one(self, client: openai.OpenAI, record: dict[str, Any], model: str, report: PollReport) -> None:
        batch = client.batches.retrieve(record["id"])
        counts = batch.request_counts
        state = batch.status + (f" {counts.completed}/{counts.total}" if counts is not None else "")
        record["status"] = batch.status
        record["checked_at"] = now_iso()
        if batch.status not in ENDED and self._overdue(record):
            self._give_up(client, record, state, report)
            return
        if batch.status not in ENDED:
            report.open[batch.id] = state
            self.store.write_json(llm_batch_path(batch.id), record)
            return
        seen: set[str] = set()
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                for line in client.files.content(file_id).text.splitlines():
                    if line.strip():
                        try:
                            seen.add(self._take_line(json.loads(line), model, report))
                        except (ValueError, KeyError, TypeError, AttributeError) as error:
                            report.problems.append(f"{batch.id}: a line not understood ({error})")
        errors = _batch_errors(batch)
        for key in record["keys"]:
            if key in seen:
                continue  # no line for it: the batch failed, expired before it or was cancelled
            if batch.status == "expired" or any(code in errors for code in REQUEUED_BATCH_ERRORS):
                self._requeue(key, report)
            else:
                self._fail(key, errors or f"the batch ended {batch.status} without an answer", report)
        record["ended_at"] = now_iso()
        self.store.write_json(llm_batch_path(batch.id), record)

    def _overdue(self, record: dict[str, Any]) -> bool:
        try:
            sent = datetime.fromisoformat(record["submitted_at"])
        except (KeyError, TypeError, ValueError):
            return False
        return (utc_now() - sent).total_seconds() > self.deadline_hours * 3600

    def _give_up(self, client: openai.OpenAI, record: dict[str, Any], state: str, report: PollReport) -> None:
        """A batch past the local deadline: cancelled at the endpoint if it lets us, its requests sent directly."""
        try:
            client.batches.cancel(record["id"])
        except openai.APIError as error:  # it may not support cancelling: given up here all the same
            report.problems.append(f"{record['id']}: could not be cancelled ({redact(str(error))[:120]})")
        reason = (
            f"the Batch API did not end batch {record['id']} within ATLAS_LLM_BATCH_DEADLINE_HOURS="
            f"{self.deadline_hours:g} ({state}): its requests are sent directly"
        )
        LOG.warning("Batch API: %s", reason)
        for key in record["keys"]:
            sent = self.store.read_json_or(llm_batch_request_path("sent", key), None)
            if sent is not None:
                self._record(sent, "sent", "failed", {"reason": reason, "direct": True, "at": now_iso()}, report)
                report.overdue += 1
        record["status"], record["ended_at"] = "overdue", now_iso()
        self.store.write_json(llm_batch_path(record["id"]), record)
        report.problems.append(reason)

    def _take_line(self, line: dict[str, Any], model: str, report: PollReport) -> str:
        key = line.get("custom_id") or ""
        sent = self.store.read_json_or(llm_batch_request_path("sent", key), None)
        if sent is None:
            return key  # not ours, or taken in already
        response = line.get("response") or {}
        status = int(response.get("status_code") or 0)
        body = response.get("body") or {}
        error = line.get("error") or (body.get("error") if isinstance(body, dict) else None)
        if status == 200 and not error:
            self._answer(key, body, sent, model)
            report.answered += 1
            self._mark_ready(sent["documents"], report)
            self.store.delete(llm_batch_request_path("sent", key))
            return key
        code = (error or {}).get("code") if isinstance(error, dict) else None
        message = (error or {}).get("message") if isinstance(error, dict) else str(error or "")
        if code == "batch_expired" or status in RETRIED_STATUS or status >= 500:
            self._requeue(key, report)
        else:
            self._fail(key, f"the Batch API refused the request (HTTP {status or code}): {message}", report)
        return key

    def _answer(self, key: str, body: dict[str, Any], sent: dict[str, Any], model: str) -> None:
        """The answer into the LLM cache, as a request sent now would have put it (its tokens, and that it came at
        the batch price)."""
        usage = body.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        spent = {
            "prompt_tokens": int(usage.get("prompt_tokens") or 0),
            "completion_tokens": int(usage.get("completion_tokens") or 0),
            "cached_tokens": int(details.get("cached_tokens") or 0),
        }
        choice = (body.get("choices") or [{}])[0]
        entry: dict[str, Any] = {"model": model, "usage": spent, "batch": sent["batch"], "unread": True}
        if choice.get("finish_reason") == "length":
            limit = sent["body"].get("max_tokens", 0)
            entry |= {"cut": f"the answer was cut at ATLAS_LLM_MAX_TOKENS={limit} tokens (finish_reason length)"}
            entry["max_tokens"] = limit
        else:
            entry["content"] = redact((choice.get("message") or {}).get("content") or "")  # an echoed key: never kept
        self.store.write_json(llm_cache_path(key), entry)

    def _requeue(self, key: str, report: PollReport) -> None:
        sent = self.store.read_json_or(llm_batch_request_path("sent", key), None)
        if sent is None:
            return
        queued = {name: sent[name] for name in ("key", "body", "documents")} | {"queued_at": now_iso()}
        self._record(sent, "sent", "queued", queued)
        report.requeued += 1

    def _fail(self, key: str, reason: str, report: PollReport) -> None:
        sent = self.store.read_json_or(llm_batch_request_path("sent", key), None)
        if sent is None:
            return
        self._record(sent, "sent", "failed", {"reason": redact(reason), "at": now_iso()}, report)
        report.failed += 1


def _batch_errors(batch: Any) -> str:
    errors = getattr(batch, "errors", None)
    data = getattr(errors, "data", None) or []
    return "; ".join(f"{getattr(e, 'code', '')}: {getattr(e, 'message', '')}" for e in data[:3])
