"""Asking an OpenAI-compatible endpoint, one room per concern:

- ``client``: what the extraction asks — an answer valid for the schema, from the cache or asked now, one repair.
- ``transport``: one request sent with manners — the gate, retries with backoff, the output format, the price.
- ``gate``: requests in flight and the endpoint's rate limits, shared by every process of the machine.
- ``bounded_http``: every answer ends within a deadline and a size.
- ``answers``: the response format, the bounded schema, a reply read as JSON, the repair request.
- ``cache``: answers kept by the request that asked for them.
- ``batch``: the Batch API queue.
- ``config``, ``usage``, ``errors``: the endpoint and model; what requests cost; how they fail.
"""

from __future__ import annotations

import importlib
from typing import Any

# where each public name lives: loaded when first asked for, so that importing the errors or the usage (as the
# statuses and the CLI do) never loads the openai client
_NAMES = {
    "LLMAnswer": "client",
    "LLMClient": "client",
    "LLMConfig": "config",
    "estimate_tokens": "config",
    "bounded": "answers",
    "cache_key": "cache",
    "Usage": "usage",
    "LLMError": "errors",
    "LLMAnswerCutError": "errors",
    "LLMPermanentError": "errors",
    "LLMQueuedError": "errors",
    "LLMResponseError": "errors",
    "LLMTransientError": "errors",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_NAMES[name]}"), name)
