"""One endpoint and model, as the client is given them. The defaults are defined here, once: the ``ATLAS_LLM_*``
settings take theirs from this class (``config.settings``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

StructuredOutput = Literal["json_schema", "json_object_schema", "json_object"]


@dataclass
class LLMConfig:
    """One endpoint and model, and how the client may use it (timeouts, retries, requests in flight, budgets)."""

    base_url: str
    model: str = "gpt-4o-mini"
    api_key: str = field(repr=False, default="")
    timeout_seconds: float = 120.0  # one read: connecting, the first byte, each later read
    deadline_seconds: float = 600.0  # the whole answer of one request
    max_answer_bytes: int = 16_000_000
    max_retries: int = 4
    backoff_seconds: float = 2.0
    structured_output: StructuredOutput = "json_schema"
    max_tokens: int = 4096
    concurrency: int = 8  # requests in flight across every run and process (on PostgreSQL: every machine)
    requests_per_minute: int = 0  # 0: no budget
    tokens_per_minute: int = 0
    gate_dir: str = ""  # the lock files of the concurrency gate (empty: the system's temp folder)
    gate_url: str = field(repr=False, default="")  # a PostgreSQL database holding the gate for every machine


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """A prompt's tokens before it is sent: characters / 4 (English text with JSON), rounded up."""
    return -(-sum(len(message.get("content") or "") for message in messages) // 4)
