"""Failed logins to the review page, counted per account name and per client address, with a wait that doubles.

Why: a password is checked in about 50 ms, so without a limit a script tries tens of thousands an hour against one
account, or one common password against every account. Here the first few failures are free (a typo costs nothing);
after them every further attempt for that account, or from that address, is refused until a wait has passed — 1 s,
then 2, 4, 8 … up to a cap — and the password is not even looked at while it is refused (the right one included).
A login that succeeds clears the account's and the address's counts.

An attempt is counted as a failure when it starts and cleared if it succeeds, so a hundred guesses sent at once get
no more password checks than a hundred sent one by one.

Kept in memory, like the sessions (restarting ``atlas review`` forgets them), and bounded: a count is forgotten once
it has been quiet for ``forget_after`` seconds past its wait, and at most ``max_keys`` accounts and addresses are
tracked (the expired let go first, then the longest quiet). Plain Python, no web framework: the page asks it before
checking a password and tells it how the check went.
"""

from __future__ import annotations

import math
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["account", "address"]
Key = tuple[Kind, str]
MAX_NAME_CHARS = 120  # an account name is at most this long: a longer one is counted under its first 120 characters
_MAX_DOUBLINGS = 40  # 2**40 s is far past any cap: no float overflow however many failures


def account_key(name: str) -> Key:
    """The account a login names, as ``authenticate`` looks it up (spaces collapsed, NFC): "Ana  Lima" is Ana Lima."""
    return ("account", unicodedata.normalize("NFC", " ".join(name.split()))[:MAX_NAME_CHARS])


def address_key(address: str) -> Key:
    return ("address", address[:64])


@dataclass(frozen=True)
class Lockout:
    """An attempt refused: which account or address is locked, for how many more seconds, and whether this is the
    first refusal of this wait (the page logs that one as a warning, the rest quietly)."""

    kind: Kind
    who: str
    seconds: float
    first: bool = True

    @property
    def retry_after(self) -> int:
        """Whole seconds for the Retry-After header (at least 1)."""
        return max(1, math.ceil(self.seconds))


@dataclass
class _Count:
    failures: int = 0
    last: float = 0.0  # clock time of the latest counted attempt
    told: bool = False  # a refusal of the current wait has been reported


class LoginGuard:
    """Failed logins per account and per address, with exponential backoff after ``free_failures``."""

    def __init__(
        self,
        *,
        free_failures: int = 5,
        first_wait: float = 1.0,
        max_wait: float = 900.0,
        forget_after: float | None = None,
        max_keys: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if free_failures < 1 or first_wait <= 0 or max_wait <= 0 or max_keys < 2:
            raise ValueError("free_failures ≥ 1, first_wait and max_wait > 0, max_keys ≥ 2")
        self.free_failures = free_failures
        self.first_wait = first_wait
        self.max_wait = max_wait
        self.forget_after = max_wait if forget_after is None else forget_after
        self.max_keys = max_keys
        self.clock = clock
        self._counts: OrderedDict[Key, _Count] = OrderedDict()  # least recently counted first
        self._lock = threading.Lock()

    def wait_after(self, failures: int) -> float:
        """Seconds an account or address waits after ``failures`` failures in a row (0 while they are free)."""
        if failures < self.free_failures:
            return 0.0
        return min(self.max_wait, self.first_wait * 2 ** min(failures - self.free_failures, _MAX_DOUBLINGS))

    def attempt(self, keys: Iterable[Key]) -> Lockout | None:
        """Before a password is checked: the lockout that refuses it (the longest, when several keys are locked), or
        None — the attempt is then counted as a failure for every key until ``succeeded`` clears them."""
        keys = list(dict.fromkeys(keys))
        with self._lock:
            now = self.clock()
            locked: list[tuple[float, Key, _Count]] = []
            for key in keys:
                count = self._current(key, now)
                if count is not None:
                    left = count.last + self.wait_after(count.failures) - now
                    if left > 0:
                        locked.append((left, key, count))
            if locked:
                left, key, count = max(locked, key=lambda item: item[0])
                first = not count.told
                count.told = True
                return Lockout(key[0], key[1], left, first)
            for key in keys:
                count = self._current(key, now) or self._new(key, now)
                count.failures += 1
                count.last = now
                count.told = False
                self._counts.move_to_end(key)
            return None

    def failed(self, keys: Iterable[Key]) -> list[tuple[Key, int, float]]:
        """The password was wrong (the attempt is already counted): per key, its failures in a row and the wait they
        now impose (0 while free) — for the log."""
        with self._lock:
            now = self.clock()
            told = []
            for key in dict.fromkeys(keys):
                count = self._current(key, now)
                if count is not None:
                    told.append((key, count.failures, max(0.0, count.last + self.wait_after(count.failures) - now)))
            return told

    def failures(self, key: Key) -> int:
        """The failures in a row counted for ``key`` (0 when none, or forgotten)."""
        with self._lock:
            count = self._current(key, self.clock())
            return count.failures if count is not None else 0

    def locked_for(self, key: Key) -> float:
        """Seconds before ``key`` may try again (0: now)."""
        with self._lock:
            now = self.clock()
            count = self._current(key, now)
            return max(0.0, count.last + self.wait_after(count.failures) - now) if count is not None else 0.0

    def succeeded(self, keys: Iterable[Key]) -> None:
        """The password was right: these keys start again from no failure."""
        with self._lock:
            for key in keys:
                self._counts.pop(key, None)

    def __len__(self) -> int:
        return len(self._counts)

    def _expired(self, count: _Count, now: float) -> bool:
        return now >= count.last + self.wait_after(count.failures) + self.forget_after

    def _current(self, key: Key, now: float) -> _Count | None:
        count = self._counts.get(key)
        if count is not None and self._expired(count, now):
            del self._counts[key]
            return None
        return count

    def _new(self, key: Key, now: float) -> _Count:
        if len(self._counts) >= self.max_keys:
            for stale in [k for k, count in self._counts.items() if self._expired(count, now)]:
                del self._counts[stale]
            while len(self._counts) >= self.max_keys:
                self._counts.popitem(last=False)  # the longest quiet goes
        count = self._counts[key] = _Count()
        return count
