"""Every answer from an LLM endpoint within a total time and a size, whatever the endpoint does.

The ``openai`` client bounds each *read* (``ATLAS_LLM_TIMEOUT_SECONDS``), not the answer: an endpoint that trickles
a byte every two seconds, or streams an endless body, holds a run for ever and fills the memory. ``BoundedTransport``
sits under the client (its ``http_client``) and wraps every response's body: bytes are counted as they arrive and the
clock is read after each chunk; past ``deadline_seconds`` since the request was sent, or past ``max_bytes``, the
connection is closed and ``AnswerCutOff`` raised (what the client reports as a failed request, its cause kept). Each
read also waits no longer than what is left of the deadline. Error bodies pass through the same counter: the client
reads them whole before it raises.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2 as httpx


class AnswerCutOff(httpx.TransportError):
    """The endpoint's answer was cut off here: too slow in total (``kind`` "deadline") or too large ("size")."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, started: float, deadline: float, max_bytes: int, clock) -> None:
        self.inner, self.started, self.deadline, self.max_bytes, self.clock = inner, started, deadline, max_bytes, clock

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        for chunk in self.inner:
            received += len(chunk)
            if received > self.max_bytes:
                self.inner.close()
                raise AnswerCutOff(
                    f"the endpoint's answer passed {self.max_bytes:,} bytes (ATLAS_LLM_MAX_ANSWER_BYTES): cut off",
                    "size",
                )
            elapsed = self.clock() - self.started
            if elapsed > self.deadline:
                self.inner.close()
                raise AnswerCutOff(
                    f"the endpoint's answer took more than {self.deadline:g} s in all (ATLAS_LLM_DEADLINE_SECONDS; "
                    f"{received:,} bytes by then): cut off",
                    "deadline",
                )
            yield chunk

    def close(self) -> None:
        self.inner.close()


class BoundedTransport(httpx.BaseTransport):
    """An ``HTTPTransport`` whose every answer (headers and body) ends within ``deadline_seconds`` of the request and
    holds at most ``max_bytes``."""

    def __init__(self, deadline_seconds: float, max_bytes: int, clock=time.monotonic) -> None:
        self.deadline, self.max_bytes, self.clock = deadline_seconds, max_bytes, clock
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        started = self.clock()
        timeouts = dict(request.extensions.get("timeout") or {})
        # no single wait (connecting, sending, the first byte, any later read) longer than the whole answer may take
        request.extensions["timeout"] = {
            name: min(value, self.deadline) if value is not None else self.deadline
            for name, value in ({"connect": None, "read": None, "write": None, "pool": None} | timeouts).items()
        }
        response = self.inner.handle_request(request)
        if self.clock() - started > self.deadline:
            response.close()
            raise AnswerCutOff(
                f"the endpoint's headers took more than {self.deadline:g} s (ATLAS_LLM_DEADLINE_SECONDS): cut off",
                "deadline",
            )
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _BoundedStream(response.stream, started, self.deadline, self.max_bytes, self.clock)
        return response

    def close(self) -> None:
        self.inner.close()


def bounded_client(deadline_seconds: float, max_bytes: int) -> httpx.Client:
    """An HTTP client for the ``openai`` client: every answer bounded in time and size."""
    return httpx.Client(transport=BoundedTransport(deadline_seconds, max_bytes), follow_redirects=True)
