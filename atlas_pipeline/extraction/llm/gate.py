"""How many requests go to one endpoint at once, and how fast: a limiter shared by every process of this machine.

Why a shared limiter and not a Dagster pool: a pool counts *steps*, and one step may hold many requests (a batched
run's documents, a long document's chunks, the parts of an answer that did not fit) or none (a document answered from
the cache). The gate counts requests themselves, wherever they are sent from — the daemon's runs, ``atlas run`` and
its worker processes, a Celery worker, a notebook — so the endpoint sees at most ``limit`` at once.

How: ``limit`` slot files in a directory per endpoint (``$TMPDIR/atlas-llm-gate-<uid>/<endpoint hash>``); a request
holds an ``flock`` on one slot while it is in flight. The kernel releases a lock when its process dies, so a killed
run never leaks a slot. A small state file (under its own lock) holds what every sender must respect:

- an adaptive *window* (additive increase, multiplicative decrease): a 429 or a ``Retry-After`` halves it (once per
  second, however many senders were refused together) and pauses every sender for the time the server asked; each
  request sent since then and answered adds ``1/window``, so the window grows back by one slot per window of
  answers, up to ``limit``;
- optional budgets: requests per minute and tokens per minute over the last 60 seconds (a request's tokens are
  estimated when it is sent and corrected when its answer says what it cost).

Where: lock files are local to a machine. On PostgreSQL (``LLMConfig.gate_url``: the Dagster instance's database by
default, ``ATLAS_LLM_GATE``) the slots are session advisory locks and the state a row under a transaction's advisory
lock (``PostgresGateStorage``): every process on every machine that uses the database shares one cap, and a lock is
released by the server when its holder's connection ends — a killed run at once, a lost machine within about a
minute (TCP keepalives) — as the kernel does for a file lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import stat
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

DECREASE_EVERY_SECONDS = 1.0  # senders refused together halve the window once
POLL_SECONDS = (0.02, 0.25)  # waiting for a free slot: first and longest pause between looks
MINUTE = 60.0


def gate_name(base_url: str, model: str) -> str:
    """One gate per endpoint and model (a trailing slash is the same endpoint)."""
    return hashlib.sha256(f"{base_url.rstrip('/')}\n{model}".encode()).hexdigest()[:16]


def gate_directory(base_url: str, model: str, root: str | None = None) -> Path:
    """The slots of one endpoint and model, shared by every process of this user on this machine (the default
    folder in ``$XDG_RUNTIME_DIR`` or the temp folder must be this user's own: another user's could pause us)."""
    name = gate_name(base_url, model)
    if root:
        return Path(root) / name
    base = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"atlas-llm-gate-{os.getuid()}"
    base.mkdir(mode=0o700, exist_ok=True)
    info = base.lstat()
    if info.st_uid != os.getuid() or not stat.S_ISDIR(info.st_mode) or info.st_mode & 0o022:
        raise PermissionError(f"{base} is not a private folder of this user: set ATLAS_LLM_GATE_DIR to one")
    return base / name


@dataclass
class GateState:
    """What every sender reads before sending: the window, a pause, and the last minute's requests."""

    window: float
    paused_until: float = 0.0
    last_decrease: float = 0.0
    sent: list[list[float]] = field(default_factory=list)  # [time, tokens] of the last minute's requests
    corrections: list[list[float]] = field(default_factory=list)  # [time, tokens] answers cost beyond estimates


@dataclass
class Waited:
    """Why and how long a sender waited before its request went out (for the run's log and the benchmark)."""

    seconds: float = 0.0
    reasons: set[str] = field(default_factory=set)


class GateStorage(Protocol):
    """Where a gate keeps its slots and its state: the files of a folder (one machine) or a PostgreSQL database
    (every machine that uses it)."""

    def transaction(self) -> contextlib.AbstractContextManager[tuple[str, Callable[[str], None]]]:
        """The state's text ("" when there is none) under a lock every sender takes, and how to write it back."""
        ...

    def take(self, window: int) -> tuple[int, object] | None:
        """Hold the first free slot below ``window`` (its number, and what releases it), or None."""
        ...

    def release(self, held: object) -> None: ...


class FileGateStorage:
    """Slots as ``flock``-ed files of a folder, the state a JSON file under its own lock: this machine's processes."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._state_path = directory / "state.json"
        self._lock_path = directory / "state.lock"

    @contextlib.contextmanager
    def transaction(self) -> Iterator[tuple[str, Callable[[str], None]]]:
        def write(text: str) -> None:
            temporary = self._state_path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
            temporary.write_text(text)
            os.replace(temporary, self._state_path)

        with open(self._lock_path, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                try:
                    raw = self._state_path.read_text()
                except OSError:
                    raw = ""
                yield raw, write
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def take(self, window: int) -> tuple[int, object] | None:
        for number in range(max(1, window)):
            handle = open(self.directory / f"slot-{number}", "a")  # noqa: SIM115 - held until the request ends
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.close()
                continue
            return number, handle
        return None

    def release(self, held: object) -> None:
        fcntl.flock(held, fcntl.LOCK_UN)
        held.close()


class RequestGate:
    """At most ``limit`` requests in flight to one endpoint, slowed together when it says so."""

    def __init__(
        self,
        directory: Path | None,
        limit: int,
        requests_per_minute: int = 0,
        tokens_per_minute: int = 0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        storage: GateStorage | None = None,
    ) -> None:
        """``directory``: the slots' folder on this machine; or ``storage`` (e.g. ``PostgresGateStorage``)."""
        if limit < 1:
            raise ValueError("a gate needs at least one slot")
        if storage is None and directory is None:
            raise ValueError("a gate needs a folder or a storage")
        self.storage = storage or FileGateStorage(directory)
        self.limit = limit
        self.requests_per_minute = requests_per_minute
        self.tokens_per_minute = tokens_per_minute
        self.clock = clock
        self.sleep = sleep

    # -- the shared state ---------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _state(self) -> Iterator[GateState]:
        """The state under its lock; written back when the block changed it (waiting senders only read)."""
        with self.storage.transaction() as (raw, write):
            try:
                state = GateState(**json.loads(raw)) if raw else GateState(window=float(self.limit))
            except (ValueError, TypeError):
                raw, state = "", GateState(window=float(self.limit))
            state.window = max(1.0, min(state.window, float(self.limit)))  # the limit may have changed
            now = self.clock()
            state.sent = [entry for entry in state.sent if now - entry[0] < MINUTE]
            state.corrections = [entry for entry in state.corrections if now - entry[0] < MINUTE]
            yield state
            written = json.dumps(state.__dict__)
            if written != raw:
                write(written)

    def window(self) -> float:
        with self._state() as state:
            return state.window

    def _budget_wait(self, state: GateState, tokens: int, now: float) -> tuple[float, str]:
        if state.paused_until > now:
            return state.paused_until - now, "the endpoint asked to slow down"
        if self.requests_per_minute and len(state.sent) >= self.requests_per_minute:
            return state.sent[-self.requests_per_minute][0] + MINUTE - now, "requests-per-minute budget"
        if self.tokens_per_minute and (state.sent or state.corrections):
            spent_at = sorted(state.sent + state.corrections)
            spent = sum(entry[1] for entry in spent_at)
            if spent + tokens > self.tokens_per_minute:
                running, until = spent, now
                for when, used in spent_at:  # wait until enough of the minute's tokens have aged out
                    running -= used
                    until = when + MINUTE
                    if running + tokens <= self.tokens_per_minute:
                        break
                return max(0.0, until - now), "tokens-per-minute budget"
        return 0.0, ""

    # -- sending ---------------------------------------------------------------------------------------------------
    @contextlib.contextmanager
    def slot(self, tokens: int = 0, waited: Waited | None = None) -> Iterator[int]:
        """Hold one slot while a request is in flight (``tokens``: its estimated size, for the tokens budget)."""
        waited = waited if waited is not None else Waited()
        pause = POLL_SECONDS[0]
        while True:
            with self._state() as state:
                now = self.clock()
                wait, reason = self._budget_wait(state, tokens, now)
                held = None if wait > 0 else self.storage.take(int(state.window))
                if held is not None:
                    state.sent.append([now, float(tokens)])
            if held is not None:
                break
            if wait <= 0:
                wait, reason = pause, "all slots in flight"
                pause = min(pause * 2, POLL_SECONDS[1])
            waited.seconds += wait
            waited.reasons.add(reason)
            self.sleep(wait)
        number, handle = held
        try:
            yield number
        finally:
            self.storage.release(handle)

    def answered(self, estimated: int = 0, used: int = 0, sent_at: float | None = None) -> None:
        """A request was answered: the window grows by ``1/window`` (not for a request sent before the last
        slow-down: its answer says nothing about the smaller window); its tokens replace the estimate."""
        with self._state() as state:
            if sent_at is None or sent_at >= state.last_decrease:
                state.window = min(float(self.limit), state.window + 1.0 / state.window)
            if used > estimated and self.tokens_per_minute:
                state.corrections.append([self.clock(), float(used - estimated)])

    def throttled(self, retry_after: float | None, sent_at: float | None = None) -> float:
        """The endpoint refused a request for its rate (429) or asked to wait: every sender pauses for what it
        asked and the window halves — once for senders refused together, and not again for a request sent before
        the last halving (it was refused for the window before). The window now."""
        with self._state() as state:
            now = self.clock()
            fresh = sent_at is None or sent_at >= state.last_decrease
            if fresh and now - state.last_decrease >= DECREASE_EVERY_SECONDS:
                state.window = max(1.0, state.window / 2)
                state.last_decrease = now
            if retry_after:
                state.paused_until = max(state.paused_until, now + retry_after)
            return state.window
