"""HTTP to a parsing provider, with the LLM endpoint's manners: a timeout per request, retries with exponential
backoff and jitter for transient failures (429, 5xx, timeouts, dropped connections; ``Retry-After`` honoured within
the document's deadline), one clear ``ProviderError`` for anything else, and never a credential sent to another host
(upload and download URLs a provider hands out are presigned)."""

from __future__ import annotations

import json
import random
import time
from typing import Any
from urllib.parse import urljoin, urlsplit

import httpx2 as httpx

from atlas_pipeline.core.bounded_http import AnswerCutOff, bounded_client
from atlas_pipeline.core.redaction import redact
from atlas_pipeline.parsing.providers.base import ProviderError, ProviderLimits

TRANSIENT_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
MAX_RESULT_BYTES = 1_000_000_000  # an answer larger than this is refused, counted after decoding, never held whole
PROVIDER_SETTINGS = ("ATLAS_PROVIDER_MAX_SECONDS", "a provider answer's cap")


class Deadline:
    """The time one document may take at the provider."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def passed(self) -> bool:
        return self.left() <= 0

    def wait_to_poll(self, limits: ProviderLimits, task: str, last: str) -> None:
        """Sleep until the next status check of ``task``, or fail it (retryable) when no time is left for one."""
        if self.left() < limits.poll_seconds:
            raise ProviderError(
                f"{task} did not finish within {limits.max_seconds:g} s (ATLAS_PROVIDER_MAX_SECONDS); last {last}",
                retryable=True,
            )
        time.sleep(limits.poll_seconds)


class ProviderHTTP:
    """Requests to one provider at ``base_url`` (``label`` names it in reasons: "mineru", "docling")."""

    def __init__(self, label: str, base_url: str, limits: ProviderLimits, headers: dict[str, str] | None = None):
        self.label = label
        self.base_url = base_url.rstrip("/") + "/"
        self.limits = limits
        self.headers = headers or {}
        # every answer bounded as it arrives — counted after decoding (a gzip bomb), cut at the document's time —
        # whether or not the provider says its length
        self.client = bounded_client(
            limits.max_seconds,
            MAX_RESULT_BYTES,
            path=None,
            timeout=limits.timeout_seconds,
            follow_redirects=False,
            settings=PROVIDER_SETTINGS,
        )
        self.requests = 0

    def close(self) -> None:
        self.client.close()

    def _url(self, path: str) -> str:
        return urljoin(self.base_url, path.lstrip("/")) if "://" not in path else path

    def _own_host(self, url: str) -> bool:
        return urlsplit(url).netloc == urlsplit(self.base_url).netloc

    def request(
        self,
        method: str,
        path: str,
        deadline: Deadline,
        what: str,
        *,
        starts_work: bool = False,
        synchronous: bool = False,
        **kwargs: Any,
    ) -> httpx.Response:
        """One request (``what`` says what it was for, in reasons), retried while transient and time is left.

        ``starts_work``: the request starts work at the provider (a task submitted, a synchronous parse): one that
        timed out is not sent again — the provider may still be working on it, and a second copy would only add to
        its load (or to the quota). ``synchronous``: it answers when the parse is done, so it may take the
        document's whole time (``ATLAS_PROVIDER_MAX_SECONDS``)."""
        starts_work = starts_work or synchronous
        url = self._url(path)
        headers = {**(self.headers if self._own_host(url) else {}), **kwargs.pop("headers", {})}
        attempt = 0
        while True:
            attempt += 1
            limit = deadline.left() if synchronous else min(self.limits.timeout_seconds, deadline.left())
            timeout = max(1.0, limit)
            problem, wait = "", 0.0
            try:
                self.requests += 1
                response = self.client.request(method, url, headers=headers, timeout=timeout, **kwargs)
            except AnswerCutOff as cut:  # too large or too slow in all: the same provider would do it again
                raise ProviderError(redact(f"{self.label}: {what}: {cut}")) from None
            except httpx.TimeoutException:
                setting = "ATLAS_PROVIDER_MAX_SECONDS" if synchronous else "ATLAS_PROVIDER_TIMEOUT_SECONDS"
                problem = f"{what}: no answer within {timeout:.0f} s ({setting})"
                if starts_work:
                    raise ProviderError(redact(f"{self.label}: {problem}"), retryable=True) from None
            except httpx.TransportError as error:
                problem = f"{what}: cannot reach {urlsplit(url).netloc} ({type(error).__name__}: {error})"
            else:
                length = int(response.headers.get("content-length") or 0)
                if length > MAX_RESULT_BYTES:
                    raise ProviderError(f"{self.label}: {what}: answer of {length / 1e6:.0f} MB is too large")
                if response.status_code < 400:
                    return response
                detail = error_detail(response)
                problem = f"{what}: HTTP {response.status_code}{': ' + detail if detail else ''}"
                if response.status_code not in TRANSIENT_STATUS:
                    raise ProviderError(redact(f"{self.label}: {problem}"))
                wait = retry_after(response)
            if attempt > self.limits.max_retries or deadline.passed():
                tries = f" (after {attempt} attempts)" if attempt > 1 else ""
                raise ProviderError(redact(f"{self.label}: {problem}{tries}"), retryable=True)
            backoff = self.limits.backoff_seconds * 2 ** (attempt - 1) * (1 + random.random() / 2)
            time.sleep(max(0.0, min(max(wait, backoff), deadline.left())))

    def json(self, method: str, path: str, deadline: Deadline, what: str, **kwargs: Any) -> Any:
        """A request whose answer must be JSON; anything else is a malformed result."""
        response = self.request(method, path, deadline, what, **kwargs)
        try:
            return response.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            start = response.text[:80].replace("\n", " ") if response.content else "an empty body"
            reason = f"{self.label}: malformed result: {what} answered non-JSON ({start!r})"
            raise ProviderError(redact(reason)) from None


def error_detail(response: httpx.Response) -> str:
    """What a provider said about an error: its JSON ``error`` / ``detail`` / ``msg``, else the start of the body."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()[:200]
    if isinstance(body, dict):
        for key in ("error", "detail", "msg", "message"):
            if body.get(key):
                value = body[key]
                return (value if isinstance(value, str) else json.dumps(value))[:300]
    return json.dumps(body)[:200]


def retry_after(response: httpx.Response) -> float:
    value = response.headers.get("retry-after", "")
    try:
        return min(float(value), 300.0)
    except ValueError:
        return 0.0


def expect(condition: bool, label: str, message: str) -> None:
    """A provider's answer must have this shape; else the document fails with "malformed result: …"."""
    if not condition:
        raise ProviderError(f"{label}: malformed result: {message}")
