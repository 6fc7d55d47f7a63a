"""What a request to the LLM endpoint fails with: an error saying why, safe to show (no secrets), with what the
failed attempt cost (``usage``, given when the error is made)."""

from __future__ import annotations

from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.core.redaction import redact
from atlas_pipeline.extraction.llm.usage import Usage


class LLMError(AtlasError):
    """The LLM step failed for good; ``reason`` is safe to show (no secrets); ``usage``: what it cost."""

    def __init__(self, reason: str, usage: Usage | None = None) -> None:
        reason = redact(reason)  # an endpoint may echo the request, credentials included
        super().__init__(reason)
        self.reason = reason
        self.usage = usage if usage is not None else Usage()

    def costing(self, usage: Usage, note: str = "") -> LLMError:
        """The same failure, saying it cost ``usage`` (and ``note`` after its reason): a new error, this one kept as
        its cause."""
        error = type(self)(self.reason + note, usage)
        error.__cause__ = self
        return error


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
