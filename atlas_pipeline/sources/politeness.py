"""What every collector request obeys: who we say we are, how much we fetch, when to slow down."""

from __future__ import annotations

from dataclasses import dataclass

USER_AGENT = "AtlasPipeline/0.1 (document collector for living systematic reviews; +https://github.com/atlas-pipeline)"


@dataclass(frozen=True, slots=True)
class Politeness:
    """What every request of a pass obeys (the ``ATLAS_SOURCES_*`` settings take their defaults from here)."""

    user_agent: str = USER_AGENT
    max_bytes: int = 200_000_000
    backlog_threshold: int = 50  # runs waiting or in progress above which collection slows down
