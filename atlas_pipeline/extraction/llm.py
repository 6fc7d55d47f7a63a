"""Calling an OpenAI-compatible chat-completions endpoint: retries, JSON repair, structured output, a response cache.

- Transient errors (408, 409, 429, 5xx, timeouts, dropped connections) are retried with exponential backoff and
  jitter, waiting at least what the server asks (``Retry-After`` in seconds or as a date, ``retry-after-ms``).
  The statuses and headers are the ones the ``openai`` client retries on; the loop is ours (its own retries are
  off) because every wait is logged in the run, every request counted in the usage record, and the
  structured-output fallback below must happen in the same loop.
- Permanent errors (401, 403, 404, other 4xx) fail at once with a clear message — no retry.
- ``json_schema`` structured output falls back to ``json_object`` when the server rejects it.
- A reply that is not valid JSON (or does not fit the schema) gets exactly one repair request — but an answer the
  endpoint cut at ``max_tokens`` (``finish_reason: "length"``) is no invalid JSON: it raises ``LLMAnswerCutError``
  at once, and the extractor asks for less at a time (``extraction.extractor``).
- Replies are cached by hash of (model, messages, schema): asking the same again costs no call (the entry keeps the
  tokens the answer cost, so a record made from the cache still says what its extraction cost).
- Every answer ends within ``ATLAS_LLM_DEADLINE_SECONDS`` and ``ATLAS_LLM_MAX_ANSWER_BYTES`` (``bounded_http``): one
  cut off fails the request at once with the reason (asked again it would be cut again) and is never cached.
The API key is only handed to the ``openai`` client; it is never logged, cached or put in an error message.
"""

from __future__ import annotations

import copy
import email.utils
import fcntl
import hashlib
import json
import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import openai
from pydantic import BaseModel, ValidationError

from atlas_pipeline.config.redaction import redact_value
from atlas_pipeline.config.settings import StructuredOutput, setting_default
from atlas_pipeline.extraction.batches import BatchQueue, PollReport
from atlas_pipeline.extraction.bounded_http import AnswerCutOff, bounded_client
from atlas_pipeline.extraction.gate import RequestGate, Waited, gate_directory
from atlas_pipeline.extraction.llm_results import (
    LLMAnswerCutError,
    LLMError,
    LLMPermanentError,
    LLMQueuedError,
    LLMResponseError,
    LLMTransientError,
    Usage,
)
from atlas_pipeline.extraction.prices import Price
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import llm_cache_path

LOG = logging.getLogger("atlas.llm")
# json_schema (OpenAI, vLLM, Ollama) → json_object + schema (llama.cpp) → plain json_object
FORMAT_FALLBACK = {"json_schema": "json_object_schema", "json_object_schema": "json_object"}
TRANSIENT_STATUS = (408, 409, 429)  # request timeout, conflict, rate limit: worth another try (and every 5xx)
_REJECTION_PHRASES = ("input should be", "not supported", "unsupported", "invalid", "unknown", "must be", "expected")


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


@dataclass
class LLMAnswer:
    data: dict[str, Any]
    usage: Usage
    cached: bool


def bounded(schema: dict, quote_chars: int = 600, text_chars: int = 300) -> dict:
    """The schema with length limits on strings, for grammar-constrained servers: a small model that rambles
    inside a quote then stops at the limit instead of running out of tokens mid-string."""
    limited = json.loads(json.dumps(schema))
    for item in limited.get("properties", {}).values():
        for name, limit in (("quote", quote_chars), ("value", text_chars)):
            for option in item.get("properties", {}).get(name, {}).get("anyOf", []):
                if option.get("type") == "string" and "enum" not in option:
                    option["maxLength"] = limit
    return limited


def cache_key(model: str, messages: list[dict[str, str]], schema: dict) -> str:
    material = json.dumps({"model": model, "messages": messages, "schema": schema}, sort_keys=True)
    return hashlib.sha256(material.encode("utf-8")).hexdigest()


def _server_message(error: openai.APIStatusError) -> str:
    """The server's own words: the error body's message when it has one, else the client's summary."""
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error") if isinstance(body.get("error"), dict) else body
        if isinstance(inner.get("message"), str) and inner["message"].strip():
            return inner["message"].strip()
    return str(error.message)


def _retry_after(error: openai.APIStatusError) -> float | None:
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
            return max(0.0, min((when - datetime.now(UTC)).total_seconds(), 60.0))
    except (TypeError, ValueError, OverflowError):
        return None


class _OutputFormat:
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


def _spent(usage: Usage) -> dict[str, int]:
    """What an answer cost, as its cache entry keeps it."""
    return {name: getattr(usage, name) for name in ("prompt_tokens", "completion_tokens", "cached_tokens")}


class LLMClient:
    """One endpoint and model. ``complete`` returns validated JSON or raises an ``LLMError``."""

    def __init__(
        self,
        config: LLMConfig,
        cache: Store | None = None,
        sleep: Callable[[float], None] = time.sleep,
        gate: RequestGate | None = None,
        price: Price | None = None,
        currency: str = "USD",
        batch: BatchQueue | None = None,
    ):
        if not config.base_url:
            raise LLMPermanentError("no LLM endpoint configured (set ATLAS_LLM_BASE_URL)")
        self.config = config
        self.cache = cache
        self.sleep = sleep
        self.price = price  # None: the cost is unknown (Usage.cost stays 0; records say None)
        self.currency = currency
        self.batch = batch  # ATLAS_LLM_BATCH: requests not in the cache are queued for the Batch API, not sent
        self.document = ""  # whose requests these are (for_document)
        self.gate = gate or RequestGate(
            gate_directory(config.base_url, config.model, config.gate_dir or None),
            config.concurrency,
            config.requests_per_minute,
            config.tokens_per_minute,
        )
        self._client = openai.OpenAI(
            base_url=config.base_url,
            api_key=config.api_key or "not-needed",
            timeout=config.timeout_seconds,
            max_retries=0,  # retries are ours: backoff with jitter, and counted
            http_client=bounded_client(config.deadline_seconds, config.max_answer_bytes),  # no answer without end
        )
        self._format = _OutputFormat(config.structured_output)  # shared by for_document copies and threads

    # -- one HTTP call with retries ---------------------------------------------------------------------------
    def _call(self, messages: list[dict[str, str]], schema: dict, usage: Usage) -> str:
        """The answer's text; an answer cut at ``max_tokens`` raises ``LLMAnswerCutError``."""
        attempt = 0
        estimate = estimate_tokens(messages)
        while True:
            waited = Waited()
            try:
                with self.gate.slot(estimate, waited):  # at most ATLAS_LLM_CONCURRENCY in flight, on this machine
                    usage.calls += 1  # every request sent counts, answered or not
                    sent_at, form = self.gate.clock(), self._format.current
                    response = self._send(messages, schema, sent_at, form)
            except openai.APIStatusError as error:
                usage.waited_seconds += waited.seconds
                if self._rejects_format(error, form):
                    self._format.step_down(form)
                    continue
                if error.status_code in TRANSIENT_STATUS or error.status_code >= 500:
                    attempt = self._wait_or_give_up(attempt, error, usage)
                    continue
                raise self._permanent(error) from None
            except (openai.APITimeoutError, openai.APIConnectionError) as error:
                usage.waited_seconds += waited.seconds
                if isinstance(error.__cause__, AnswerCutOff):  # the same endpoint would do it again: never retried
                    raise LLMResponseError(str(error.__cause__)) from None
                attempt = self._wait_or_give_up(attempt, error, usage)
                continue
            usage.waited_seconds += waited.seconds
            used = 0
            if response.usage is not None:
                usage.prompt_tokens += response.usage.prompt_tokens or 0
                usage.completion_tokens += response.usage.completion_tokens or 0
                details = getattr(response.usage, "prompt_tokens_details", None)
                cached = int(getattr(details, "cached_tokens", 0) or 0)
                usage.cached_tokens += cached
                used = (response.usage.prompt_tokens or 0) + (response.usage.completion_tokens or 0)
                if self.price is not None:
                    prompt, answer = response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0
                    usage.cost += self.price.cost(prompt, answer, cached)
            self.gate.answered(estimate, used, sent_at)
            if not response.choices:
                raise LLMResponseError("LLM reply had no choices")
            if response.choices[0].finish_reason == "length":
                raise LLMAnswerCutError(
                    f"the answer was cut at ATLAS_LLM_MAX_TOKENS={self.config.max_tokens} tokens (finish_reason length)"
                )
            return response.choices[0].message.content or ""

    def _send(self, messages: list[dict[str, str]], schema: dict, sent_at: float, form: StructuredOutput):
        """One request; a refusal for the endpoint's rate (429, ``Retry-After``) slows every sender of this
        machine before the slot is given back, so no other request slips in first."""
        try:
            return self._client.chat.completions.create(
                model=self.config.model,
                messages=messages,
                temperature=0,
                max_tokens=self.config.max_tokens,
                response_format=self._response_format(schema, form),
            )
        except openai.APIStatusError as error:
            wait = _retry_after(error)
            error.retry_after_seconds = wait  # the same wait for the backoff (a date read twice would differ)
            if error.status_code == 429 or wait is not None:
                window = self.gate.throttled(wait, sent_at)
                LOG.warning("LLM endpoint asked to slow down: at most %d request(s) in flight for now", int(window))
            raise

    def _permanent(self, error: openai.APIStatusError) -> LLMPermanentError:
        status = error.status_code
        if status in (401, 403):
            return LLMPermanentError(f"LLM endpoint refused the credentials (HTTP {status}): check ATLAS_LLM_API_KEY")
        if status == 404:
            return LLMPermanentError(
                f"LLM endpoint or model not found (HTTP 404): model {self.config.model!r} at {self.config.base_url}"
            )
        return LLMPermanentError(f"LLM request rejected (HTTP {status}): {_server_message(error)}")

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
        what = self._describe(error)
        if attempt >= self.config.max_retries:
            raise LLMTransientError(f"LLM endpoint kept failing: {what} (gave up after {attempt + 1} attempts)")
        delay = self._delay(attempt, error)
        LOG.warning("LLM %s; retry %d/%d in %.2fs", what, attempt + 1, self.config.max_retries, delay)
        usage.retries += 1
        self.sleep(delay)
        return attempt + 1

    @staticmethod
    def _response_format(schema: dict, form: StructuredOutput) -> dict:
        if form == "json_schema":
            return {"type": "json_schema", "json_schema": {"name": "extraction", "schema": schema, "strict": True}}
        if form == "json_object_schema":  # llama.cpp: JSON mode constrained by a schema (as a grammar)
            return {"type": "json_object", "schema": bounded(schema)}
        return {"type": "json_object"}

    def _delay(self, attempt: int, error: Exception) -> float:
        base = self.config.backoff_seconds * (2**attempt)
        if isinstance(error, openai.APIStatusError):
            wait = error.retry_after_seconds if hasattr(error, "retry_after_seconds") else _retry_after(error)
            base = max(base, wait or 0.0)
        return base + random.uniform(0, self.config.backoff_seconds)

    @staticmethod
    def _describe(error: Exception) -> str:
        if isinstance(error, openai.APITimeoutError):
            return "request timed out"
        if isinstance(error, openai.APIConnectionError):
            return "connection failed"
        if isinstance(error, openai.APIStatusError):
            return f"HTTP {error.status_code}"
        return type(error).__name__

    # -- JSON with one repair -----------------------------------------------------------------------------------
    def batch_tick(self) -> PollReport:
        """Batch mode: take in the answers of the batches that ended, then submit the queued requests — one
        process at a time on this machine (the sensor and ``atlas run`` would otherwise send a queue twice). What
        could not be done is in the report's problems, tried again at the next tick."""
        if self.batch is None:
            raise LLMPermanentError("the Batch API is not on (ATLAS_LLM_BATCH)")
        report = PollReport()
        with open(self.gate.directory / "batch.lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            for step in (
                lambda: self.batch.poll(self._client, self.config.model, report),
                lambda: self.batch.submit(self._client, report),
            ):
                try:
                    step()
                except openai.APIStatusError as error:
                    report.problems.append(f"Batch API: HTTP {error.status_code}: {_server_message(error)}")
                except (openai.APITimeoutError, openai.APIConnectionError) as error:
                    report.problems.append(f"Batch API: {self._describe(error)}")
        return report

    def for_document(self, key: str) -> LLMClient:
        """The same client, naming the document its requests are for (the Batch API queue records who waits)."""
        named = copy.copy(self)
        named.document = key
        return named

    def complete(
        self, messages: list[dict[str, str]], schema: dict, model: type[BaseModel], repair: bool = True
    ) -> LLMAnswer:
        """The answer as JSON valid for ``model``: from the cache, or asked now (batch mode: queued, raising
        ``LLMQueuedError``). ``repair``: whether an invalid reply may get its one repair request."""
        key = cache_key(self.config.model, messages, schema)
        if self.cache is not None:
            cached = self.cache.read_json_or(llm_cache_path(key), None)
            if cached is not None:
                answer = self._from_cache(key, cached, messages, schema, model, repair)
                if answer is not None:
                    return answer
        if self.batch is not None:
            refused = self.batch.take_failure(key)
            if refused is not None and not refused[1]:
                raise LLMPermanentError(refused[0])
            if refused is not None:  # its batch passed the local deadline: asked directly now
                LOG.warning("%s", refused[0])
            else:
                where = self.batch.enqueue(key, self._body(messages, schema), self.document)
                state = "queued for the next batch" if where == "queued" else f"in batch {where}"
                raise LLMQueuedError(f"waiting at the endpoint's Batch API: a request {state}")
        usage = Usage()
        try:
            return self._complete(messages, schema, model, key, usage)
        except LLMAnswerCutError as error:
            if self.cache is not None:  # the same request would be cut again: remember it, and what it cost
                spent = _spent(usage)
                entry = {"model": self.config.model, "cut": error.reason, "max_tokens": self.config.max_tokens}
                self.cache.write_json(llm_cache_path(key), {**entry, "usage": spent})
            error.usage.add(usage)
            raise
        except LLMError as error:
            error.usage.add(usage)
            raise

    def _from_cache(
        self,
        key: str,
        cached: dict,
        messages: list[dict[str, str]],
        schema: dict,
        model: type[BaseModel],
        repair: bool,
    ) -> LLMAnswer | None:
        """An answer made before — no request now; its tokens are what it cost when it was made. An answer the
        Batch API brought (``unread``) counts once as a request sent, at the batch price. None: a cut answer under
        a lower limit than today's, to be asked again."""
        spent = cached.get("usage") or {}
        tokens = {name: int(spent.get(name, 0)) for name in ("prompt_tokens", "completion_tokens", "cached_tokens")}
        unread = bool(cached.get("unread"))
        usage = Usage(calls=1, **tokens) if unread else Usage(cache_hits=1, **tokens)
        if self.price is not None:
            cost = self.price.cost(*tokens.values(), batch=bool(cached.get("batch")))
            usage.cost, usage.reused_cost = (cost, 0.0) if unread else (0.0, cost)
        read = {name: value for name, value in cached.items() if name != "unread"}
        if cached.get("cut"):
            if int(cached.get("max_tokens", 0)) < self.config.max_tokens:
                return None
            if unread:
                self.cache.write_json(llm_cache_path(key), read)
            error = LLMAnswerCutError(cached["cut"])  # cut before at this limit or a higher one: no call now
            error.usage = usage
            raise error
        if "data" not in cached:  # a Batch API answer not read yet: parsed as one that just arrived
            data, problem = self._parse(cached.get("content") or "", model)
            if problem is not None:
                if not repair:
                    self.cache.write_json(llm_cache_path(key), read)
                    error = LLMResponseError(f"LLM reply was not valid JSON for the schema after one repair: {problem}")
                    error.usage = usage
                    raise error
                LOG.warning("Batch API reply was not valid (%s); asking once for a repair", problem)
                # a repair still queued leaves this answer unread: it is counted when the repair arrives
                repaired = self.complete(self._repair(messages, cached["content"], problem), schema, model, False)
                data = repaired.data
                usage.add(repaired.usage)
            read = {name: value for name, value in read.items() if name != "content"} | {"data": redact_value(data)}
        if unread or "data" not in cached:
            self.cache.write_json(llm_cache_path(key), read)
        return LLMAnswer(data=read["data"], usage=usage, cached=not unread)

    def _body(self, messages: list[dict[str, str]], schema: dict) -> dict[str, Any]:
        """The request as the Batch API sends it (the same as a request sent now)."""
        return {
            "model": self.config.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": self.config.max_tokens,
            "response_format": self._response_format(schema, self._format.current),
        }

    @staticmethod
    def _repair(messages: list[dict[str, str]], content: str, problem: str) -> list[dict[str, str]]:
        """The one repair request: the conversation, the invalid reply, and what was wrong with it."""
        return [
            *messages,
            {"role": "assistant", "content": content[:20_000]},
            {
                "role": "user",
                "content": f"Your reply was not valid: {problem}. Reply again with only the JSON object that "
                "matches the schema, with the same content.",
            },
        ]

    def _complete(
        self, messages: list[dict[str, str]], schema: dict, model: type[BaseModel], key: str, usage: Usage
    ) -> LLMAnswer:
        content = self._call(messages, schema, usage)
        data, problem = self._parse(content, model)
        if problem is not None:
            LOG.warning("LLM reply was not valid (%s); asking once for a repair", problem)
            content = self._call(self._repair(messages, content, problem), schema, usage)
            data, problem = self._parse(content, model)
            if problem is not None:
                raise LLMResponseError(f"LLM reply was not valid JSON for the schema after one repair: {problem}")
        data = redact_value(data)  # an endpoint echoing the key in a value or quote: never cached, graded or stored
        if self.cache is not None:
            spent = _spent(usage)
            entry = {"model": self.config.model, "data": data, "usage": spent}
            self.cache.write_json(llm_cache_path(key), entry)
        return LLMAnswer(data=data, usage=usage, cached=False)

    @staticmethod
    def _parse(content: str, model: type[BaseModel]) -> tuple[dict[str, Any], str | None]:
        text = content.strip()
        if text.startswith("```"):
            text = text.strip("`").removeprefix("json").strip()
        try:  # strict=False: a raw line break inside a quote is the model's, not broken JSON (small models do it)
            raw = json.loads(text, strict=False)
        except json.JSONDecodeError as error:
            return {}, f"invalid JSON ({error.msg} at line {error.lineno} column {error.colno})"
        if not isinstance(raw, dict):
            return {}, "the JSON is not an object"
        try:
            return model.model_validate(raw).model_dump(mode="json", exclude_unset=True), None
        except ValidationError as error:
            first = error.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            return {}, f"schema mismatch at {where}: {first['msg']}"
