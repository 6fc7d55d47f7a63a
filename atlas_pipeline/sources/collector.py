"""One collection pass of one source: read the feed when it is due (conditional GET), queue the new items, download
what the pace allows, write each document into the knowledge base with its provenance, and keep the source's health.

A failed request that may work later (a timeout, a server error, a network error, an unreadable feed) counts against
the source; after ``PAUSE_AFTER_FAILURES`` in a row the source is paused with the reason until a person resumes it
(``atlas sources resume NAME``). An item that cannot work (404, a file over the size limit, not a URL) is given up at
once with its reason and does not count against the source. An item URL robots.txt disallows is recorded as such and
never fetched — the site's wish, not a failure; a *feed* robots.txt disallows does count (the source cannot work).
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import time
from dataclasses import dataclass, field
from urllib.parse import unquote, urljoin, urlsplit

from atlas_pipeline.parsing.errors import DocumentError
from atlas_pipeline.parsing.media import HTML, IMAGE_TYPES, JATS, MARKDOWN, PDF, TEXT, detect_media_type
from atlas_pipeline.sources.config import Source
from atlas_pipeline.sources.http import DisallowedError, FetchError, PoliteClient, domain_of
from atlas_pipeline.sources.pace import domain_interval, items_per_tick, pace_factor
from atlas_pipeline.sources.politeness import Politeness
from atlas_pipeline.sources.state import (
    PAUSE_AFTER_FAILURES,
    Domains,
    Item,
    SourceState,
    load_domains,
    load_state,
    save_domains,
    save_state,
)
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import provenance_path

EXTENSIONS = {
    PDF: ".pdf",
    HTML: ".html",
    JATS: ".xml",
    MARKDOWN: ".md",
    TEXT: ".txt",
    **{image: "." + image.split("/")[1] for image in IMAGE_TYPES},
}
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


@dataclass
class PassReport:
    """What one pass did, for the sensor's tick and ``atlas sources collect``."""

    source: str
    polled: str = ""  # "", "new items", "not modified", or the failure
    queued: int = 0
    collected: list[str] = field(default_factory=list)  # knowledge-base paths written
    disallowed: int = 0
    failures: list[str] = field(default_factory=list)
    waiting: int = 0
    paused: str = ""
    pace: float = 1.0

    def summary(self) -> str:
        if self.paused:
            return f"{self.source}: {self.paused} — resume with `atlas sources resume {self.source}`"
        parts = [f"{self.source}:"]
        if self.polled:
            parts.append(f"feed {self.polled};")
        parts.append(f"{len(self.collected)} collected, {self.waiting} waiting")
        if self.queued:
            parts.append(f", {self.queued} new")
        if self.disallowed:
            parts.append(f", {self.disallowed} disallowed by robots.txt")
        if self.failures:
            parts.append(f", {len(self.failures)} failed ({self.failures[-1]})")
        if self.pace != 1.0:
            parts.append(f"; pace ×{self.pace:g}")
        return " ".join(parts).replace(" ,", ",")


def feed_items(body: bytes, base_url: str = "") -> list[tuple[str, str, str]]:
    """(id, document URL, title) of every entry of an RSS or Atom feed, in feed order. The document URL is a PDF
    enclosure or link when the entry has one, else its link, made absolute against ``base_url``. ``FetchError``
    when the body is not a feed (an HTML page at the feed's address, say)."""
    import feedparser  # only collectors need it

    parsed = feedparser.parse(body)
    if not parsed.version and not parsed.entries:
        why = type(parsed.bozo_exception).__name__ if parsed.bozo else "no RSS or Atom root element"
        raise FetchError(f"not a readable RSS/Atom feed ({why})")
    items = []
    for entry in parsed.entries:
        links = entry.get("links", [])
        pdf = next((link.get("href") for link in links if "pdf" in (link.get("type") or "")), None)
        url = pdf or entry.get("link") or next((link.get("href") for link in links), None)
        if not url:
            continue
        url = urljoin(base_url, str(url)) if base_url else str(url)
        items.append((str(entry.get("id") or url), url, str(entry.get("title") or "")))
    return items


def _file_name(url: str, title: str, media_type: str) -> str:
    stem = posixpath.splitext(posixpath.basename(unquote(urlsplit(url).path)))[0]
    if not stem or stem in ("index", "download", "pdf", "full", "fulltext"):
        stem = title or urlsplit(url).netloc
    stem = _SLUG.sub("-", stem).strip("-._")[:80] or "document"
    return stem + EXTENSIONS.get(media_type, ".bin")


def _document_path(kb: Store, source: Source, item: Item, body: bytes, sha: str, media_type: str) -> str:
    """Where the document goes: the target folder under a name from the URL; another file already there under that
    name keeps it (the new one gets its hash in the name); the same bytes already there are that path."""
    name = _file_name(item.url, item.title, media_type)
    path = f"{source.target}/{name}"
    if kb.exists(path) and hashlib.sha256(kb.read_bytes(path)).hexdigest() != sha:
        stem, extension = posixpath.splitext(name)
        path = f"{source.target}/{stem}-{sha[:10]}{extension}"
    return path


class Collector:
    """Collection passes of one source against one knowledge base and artifact store."""

    def __init__(self, source: Source, store: Store, knowledge_base: Store, politeness: Politeness) -> None:
        self.source = source
        self.store = store
        self.kb = knowledge_base
        self.politeness = politeness
        self._ends: float | None = None  # when the current pass must end (monotonic), if it has a budget

    def run(self, backlog: int = 0, now: float | None = None, budget_seconds: float | None = None) -> PassReport:
        """One pass. ``backlog``: documents waiting for extraction (runs queued or in progress); ``budget_seconds``:
        the pass ends by then (a sensor's tick must end well before Dagster's sensor timeout), the rest of the queue
        waiting for the next pass, every request's deadline cut to what is left."""
        now = time.time() if now is None else now
        self._ends = time.monotonic() + budget_seconds if budget_seconds else None
        state = load_state(self.store, self.source.name)
        report = PassReport(source=self.source.name)
        if state.paused:
            report.paused = state.paused_reason
            report.waiting = len(state.queue())
            return report
        factor = pace_factor(backlog, self.politeness.backlog_threshold)
        state.pace = report.pace = factor
        domains = load_domains(self.store)
        client = PoliteClient(
            self.politeness.user_agent,
            self.source.timeout_seconds,
            self.politeness.max_bytes,
            domains.robots,
            before_hop=lambda url: self._hop(domains, url, factor),
        )
        try:
            with client:
                self._poll(client, state, domains, report, factor, now)
                self._download(client, state, domains, report, factor)
        finally:
            save_state(self.store, self.source.name, state)
            save_domains(self.store, domains)
        report.waiting = len(state.queue())
        report.paused = state.paused_reason if state.paused else ""
        return report

    def _time_left(self, client: PoliteClient) -> bool:
        """Whether the pass may ask once more; the request's deadline then fits in what is left."""
        if self._ends is None:
            return True
        left = self._ends - time.monotonic()
        client.deadline_seconds = min(client.deadline_seconds, max(left, 1.0))
        return left > 1.0

    def _hop(self, domains: Domains, url: str, factor: float) -> None:
        """A redirect to another site: asked only when that site's pace allows, and counted as a request to it."""
        if not self._free(domains, url, factor):
            raise FetchError(f"redirected to {domain_of(url)}, which was asked too recently: tried again later")
        domains.last_request[domain_of(url)] = time.time()

    def _free(self, domains: Domains, url: str, factor: float) -> bool:
        interval = domain_interval(self.source.min_domain_interval_seconds, factor)
        return time.time() - domains.last_request.get(domain_of(url), 0.0) >= interval

    def _poll(
        self, client: PoliteClient, state: SourceState, domains: Domains, report: PassReport, factor: float, now: float
    ) -> None:
        if not self.source.feed:  # a list of URLs: every URL not seen yet is queued
            for url in self.source.urls:
                if url not in state.items:
                    state.items[url] = Item(url=url, found_at=now)
                    report.queued += 1
            return
        due = now - state.last_polled >= self.source.poll_minutes * 60 * factor
        if not due or not self._free(domains, self.source.feed, factor) or not self._time_left(client):
            return
        state.last_polled = now
        domains.last_request[domain_of(self.source.feed)] = time.time()
        try:
            answer = client.get(self.source.feed, state.etag, state.last_modified)
            if answer.not_modified:
                report.polled = "not modified"
            else:
                for item_id, url, title in feed_items(answer.body, answer.url):
                    if item_id not in state.items:
                        state.items[item_id] = Item(url=url, title=title, found_at=now)
                        report.queued += 1
                state.etag, state.last_modified = answer.etag, answer.last_modified
                report.polled = f"{report.queued} new item(s)"
            state.record_success(now)
        except FetchError as error:
            report.polled = f"failed: {error}"
            report.failures.append(str(error))
            state.record_failure(f"feed {error}")

    def _download(
        self, client: PoliteClient, state: SourceState, domains: Domains, report: PassReport, factor: float
    ) -> None:
        budget = items_per_tick(self.source.max_items_per_tick, factor)
        for _, item in state.queue():
            if budget <= 0 or state.paused or not self._time_left(client):
                return
            if not self._free(domains, item.url, factor):
                continue
            budget -= 1
            domains.last_request[domain_of(item.url)] = time.time()
            item.attempts += 1
            try:
                answer = client.get(item.url)
                media_type = detect_media_type(answer.body, urlsplit(answer.url).path)
            except DisallowedError as error:
                item.outcome, item.reason = "disallowed", str(error)
                report.disallowed += 1
                continue
            except DocumentError as error:
                item.outcome, item.reason = "not_a_document", str(error)
                state.record_success(time.time())  # the site answered: not the source's health
                continue
            except FetchError as error:
                report.failures.append(str(error))
                if error.permanent:  # a dead link or an oversize file: the item, not the source, is the problem
                    item.outcome, item.reason = "failed", str(error)
                    continue
                state.record_failure(str(error))
                if item.attempts >= PAUSE_AFTER_FAILURES:
                    item.outcome, item.reason = "failed", f"{item.attempts} attempts; last: {error}"
                continue
            if media_type not in EXTENSIONS:
                item.outcome, item.reason = "not_a_document", f"unsupported content ({media_type})"
                continue
            sha = hashlib.sha256(answer.body).hexdigest()
            path = _document_path(self.kb, self.source, item, answer.body, sha, media_type)
            collected_at = time.time()
            self.store.write_json(  # first: whoever reads the document finds where it came from
                provenance_path(sha),
                {
                    "source": self.source.name,
                    "url": item.url,
                    "final_url": answer.url,
                    "title": item.title,
                    "fetched_at": collected_at,
                    "path": path,
                    "content_type": answer.content_type,
                },
            )
            if not self.kb.exists(path):
                self.kb.write_bytes(path, answer.body)
            item.outcome, item.path, item.sha256, item.collected_at = "collected", path, sha, collected_at
            state.record_success(collected_at)
            report.collected.append(path)
