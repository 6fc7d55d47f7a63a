"""The client the extraction asks: an answer as JSON valid for the schema — from the cache, or asked now with one
repair request for an invalid reply, or (Batch API mode) queued for the next batch.

- A reply that is not valid JSON (or does not fit the schema) gets exactly one repair request — but an answer the
  endpoint cut at ``max_tokens`` (``finish_reason: "length"``) is no invalid JSON: it raises ``LLMAnswerCutError``
  at once, and the extractor asks for less at a time (``extraction.extractor``).
- Replies are cached (``cache``); an answer cut off by the deadline or size limit is never cached.
- Every answer comes with what it cost (``LLMAnswer.usage``), every error with what the failed attempt cost.
The sending itself — gate, retries, output format, price — is the ``transport``'s.
"""

from __future__ import annotations

import copy
import fcntl
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import openai
from pydantic import BaseModel

from atlas_pipeline.core.redaction import redact_value
from atlas_pipeline.extraction.llm.answers import parse_answer, repair_messages
from atlas_pipeline.extraction.llm.batch import BatchQueue, PollReport
from atlas_pipeline.extraction.llm.cache import AnswerCache, cache_key
from atlas_pipeline.extraction.llm.config import LLMConfig
from atlas_pipeline.extraction.llm.errors import (
    LLMAnswerCutError,
    LLMPermanentError,
    LLMQueuedError,
    LLMResponseError,
)
from atlas_pipeline.extraction.llm.gate import RequestGate, gate_directory
from atlas_pipeline.extraction.llm.transport import Transport, describe, server_message
from atlas_pipeline.extraction.llm.usage import Usage
from atlas_pipeline.extraction.prices import Price
from atlas_pipeline.store.files import Store

LOG = logging.getLogger("atlas.llm")


@dataclass
class LLMAnswer:
    data: dict[str, Any]
    usage: Usage
    cached: bool


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
        self.transport = Transport(config, sleep, gate, price)
        self.cache = AnswerCache(cache, config.model) if cache is not None else None
        self.currency = currency
        self.batch = batch  # ATLAS_LLM_BATCH: requests not in the cache are queued for the Batch API, not sent
        self.document = ""  # whose requests these are (for_document)

    @property
    def gate(self) -> RequestGate:
        return self.transport.gate

    @property
    def price(self) -> Price | None:
        """The model's price (None: the cost is unknown — ``Usage.cost`` stays 0, records say None)."""
        return self.transport.price

    def for_document(self, key: str) -> LLMClient:
        """The same client, naming the document its requests are for (the Batch API queue records who waits)."""
        named = copy.copy(self)
        named.document = key
        return named

    def batch_tick(self) -> PollReport:
        """Batch mode: take in the answers of the batches that ended, then submit the queued requests — one
        process at a time on this machine (the sensor and ``atlas run`` would otherwise send a queue twice). What
        could not be done is in the report's problems, tried again at the next tick."""
        if self.batch is None:
            raise LLMPermanentError("the Batch API is not on (ATLAS_LLM_BATCH)")
        report = PollReport()
        client = self.transport.openai
        folder = gate_directory(self.config.base_url, self.config.model, self.config.gate_dir or None)
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)  # made by the gate's files, unless it is on PostgreSQL
        with open(folder / "batch.lock", "a") as lock:  # this machine's: the Batch API is one sensor's work
            fcntl.flock(lock, fcntl.LOCK_EX)
            for step in (
                lambda: self.batch.poll(client, self.config.model, report),
                lambda: self.batch.submit(client, report),
            ):
                try:
                    step()
                except openai.APIStatusError as error:
                    report.problems.append(f"Batch API: HTTP {error.status_code}: {server_message(error)}")
                except (openai.APITimeoutError, openai.APIConnectionError) as error:
                    report.problems.append(f"Batch API: {describe(error)}")
        return report

    def complete(
        self, messages: list[dict[str, str]], schema: dict, model: type[BaseModel], repair: bool = True
    ) -> LLMAnswer:
        """The answer as JSON valid for ``model``: from the cache, or asked now (batch mode: queued, raising
        ``LLMQueuedError``). ``repair``: whether an invalid reply may get its one repair request."""
        key = cache_key(self.config.model, messages, schema)
        if self.cache is not None:
            cached = self.cache.read(key)
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
                where = self.batch.enqueue(key, self.transport.body(messages, schema), self.document)
                state = "queued for the next batch" if where == "queued" else f"in batch {where}"
                raise LLMQueuedError(f"waiting at the endpoint's Batch API: a request {state}")
        usage = Usage()
        try:
            return self._ask(messages, schema, model, key, usage)
        except LLMAnswerCutError as error:
            if self.cache is not None:  # the same request would be cut again: remember it, and what it cost
                self.cache.cut(key, error.reason, self.config.max_tokens, error.usage.spent())
            raise

    def _ask(
        self, messages: list[dict[str, str]], schema: dict, model: type[BaseModel], key: str, usage: Usage
    ) -> LLMAnswer:
        content = self.transport.call(messages, schema, usage)
        data, problem = parse_answer(content, model)
        if problem is not None:
            LOG.warning("LLM reply was not valid (%s); asking once for a repair", problem)
            content = self.transport.call(repair_messages(messages, content, problem), schema, usage)
            data, problem = parse_answer(content, model)
            if problem is not None:
                reason = f"LLM reply was not valid JSON for the schema after one repair: {problem}"
                raise LLMResponseError(reason, usage)
        data = redact_value(data)  # an endpoint echoing the key in a value or quote: never cached, graded or stored
        if self.cache is not None:
            self.cache.answered(key, data, usage.spent())
        return LLMAnswer(data=data, usage=usage, cached=False)

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
        assert self.cache is not None
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
                self.cache.write(key, read)
            raise LLMAnswerCutError(cached["cut"], usage)  # cut before at this limit or a higher one: no call now
        if "data" not in cached:  # a Batch API answer not read yet: parsed as one that just arrived
            data, problem = parse_answer(cached.get("content") or "", model)
            if problem is not None:
                if not repair:
                    self.cache.write(key, read)
                    reason = f"LLM reply was not valid JSON for the schema after one repair: {problem}"
                    raise LLMResponseError(reason, usage)
                LOG.warning("Batch API reply was not valid (%s); asking once for a repair", problem)
                # a repair still queued leaves this answer unread: it is counted when the repair arrives
                repaired = self.complete(repair_messages(messages, cached["content"], problem), schema, model, False)
                data = repaired.data
                usage.add(repaired.usage)
            read = {name: value for name, value in read.items() if name != "content"} | {"data": redact_value(data)}
        if unread or "data" not in cached:
            self.cache.write(key, read)
        return LLMAnswer(data=read["data"], usage=usage, cached=not unread)
