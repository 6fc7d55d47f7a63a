"""What a request to the LLM endpoint ends with: what it cost (``Usage``: requests, cached answers, tokens, time
waited, money) or an error saying why it failed, safe to show (no secrets) and with what the failed attempt cost."""

from __future__ import annotations

from dataclasses import dataclass

from atlas_pipeline.config.redaction import redact


@dataclass
class Usage:
    """What requests cost: sent, answered from the cache, tokens (``cached_tokens``: the part of the prompt the
    endpoint read from its prompt cache, billed lower), retries, seconds spent waiting at the gate, and money."""

    calls: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    cached_tokens: int = 0
    waited_seconds: float = 0.0
    cost: float = 0.0  # of the requests sent (0 without a price: see LLMClient.price)
    reused_cost: float = 0.0  # of the answers read from the cache: what they cost when they were made

    def add(self, other: Usage) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


class LLMError(Exception):
    """The LLM step failed for good; ``reason`` is safe to show (no secrets)."""

    def __init__(self, reason: str) -> None:
        reason = redact(reason)  # an endpoint may echo the request, credentials included
        super().__init__(reason)
        self.reason = reason
        self.usage = Usage()  # what the failed attempt cost: requests sent, tokens answered


class LLMPermanentError(LLMError):
    """The endpoint refused the request (bad key, unknown model, bad request): retrying would not help."""


class LLMTransientError(LLMError):
    """The endpoint kept failing with retryable errors until the retries ran out."""


class LLMResponseError(LLMError):
    """The reply was not valid JSON for the schema, even after one repair request."""


class LLMQueuedError(LLMError):
    """Batch mode: the request is queued for (or in) a Batch API batch; the document waits for its answer."""


class LLMAnswerCutError(LLMError):
    """The endpoint stopped the answer at ``max_tokens`` (``finish_reason: "length"``): the question was too big for
    one answer, so it must be asked in parts."""
