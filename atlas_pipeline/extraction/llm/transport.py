"""One request to an OpenAI-compatible chat-completions endpoint, sent with manners and retried with care.

- At most ``ATLAS_LLM_CONCURRENCY`` requests in flight and the endpoint's rate limits kept (``gate``).
- Transient errors (408, 409, 429, 5xx, timeouts, dropped connections) are retried with exponential backoff and
  jitter, waiting at least what the server asks (``Retry-After`` in seconds or as a date, ``retry-after-ms``).
  The statuses and headers are the ones the ``openai`` client retries on; the loop is ours (its own retries are
  off) because every wait is logged in the run, every request counted in the usage, and the structured-output
  fallback must happen in the same loop.
- Permanent errors (401, 403, 404, other 4xx) fail at once with a clear message — no retry.
- ``json_schema`` structured output falls back to ``json_object`` when the server rejects it.
- Every answer ends within ``ATLAS_LLM_DEADLINE_SECONDS`` and ``ATLAS_LLM_MAX_ANSWER_BYTES`` (``bounded_http``): one
  cut off fails the request at once with the reason (asked again it would be cut again).
- What each request cost — tokens, and money at the model's price — is added to the ``Usage`` it is given.
The API key is only handed to the ``openai`` client; it is never logged or put in an error message.
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable

import openai

from atlas_pipeline.core.clock import utc_now
from atlas_pipeline.extraction.llm.answers import FORMAT_FALLBACK, response_format
from atlas_pipeline.extraction.llm.bounded_http import AnswerCutOff, bounded_client
from atlas_pipeline.extraction.llm.config import LLMConfig, StructuredOutput, estimate_tokens
from atlas_pipeline.extraction.llm.errors import (
    LLMAnswerCutError,
    LLMPermanentError,
    LLMResponseError,
    LLMTransientError,
)
from atlas_pipeline.extraction.llm.gate import RequestGate, Waited, gate_directory, gate_name
from atlas_pipeline.extraction.llm.usage import Usage
from atlas_pipeline.extraction.prices import Price

LOG = logging.getLogger("atlas.llm")
TRANSIENT_STATUS = (408, 409, 429)  # request timeout, conflict, rate limit: worth another try (and every 5xx)
_REJECTION_PHRASES = ("input should be", "not supported", "unsupported", "invalid", "unknown", "must be", "expected")


def server_message(error: openai.APIStatusError) -> str:
    """The server's own words: the error body's message when it has one, else the client's summary."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner.get("message"), str) and inner["message"].strip():
            return inner["message"].strip()
    return str(error.message)


def retry_after(error: openai.APIStatusError) -> float | None:
    """The server's wish, capped at 60 s: ``retry-after-ms``, ``Retry-After`` in seconds or as an HTTP date."""
    headers = error.response.headers
    try:
        if headers.get("retry-after-ms"):
            return min(float(headers["retry-after-ms"]) / 1000, 60.0)
        value = headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, min(float(value), 60.0))
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, min((when - utc_now()).total_seconds(), 60.0))
    except (TypeError, ValueError, OverflowError):
        return None


def describe(error: Exception) -> str:
    if isinstance(error, openai.APITimeoutError):
        return "request timed out"
    if isinstance(error, openai.APIConnectionError):
        return "connection failed"
    if isinstance(error, openai.APIStatusError):
        return f"HTTP {error.status_code}"
    return type(error).__name__


class OutputFormat:
    """The output mode asked for, stepped down once per mode the server rejects (by whichever thread sees it
    first: a request rejected in a mode already left behind changes nothing)."""

    def __init__(self, first: StructuredOutput) -> None:
        self.current: StructuredOutput = first
        self._lock = threading.Lock()

    def step_down(self, rejected: StructuredOutput) -> None:
        with self._lock:
            if self.current == rejected and rejected in FORMAT_FALLBACK:
                self.current = FORMAT_FALLBACK[rejected]
                LOG.warning("endpoint rejected %s output; falling back to %s", rejected, self.current)


def _gate(config: LLMConfig) -> RequestGate:
    """The cap of ``ATLAS_LLM_CONCURRENCY``: in a PostgreSQL database shared by every machine (``config.gate_url``),
    else in this machine's lock files."""
    limits = (config.concurrency, config.requests_per_minute, config.tokens_per_minute)
    if config.gate_url:
        from atlas_pipeline.extraction.llm.gate_postgres import PostgresGateStorage

        storage = PostgresGateStorage(config.gate_url, gate_name(config.base_url, config.model))
        return RequestGate(None, *limits, storage=storage)
    return RequestGate(gate_directory(config.base_url, config.model, config.gate_dir or None), *limits)


class Transport:
    """Requests to one endpoint and model: the gate, the retries, the output format, the price."""

    def __init__(
        self,
        config: LLMConfig,
        sleep: Callable[[float], None] = time.sleep,
        gate: RequestGate | None = None,
        price: Price | None = None,
    ) -> None:
        self.config = config
        self.sleep = sleep
        self.price = price  # None: the cost is unknown (Usage.cost stays 0)
        self.gate = gate or _gate(config)
        self.openai = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "not-needed",
            timeout=config.timeout_seconds,
            max_retries=0,  # retries are ours: backoff with jitter, and counted
            http_client=bounded_client(config.deadline_seconds, config.max_answer_bytes),  # no answer without end
        )
        self.format = OutputFormat(config.structured_output)  # shared by every document's copy of the client

    def body(self, messages: list[dict[str, str]], schema: dict) -> dict:
        """The request as it is sent (and as the Batch API sends it)."""
        return {
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.config.max_tokens,
            "response_format": response_format(schema, self.format.current),
        }

    def call(self, messages: list[dict[str, str]], schema: dict, usage: Usage) -> str:
        """The answer's text; what was spent is added to ``usage`` (an error carries it). An answer cut at
        ``max_tokens`` raises ``LLMAnswerCutError``."""
        attempt = 0
        estimate = estimate_tokens(messages)
        while True:
            waited = Waited()
            try:
                with self.gate.slot(estimate, waited):  # at most ATLAS_LLM_CONCURRENCY in flight (gate)
                    usage.calls += 1  # every request sent counts, answered or not
                    sent_at, form = self.gate.clock(), self.format.current
                    response = self._send(messages, schema, sent_at, form)
            except openai.APIStatusError as error:
                usage.waited_seconds += waited.seconds
                if self._rejects_format(error, form):
                    self.format.step_down(form)
                    continue
                if error.status_code in TRANSIENT_STATUS or error.status_code >= 500:
                    attempt = self._wait_or_give_up(attempt, error, usage)
                    continue
                raise self._permanent(error, usage) from None
            except (openai.APITimeoutError, openai.APIConnectionError) as error:
                usage.waited_seconds += waited.seconds
                if isinstance(error.__cause__, AnswerCutOff):  # the same endpoint would do it again: never retried
                    raise LLMResponseError(str(error.__cause__), usage) from None
                attempt = self._wait_or_give_up(attempt, error, usage)
                continue
            usage.waited_seconds += waited.seconds
            self.gate.answered(estimate, self._count(response, usage), sent_at)
            if not response.choices:
                raise LLMResponseError("LLM reply had no choices", usage)
            if response.choices[0].finish_reason == "length":
                limit = self.config.max_tokens
                reason = f"the answer was cut at ATLAS_LLM_MAX_TOKENS={limit} tokens (finish_reason length)"
                raise LLMAnswerCutError(reason, usage)
            return response.choices[0].message.content or ""

    def _count(self, response, usage: Usage) -> int:
        """Adds the answer's tokens (and their cost) to ``usage``; the tokens used, for the gate's budget."""
        if response.usage is None:
            return 0
        prompt, answer = response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0
        details = getattr(response.usage, "prompt_tokens_details", None)
        cached = int(getattr(details, "cached_tokens", 0) or 0)
        usage.prompt_tokens += prompt
        usage.completion_tokens += answer
        usage.cached_tokens += cached
        if self.price is not None:
            usage.cost += self.price.cost(prompt, answer, cached)
        return prompt + answer

    def _send(self, messages: list[dict[str, str]], schema: dict, sent_at: float, form: StructuredOutput):
        """One request; a refusal for the endpoint's rate (429, ``Retry-After``) slows every sender of this
        machine before the slot is given back, so no other request slips in first."""
        try:
            return self.openai.chat.completions.create(
                model=self.config.model,
                messages=messages,
                temperature=0,
                max_tokens=self.config.max_tokens,
                response_format=response_format(schema, form),
            )
        except openai.APIStatusError as error:
            wait = retry_after(error)
            error.retry_after_seconds = wait  # the same wait for the backoff (a date read twice would differ)
            if error.status_code == 429 or wait is not None:
                window = self.gate.throttled(wait, sent_at)
                LOG.warning("LLM endpoint asked to slow down: at most %d request(s) in flight for now", int(window))
            raise

    def _permanent(self, error: openai.APIStatusError, usage: Usage) -> LLMPermanentError:
        status = error.status_code
        if status in (401, 403):
            reason = f"LLM endpoint refused the credentials (HTTP {status}): check ATLAS_LLM_API_KEY"
        elif status == 404:
            reason = (
                f"LLM endpoint or model not found (HTTP 404): model {self.config.model!r} at {self.config.base_url}"
            )
        else:
            reason = f"LLM request rejected (HTTP {status}): {server_message(error)}"
        return LLMPermanentError(reason, usage)

    @staticmethod
    def _rejects_format(error: openai.APIStatusError, form: StructuredOutput) -> bool:
        """The server refused the response_format ``form`` (OpenAI answers 400, llama.cpp a 500 that says the field
        is invalid): time to fall back. A 500 that merely mentions response_format is a fault, retried as one."""
        if form not in FORMAT_FALLBACK:
            return False
        text = (str(error.message) + str(error.body)).lower()
        if "response_format" not in text:
            return False
        if error.status_code in (400, 422):
            return True
        return error.status_code == 500 and any(phrase in text for phrase in _REJECTION_PHRASES)

    def _wait_or_give_up(self, attempt: int, error: Exception, usage: Usage) -> int:
        what = describe(error)
        if attempt >= self.config.max_retries:
            raise LLMTransientError(f"LLM endpoint kept failing: {what} (gave up after {attempt + 1} attempts)", usage)
        delay = self._delay(attempt, error)
        LOG.warning("LLM %s; retry %d/%d in %.2fs", what, attempt + 1, self.config.max_retries, delay)
        usage.retries += 1
        self.sleep(delay)
        return attempt + 1

    def _delay(self, attempt: int, error: Exception) -> float:
        base = self.config.backoff_seconds * (2**attempt)
        if isinstance(error, openai.APIStatusError):
            wait = error.retry_after_seconds if hasattr(error, "retry_after_seconds") else retry_after(error)
            base = max(base, wait or 0.0)
        return base + random.uniform(0, self.config.backoff_seconds)
