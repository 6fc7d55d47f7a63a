"""The request gate on PostgreSQL: one ``ATLAS_LLM_CONCURRENCY`` for every process on every machine of a deployment.

A slot is a session-level advisory lock (``pg_try_advisory_lock(gate, slot)``) held on a connection of its own while
its request is in flight; the server releases it when that connection ends, so a killed run or a lost worker never
keeps a slot. The gate's state (the adaptive window, a pause, the last minute's budgets) is a row of
``atlas_llm_gate``, read and written under a transaction-level advisory lock. psycopg2 comes with dagster-postgres.
"""

from __future__ import annotations

import contextlib
import hashlib
import threading
from collections.abc import Callable, Iterator

from atlas_pipeline.core.errors import AtlasError

TABLE = "atlas_llm_gate"
_TABLE_LOCK = int.from_bytes(hashlib.sha256(TABLE.encode()).digest()[:8], "big", signed=True)
STATE_SLOT = -1  # the state's lock: the gate's key with a slot number no request takes
# the server notices a lost client (a machine powered off, a network cut) within about a minute and ends its
# session, giving its slots back; without it, the operating system's default is two hours
KEEPALIVES = "-c tcp_keepalives_idle=30 -c tcp_keepalives_interval=10 -c tcp_keepalives_count=3"


class GateDatabaseError(AtlasError, OSError):
    """The gate's PostgreSQL database cannot be reached or used; the message says which and why."""


def libpq_url(url: str) -> str:
    """A SQLAlchemy URL (``postgresql+psycopg2://…``, what Dagster's instance gives) as libpq reads it."""
    scheme, _, rest = url.partition("://")
    return f"postgresql://{rest}" if scheme.startswith("postgres") else url


def _key(name: str) -> int:
    """The advisory lock's first key (int4) for a gate name."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big", signed=True)


class PostgresGateStorage:
    """Slots and state of one gate (``name``: endpoint and model) in the database at ``url``."""

    def __init__(self, url: str, name: str) -> None:
        self.url = libpq_url(url)
        self.name = name
        self.key = _key(name)
        self._state_lock = threading.Lock()  # the state's connection: one transaction at a time
        self._pool_lock = threading.Lock()  # the idle slot connections (taken inside a state transaction)
        self._idle: list = []
        self._most_idle = 1  # the largest window asked for: more idle connections than that are closed
        self._state_connection = None
        self._table_ready = False

    def _connect(self, autocommit: bool):
        import psycopg2

        try:
            connection = psycopg2.connect(
                self.url,
                connect_timeout=10,
                application_name="atlas-llm-gate",
                options=KEEPALIVES,
                keepalives=1,
                keepalives_idle=30,
                keepalives_interval=10,
                keepalives_count=3,
            )
        except psycopg2.Error as error:
            where = self.url.rsplit("@", 1)[-1]  # host, port and database: never the password
            raise GateDatabaseError(f"the LLM request gate's database {where} is not reachable: {error}") from None
        connection.autocommit = autocommit
        return connection

    @contextlib.contextmanager
    def transaction(self) -> Iterator[tuple[str, Callable[[str], None]]]:
        with self._state_lock:
            if self._state_connection is None or self._state_connection.closed:
                self._state_connection = self._connect(autocommit=False)
            connection = self._state_connection
            written: list[str] = []
            try:
                with connection.cursor() as cursor:
                    if not self._table_ready:  # once a process; two creating it at once would collide
                        cursor.execute("SELECT pg_advisory_xact_lock(%s)", (_TABLE_LOCK,))
                        cursor.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (name text PRIMARY KEY, state text)")
                    cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", (self.key, STATE_SLOT))
                    cursor.execute(f"SELECT state FROM {TABLE} WHERE name = %s", (self.name,))
                    row = cursor.fetchone()
                    yield (row[0] or "") if row else "", written.append
                    if written:
                        cursor.execute(
                            f"INSERT INTO {TABLE} (name, state) VALUES (%s, %s) "
                            "ON CONFLICT (name) DO UPDATE SET state = EXCLUDED.state",
                            (self.name, written[-1]),
                        )
                connection.commit()
                self._table_ready = True
            except BaseException:
                with contextlib.suppress(Exception):
                    connection.rollback()
                raise

    def take(self, window: int) -> tuple[int, object] | None:
        import psycopg2

        with self._pool_lock:
            connection = self._idle.pop() if self._idle else None
            self._most_idle = max(self._most_idle, window)
        for fresh in (connection is None or connection.closed, True):  # a pooled one may have been cut: once again
            if fresh:
                connection = self._connect(autocommit=True)
            try:
                with connection.cursor() as cursor:
                    for number in range(max(1, window)):
                        cursor.execute("SELECT pg_try_advisory_lock(%s, %s)", (self.key, number))
                        if cursor.fetchone()[0]:
                            return number, (connection, number)
                break
            except psycopg2.OperationalError:
                with contextlib.suppress(Exception):
                    connection.close()
                if fresh:
                    raise
        self._idle_again(connection)
        return None

    def _idle_again(self, connection) -> None:
        """Kept for the next request, up to the window's number of idle connections (the rest closed: a server
        allows few, 100 by default)."""
        with self._pool_lock:
            if len(self._idle) < self._most_idle:
                self._idle.append(connection)
                return
        connection.close()

    def release(self, held: object) -> None:
        connection, number = held
        try:
            with connection.cursor() as cursor:
                cursor.execute("SELECT pg_advisory_unlock(%s, %s)", (self.key, number))
        except Exception:  # a connection lost: the server released its lock with it
            with contextlib.suppress(Exception):
                connection.close()
            return
        self._idle_again(connection)
