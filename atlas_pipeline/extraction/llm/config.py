"""One endpoint and model, as the client is given them (the ``ATLAS_LLM_*`` settings, read by the Deployment)."""

from __future__ import annotations

from dataclasses import dataclass, field

from atlas_pipeline.config.settings import StructuredOutput, setting_default


@dataclass
class LLMConfig:
    """One endpoint and model. The defaults are the ``ATLAS_LLM_*`` settings' (defined there once)."""

    base_url: str
    model: str = field(default=setting_default("llm_model"))
    api_key: str = field(repr=False, default="")
    timeout_seconds: float = field(default=setting_default("llm_timeout_seconds"))
    deadline_seconds: float = field(default=setting_default("llm_deadline_seconds"))
    max_answer_bytes: int = field(default=setting_default("llm_max_answer_bytes"))
    max_retries: int = field(default=setting_default("llm_max_retries"))
    backoff_seconds: float = field(default=setting_default("llm_backoff_seconds"))
    structured_output: StructuredOutput = field(default=setting_default("llm_structured_output"))
    max_tokens: int = field(default=setting_default("llm_max_tokens"))
    concurrency: int = field(default=setting_default("llm_concurrency"))
    requests_per_minute: int = field(default=setting_default("llm_requests_per_minute"))
    tokens_per_minute: int = field(default=setting_default("llm_tokens_per_minute"))
    gate_dir: str = field(default=setting_default("llm_gate_dir"))


def estimate_tokens(messages: list[dict[str, str]]) -> int:
    """A prompt's tokens before it is sent: characters / 4 (English text with JSON), rounded up."""
    return -(-sum(len(message.get("content") or "") for message in messages) // 4)
