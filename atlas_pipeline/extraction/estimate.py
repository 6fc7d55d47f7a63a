"""What an extraction run would send, before anything is sent: requests, tokens and cost per document.

The requests are the ones the extractor would make (``extractor.plan_requests``: the rule's chunks, each prompt
built as it will be sent), so the prompt tokens are those of the real messages (characters / 4, as the gate
counts them). A request already in the LLM cache costs nothing. The answer's tokens cannot be known before it is
written: they are taken from this deployment's earlier extractions (tokens per request), or, with none yet, from
the template (about ``TOKENS_PER_VALUE`` a value, a few entries per repeating group). An answer longer than
``ATLAS_LLM_MAX_TOKENS`` is asked in parts, each re-sending the prompt: counted as such.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from atlas_pipeline.core.rob2_module import tool_of
from atlas_pipeline.core.templates import Template
from atlas_pipeline.extraction.extractor import plan_requests
from atlas_pipeline.extraction.llm.cache import cache_key
from atlas_pipeline.extraction.llm.client import LLMClient
from atlas_pipeline.extraction.llm.config import estimate_tokens
from atlas_pipeline.extraction.prices import money
from atlas_pipeline.extraction.prompt import PromptSources
from atlas_pipeline.extraction.rob2_proposal import domain_request, methods_and_results
from atlas_pipeline.extraction.rules import Rule
from atlas_pipeline.parsing.model import Table
from atlas_pipeline.store.files import Store
from atlas_pipeline.store.layout import llm_cache_path
from atlas_pipeline.store.records import ExtractionRecord

TOKENS_PER_VALUE = 60  # {"value": …, "quote": "a sentence or two"} in JSON
TYPICAL_ENTRIES = 4  # entries of a repeating group in a typical trial report (outcomes × time points vary widely)


@dataclass
class DocumentEstimate:
    key: str
    requests: int = 0  # to be sent
    from_cache: int = 0  # answered by the LLM cache: no request, no cost
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    note: str = ""  # where the text came from when the document is not parsed yet


@dataclass
class RunEstimate:
    model: str
    currency: str
    answer_tokens: int  # expected tokens of one answer
    answer_basis: str  # how that was found
    documents: list[DocumentEstimate] = field(default_factory=list)
    seconds_per_answer: float = 30.0  # measured here when earlier extractions say, else a typical hosted answer

    @property
    def requests(self) -> int:
        return sum(d.requests for d in self.documents)

    @property
    def cost(self) -> float | None:
        costs = [d.cost for d in self.documents]
        return None if any(c is None for c in costs) else sum(c for c in costs if c is not None)

    def lines(self, concurrency: int) -> list[str]:
        """The estimate as ``atlas run --estimate`` prints it."""
        out = [f"{'document':<44} {'requests':>8} {'cached':>6} {'prompt tok':>10} {'answer tok':>10}  cost"]
        for d in self.documents:
            out.append(
                f"{d.key[:44]:<44} {d.requests:>8} {d.from_cache:>6} {d.prompt_tokens:>10,} "
                f"{d.completion_tokens:>10,}  {money(d.cost, self.currency)}{'  (' + d.note + ')' if d.note else ''}"
            )
        prompt = sum(d.prompt_tokens for d in self.documents)
        answer = sum(d.completion_tokens for d in self.documents)
        cached = sum(d.from_cache for d in self.documents)
        out.append(
            f"total: {len(self.documents)} document(s), {self.requests} request(s) to send ({cached} answered by "
            f"the cache), {prompt:,} prompt + {answer:,} answer tokens ≈ {money(self.cost, self.currency)} "
            f"with {self.model}"
        )
        # per request as the table counts them: an answer asked in parts is spread over its requests
        per_request = round(answer / self.requests) if self.requests else self.answer_tokens
        if per_request == self.answer_tokens:
            out.append(f"answer tokens: about {per_request:,} a request ({self.answer_basis})")
        else:
            out.append(
                f"answer tokens: about {per_request:,} a request — an answer of about {self.answer_tokens:,} "
                f"({self.answer_basis}) is longer than ATLAS_LLM_MAX_TOKENS: cut once, then asked in parts"
            )
        if self.requests:
            minutes = math.ceil(self.requests / concurrency) * self.seconds_per_answer / 60
            out.append(
                f"time at the endpoint: about {minutes:.1f} min at ATLAS_LLM_CONCURRENCY={concurrency} and "
                f"~{self.seconds_per_answer:.0f} s an answer"
            )
        return out


def answer_tokens_guess(template: Template, records: Sequence[ExtractionRecord], max_tokens: int) -> tuple[int, str]:
    """Expected tokens of one answer: what earlier LLM extractions here averaged per request, else the template's
    values at ``TOKENS_PER_VALUE`` each."""
    past = [r for r in records if r.mode == "llm" and r.completion_tokens and (r.llm_calls or r.llm_cache_hits)]
    if past:
        tokens = sum(r.completion_tokens for r in past) / sum(r.llm_calls + r.llm_cache_hits for r in past)
        return max(1, round(tokens)), f"the average of {len(past)} earlier extraction(s) here"
    singles = sum(len(module.fields) for module in template.modules if not module.repeating)
    entries = sum(len(group.fields) * min(TYPICAL_ENTRIES, group.max_entries) for group in template.groups)
    tokens = (singles + entries) * TOKENS_PER_VALUE
    return tokens, (
        f"from the template: {singles} values and ~{TYPICAL_ENTRIES} entries a group at ~{TOKENS_PER_VALUE} tokens "
        "a value; no earlier extraction here to learn from"
    )


def seconds_per_answer(records: Sequence[ExtractionRecord], default: float = 30.0) -> float:
    """How long one answer took here (extraction seconds per request sent), else ``default``."""
    sent = [r for r in records if r.mode == "llm" and r.llm_calls and r.seconds]
    return sum(r.seconds for r in sent) / sum(r.llm_calls for r in sent) if sent else default


def estimate_document(
    client: LLMClient,
    template: Template,
    rule: Rule,
    key: str,
    markdown: str,
    tables: Sequence[Table],
    answer_tokens: int,
    cache: Store | None = None,
    sources: PromptSources | None = None,
) -> DocumentEstimate:
    """The requests the extractor would send for this text, and what they would cost."""
    estimate = DocumentEstimate(key=key)
    _, askers = plan_requests(client, rule, markdown, tables, sources)
    limit = client.config.max_tokens
    for asker in askers:
        messages, schema = asker.messages(template.asked_at_once())
        path = llm_cache_path(cache_key(client.config.model, messages, schema))
        cached = cache.read_json_or(path, None) if cache is not None else None
        if cached is not None and not cached.get("cut"):
            estimate.from_cache += 1
            continue
        prompt = estimate_tokens(messages)
        if answer_tokens <= limit:
            estimate.requests += 1
            estimate.prompt_tokens += prompt
        else:  # cut once, then asked in parts that fit (each part re-sends the text)
            parts = math.ceil(answer_tokens / (limit * 0.9))
            estimate.requests += 1 + parts
            estimate.prompt_tokens += prompt * (1 + parts)
            estimate.completion_tokens += limit  # the cut answer is paid too
        estimate.completion_tokens += answer_tokens
    module = template.rob2
    if module is not None:  # RoB 2: a request per domain, each with the methods and results and every result
        text, tables_html = methods_and_results(markdown, rule.chunk_size_chars), [table.html for table in tables]
        for domain in tool_of(module).domains:
            messages, _, _ = domain_request(domain, module, TYPICAL_ENTRIES, text, tables_html, rule, sources)
            estimate.requests += 1
            estimate.prompt_tokens += estimate_tokens(messages)
            estimate.completion_tokens += len(domain.questions) * TYPICAL_ENTRIES * TOKENS_PER_VALUE
    price = client.price
    if price is None:
        estimate.cost = None
    else:
        batch = client.batch is not None  # ATLAS_LLM_BATCH: at the Batch API's price
        estimate.cost = price.cost(estimate.prompt_tokens, estimate.completion_tokens, batch=batch)
    return estimate
