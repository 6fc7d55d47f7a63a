"""The one clock Atlas reads: UTC, as ISO 8601 text — to the second for what a person reads, to the microsecond
where records written in the same second must keep their order (decisions, catalog entries)."""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now() -> datetime:
    return datetime.now(UTC)


def now_iso() -> str:
    """Now, to the second (``2026-11-27T09:30:00+00:00``)."""
    return utc_now().isoformat(timespec="seconds")


def now_stamp() -> str:
    """Now, to the microsecond: orders records made in the same second."""
    return utc_now().isoformat(timespec="microseconds")
