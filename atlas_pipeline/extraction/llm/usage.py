"""What requests to the endpoint cost: requests sent, answers read from the cache, tokens, retries, time waited and
money — returned with every answer and carried by every error."""

from __future__ import annotations

from dataclasses import dataclass, fields


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
        for item in fields(self):
            setattr(self, item.name, getattr(self, item.name) + getattr(other, item.name))

    def spent(self) -> dict[str, int]:
        """The tokens an answer cost, as its cache entry keeps them."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cached_tokens": self.cached_tokens,
        }
