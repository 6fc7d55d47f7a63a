"""Adaptive pace: collection slows down while the extraction backlog is long and speeds up when it drains — within
bounds, and never faster than a domain's minimum interval."""

from __future__ import annotations

FASTEST = 0.5  # an empty backlog: feeds are read twice as often
SLOWEST = 8.0  # a backlog of 8× the threshold or more: eight times slower


def pace_factor(backlog: int, threshold: int) -> float:
    """Multiplier of the poll interval: ``FASTEST`` with nothing waiting, 1 up to ``threshold`` waiting, then
    ``backlog / threshold`` up to ``SLOWEST``."""
    if backlog <= 0:
        return FASTEST
    return min(SLOWEST, max(1.0, backlog / max(1, threshold)))


def domain_interval(minimum: float, factor: float) -> float:
    """Seconds between two requests to one domain: the minimum, stretched when the pace slows, never shortened."""
    return minimum * max(1.0, factor)


def items_per_tick(maximum: int, factor: float) -> int:
    return max(1, int(maximum / max(1.0, factor)))
