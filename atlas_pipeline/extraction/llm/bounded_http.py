"""Every answer from an LLM endpoint within a total time and a size, whatever the endpoint does.

The ``openai`` client bounds each *read* (``ATLAS_LLM_TIMEOUT_SECONDS``), not the answer: an endpoint that trickles
its headers or body a byte at a time, or streams an endless body, holds a run for ever and fills the memory.
``BoundedTransport`` sits under the client (its ``http_client``): for every chat-completions request a watchdog shuts
the request's socket down once ``deadline_seconds`` have passed since it was sent — however the endpoint sends its
headers or body, no read outlives the deadline — and the body's bytes are counted as they arrive, the connection
closed past ``max_bytes``. Either way ``AnswerCutOff`` is raised (what the client reports as a failed request, its
cause kept). Error bodies pass through the same counter (the client reads them whole before it raises). Each request
has a connection of its own (no keep-alive: a connection shut by the watchdog is never reused; an LLM answer takes
seconds, the handshake milliseconds). Proxies from the environment (``HTTPS_PROXY``, ``NO_PROXY``) are honoured.

The Batch API's file uploads and downloads (which may hold thousands of answers) keep the client's own timeouts.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import httpx2 as httpx
from httpx2._utils import get_environment_proxies

from atlas_pipeline.core.errors import AtlasError

BOUNDED_PATH = "/chat/completions"


class AnswerCutOff(AtlasError, httpx.TransportError):
    """The endpoint's answer was cut off here: too slow in total (``kind`` "deadline") or too large ("size")."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Watchdog:
    """Shuts a request's socket down at its deadline (the blocked read then ends at once)."""

    def __init__(self, deadline: float) -> None:
        self.deadline = deadline
        self.fired = False
        self._socket: socket.socket | None = None
        self._lock = threading.Lock()
        self._timer = threading.Timer(deadline, self._fire)
        self._timer.daemon = True

    def trace(self, event: str, info: dict[str, Any]) -> None:
        """httpcore's trace hook: the socket, as soon as it is connected."""
        if event == "connection.connect_tcp.complete" and info.get("return_value") is not None:
            with self._lock:
                self._socket = info["return_value"].get_extra_info("socket")
                if self.fired:
                    self._shut()

    def start(self) -> None:
        self._timer.start()

    def stop(self) -> None:
        self._timer.cancel()

    def _fire(self) -> None:
        with self._lock:
            self.fired = True
            self._shut()

    def _shut(self) -> None:
        if self._socket is not None:
            with contextlib.suppress(OSError):
                self._socket.shutdown(socket.SHUT_RDWR)

    def cut(self, received: int) -> AnswerCutOff:
        return AnswerCutOff(
            f"the endpoint's answer took more than {self.deadline:g} s in all (ATLAS_LLM_DEADLINE_SECONDS; "
            f"{received:,} bytes by then): cut off",
            "deadline",
        )


class _BoundedStream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, watchdog: _Watchdog, max_bytes: int) -> None:
        self.inner, self.watchdog, self.max_bytes = inner, watchdog, max_bytes

    def __iter__(self) -> Iterator[bytes]:
        received = 0
        try:
            for chunk in self.inner:
                received += len(chunk)
                if received > self.max_bytes:
                    raise AnswerCutOff(
                        f"the endpoint's answer passed {self.max_bytes:,} bytes (ATLAS_LLM_MAX_ANSWER_BYTES): cut off",
                        "size",
                    )
                if self.watchdog.fired:
                    raise self.watchdog.cut(received)
                yield chunk
        except httpx.TransportError as error:
            if self.watchdog.fired and not isinstance(error, AnswerCutOff):
                raise self.watchdog.cut(received) from error
            raise
        finally:
            self.watchdog.stop()

    def close(self) -> None:
        self.watchdog.stop()
        self.inner.close()


class BoundedTransport(httpx.BaseTransport):
    """An ``HTTPTransport`` whose every chat-completions answer (headers and body) ends within ``deadline_seconds``
    of the request and holds at most ``max_bytes``."""

    def __init__(self, deadline_seconds: float, max_bytes: int, proxy: str | None = None) -> None:
        self.deadline, self.max_bytes = deadline_seconds, max_bytes
        self.inner = httpx.HTTPTransport(proxy=proxy, limits=httpx.Limits(max_keepalive_connections=0))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith(BOUNDED_PATH):
            return self.inner.handle_request(request)
        watchdog = _Watchdog(self.deadline)
        earlier: Callable[[str, dict], Any] | None = request.extensions.get("trace")

        def trace(event: str, info: dict[str, Any]) -> None:
            watchdog.trace(event, info)
            if earlier is not None:
                earlier(event, info)

        request.extensions["trace"] = trace
        watchdog.start()
        try:
            response = self.inner.handle_request(request)
        except httpx.TransportError as error:
            watchdog.stop()
            if watchdog.fired:
                raise watchdog.cut(0) from error
            raise
        except BaseException:
            watchdog.stop()
            raise
        assert isinstance(response.stream, httpx.SyncByteStream)
        response.stream = _BoundedStream(response.stream, watchdog, self.max_bytes)
        return response

    def close(self) -> None:
        self.inner.close()


def bounded_client(deadline_seconds: float, max_bytes: int) -> httpx.Client:
    """An HTTP client for the ``openai`` client: every chat-completions answer bounded in time and size, through
    the environment's proxies as httpx would take them."""
    mounts: dict[str, httpx.BaseTransport | None] = {
        pattern: None if proxy is None else BoundedTransport(deadline_seconds, max_bytes, proxy)
        for pattern, proxy in get_environment_proxies().items()
    }
    return httpx.Client(
        transport=BoundedTransport(deadline_seconds, max_bytes),
        mounts=mounts,
        follow_redirects=True,
        timeout=httpx.Timeout(600.0, connect=5.0),
    )
