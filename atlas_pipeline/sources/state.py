"""What a source remembers between ticks, kept in the artifact store (``store.layout``): feed validators, every item
seen and what became of it, the queue, consecutive failures and the pause — and, shared by every source, when each
domain was last asked and its robots.txt."""

from __future__ import annotations

from pydantic import BaseModel, Field

from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import SOURCE_DOMAINS_PATH, source_state_path

PAUSE_AFTER_FAILURES = 3


class Item(BaseModel):
    """One document a source offered: ``outcome`` is empty while it waits, else ``collected`` (with ``path``),
    ``disallowed`` (robots.txt), ``failed`` (after 3 attempts) or ``not_a_document``."""

    url: str
    title: str = ""
    found_at: float
    attempts: int = 0
    outcome: str = ""
    reason: str = ""
    path: str = ""
    sha256: str = ""
    collected_at: float = 0.0


class SourceState(BaseModel):
    etag: str = ""
    last_modified: str = ""
    last_polled: float = 0.0
    last_success: float = 0.0
    consecutive_failures: int = 0
    last_error: str = ""
    paused: bool = False
    paused_reason: str = ""
    pace: float = 1.0
    items: dict[str, Item] = Field(default_factory=dict)  # by feed entry id (or URL)

    def queue(self) -> list[tuple[str, Item]]:
        return [(key, item) for key, item in self.items.items() if not item.outcome]

    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for item in self.items.values():
            counts[item.outcome or "waiting"] = counts.get(item.outcome or "waiting", 0) + 1
        return counts

    def record_failure(self, reason: str) -> None:
        self.consecutive_failures += 1
        self.last_error = reason
        if self.consecutive_failures >= PAUSE_AFTER_FAILURES and not self.paused:
            self.paused = True
            self.paused_reason = f"paused after {self.consecutive_failures} consecutive failures; last: {reason}"

    def record_success(self, now: float) -> None:
        self.consecutive_failures = 0
        self.last_success = now


class Domains(BaseModel):
    """Shared by every source: when each domain was last asked, and the robots.txt texts read."""

    last_request: dict[str, float] = Field(default_factory=dict)
    robots: dict[str, tuple[str, float]] = Field(default_factory=dict)


def load_state(store: Store, name: str) -> SourceState:
    return SourceState.model_validate(store.read_json_or(source_state_path(name), {}))


def save_state(store: Store, name: str, state: SourceState) -> None:
    store.write_json(source_state_path(name), state.model_dump(mode="json"))


def load_domains(store: Store) -> Domains:
    return Domains.model_validate(store.read_json_or(SOURCE_DOMAINS_PATH, {}))


def save_domains(store: Store, domains: Domains) -> None:
    """Merge with what other sources wrote meanwhile: the latest request time and the newest robots.txt per domain."""
    current = load_domains(store)
    for domain, at in domains.last_request.items():
        current.last_request[domain] = max(at, current.last_request.get(domain, 0.0))
    for domain, (text, fetched) in domains.robots.items():
        if fetched > current.robots.get(domain, ("", 0.0))[1]:
            current.robots[domain] = (text, fetched)
    store.write_json(SOURCE_DOMAINS_PATH, current.model_dump(mode="json"))


def resume(store: Store, name: str) -> SourceState:
    """A person resumes a paused source: failures forgotten, failed items tried again."""
    state = load_state(store, name)
    state.paused = False
    state.paused_reason = ""
    state.consecutive_failures = 0
    for item in state.items.values():
        if item.outcome == "failed":
            item.outcome, item.attempts, item.reason = "", 0, ""
    save_state(store, name, state)
    return state
