"""Every answer from a remote server — an LLM endpoint, a parsing provider — within a total time and a size, whatever
the server does.

The ``openai`` client bounds each *read* (``ATLAS_LLM_TIMEOUT_SECONDS``), not the answer: an endpoint that trickles
its headers or body a byte at a time, or streams an endless body, holds a run for ever and fills the memory.
``BoundedTransport`` sits under the client (its ``http_client``): for every chat-completions request (every request,
for a provider's client: ``path=None``) a watchdog shuts
the request's socket down once ``deadline_seconds`` have passed since it was sent — however the endpoint sends its
headers or body, no read outlives the deadline — and the body's bytes are counted as they arrive, the connection
closed past ``max_bytes``. A compressed body (``Content-Encoding: gzip`` or ``deflate``, the only codings asked for)
is inflated here, a bounded piece at a time, and counted *after* decoding: a 1 MB body that would inflate to a
gigabyte is cut at ``max_bytes`` of it; a coding not asked for is refused. Either way ``AnswerCutOff`` is raised
(what the client reports as a failed request, its cause kept). Error bodies pass through the same counter (the
client reads them whole before it raises). Each request has a connection of its own (no keep-alive: a connection shut
by the watchdog is never reused; an LLM answer takes seconds, the handshake milliseconds). Proxies from the
environment (``HTTPS_PROXY``, ``NO_PROXY``) are honoured.

The Batch API's file uploads and downloads (which may hold thousands of answers) keep the client's own timeouts.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import httpx2 as httpx
from httpx2._utils import get_environment_proxies

from atlas_pipeline.core.errors import AtlasError

BOUNDED_PATH = "/chat/completions"
LLM_TIMEOUT = httpx.Timeout(600.0, connect=5.0)  # the openai client's reads; the watchdog bounds the whole answer
LLM_SETTINGS = ("ATLAS_LLM_DEADLINE_SECONDS", "ATLAS_LLM_MAX_ANSWER_BYTES")  # the settings a cut-off names


class AnswerCutOff(AtlasError, httpx.TransportError):
    """The endpoint's answer was cut off here: too slow in total (``kind`` "deadline") or too large ("size")."""

    def __init__(self, message: str, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class _Watchdog:
    """Shuts a request's socket down at its deadline (the blocked read then ends at once)."""

    def __init__(self, deadline: float, setting: str = "ATLAS_LLM_DEADLINE_SECONDS") -> None:
        self.deadline, self.setting = deadline, setting
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
            f"the endpoint's answer took more than {self.deadline:g} s in all ({self.setting}; "
            f"{received:,} bytes by then): cut off",
            "deadline",
        )


ACCEPTED_CODINGS = ("gzip", "x-gzip", "deflate")
PIECE = 65_536  # the most one inflating step puts out: a bomb never inflates further than the cap and a piece


class _Inflate:
    """A gzip or deflate body inflated a piece at a time (``zlib``'s ``max_length``), never all of a chunk at once."""

    def __init__(self, coding: str) -> None:
        self.coding = coding
        self.started = False
        self.inflater = zlib.decompressobj(zlib.MAX_WBITS | 16 if coding != "deflate" else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        while data:
            try:
                out = self.inflater.decompress(data, PIECE)
            except zlib.error as error:
                if self.coding == "deflate" and not self.started:  # deflate sent raw, without its zlib wrapper
                    self.inflater, self.started = zlib.decompressobj(-zlib.MAX_WBITS), True
                    continue
                raise AnswerCutOff(f"the endpoint's {self.coding} answer cannot be decoded: {error}", "size") from error
            self.started = True
            data = self.inflater.unconsumed_tail
            if out:
                yield out

    def rest(self) -> bytes:
        return self.inflater.flush(PIECE)


def _codings(response: httpx.Response) -> list[str]:
    listed = ",".join(response.headers.get_list("content-encoding"))
    return [c.strip().lower() for c in listed.split(",") if c.strip() and c.strip().lower() != "identity"]


class _BoundedStream(httpx.SyncByteStream):
    def __init__(
        self, inner: httpx.SyncByteStream, watchdog: _Watchdog, max_bytes: int, coding: str, setting: str
    ) -> None:
        self.inner, self.watchdog, self.max_bytes, self.setting = inner, watchdog, max_bytes, setting
        self.inflate = _Inflate(coding) if coding else None

    def _too_large(self, wire: int) -> AnswerCutOff:
        decoded = f" once decoded ({self.inflate.coding}; {wire:,} bytes on the wire)" if self.inflate else ""
        return AnswerCutOff(
            f"the endpoint's answer passed {self.max_bytes:,} bytes{decoded} ({self.setting}): cut off",
            "size",
        )

    def __iter__(self) -> Iterator[bytes]:
        received = wire = 0
        try:
            for chunk in self.inner:
                wire += len(chunk)
                if wire > self.max_bytes:
                    raise self._too_large(wire)
                for piece in self.inflate.feed(chunk) if self.inflate else (chunk,):
                    received += len(piece)
                    if received > self.max_bytes:
                        raise self._too_large(wire)
                    if self.watchdog.fired:
                        raise self.watchdog.cut(received)
                    yield piece
            rest = self.inflate.rest() if self.inflate else b""
            if received + len(rest) > self.max_bytes:
                raise self._too_large(wire)
            if rest:
                yield rest
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
    """An ``HTTPTransport`` whose every answer to a request for ``path`` (every request: None) — headers and body —
    ends within ``deadline_seconds`` of the request and holds at most ``max_bytes``, counted after decoding."""

    def __init__(
        self,
        deadline_seconds: float,
        max_bytes: int,
        proxy: str | None = None,
        path: str | None = BOUNDED_PATH,
        settings: tuple[str, str] = LLM_SETTINGS,
    ) -> None:
        self.deadline, self.max_bytes, self.path, self.settings = deadline_seconds, max_bytes, path, settings
        self.inner = httpx.HTTPTransport(proxy=proxy, limits=httpx.Limits(max_keepalive_connections=0))

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if self.path is not None and not request.url.path.endswith(self.path):
            return self.inner.handle_request(request)
        watchdog = _Watchdog(self.deadline, self.settings[0])
        earlier: Callable[[str, dict], Any] | None = request.extensions.get("trace")

        def trace(event: str, info: dict[str, Any]) -> None:
            watchdog.trace(event, info)
            if earlier is not None:
                earlier(event, info)

        request.extensions["trace"] = trace
        request.headers["Accept-Encoding"] = "gzip, deflate"  # what the counter below decodes: nothing else
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
        codings = _codings(response)
        if len(codings) > 1 or (codings and codings[0] not in ACCEPTED_CODINGS):
            watchdog.stop()
            response.stream.close()
            said = ", ".join(codings)
            raise AnswerCutOff(f"the endpoint's answer is encoded as {said}, which was not asked for: refused", "size")
        for header in ("content-encoding", "content-length"):  # decoded here: the client reads it as it comes
            if codings and header in response.headers:
                del response.headers[header]
        coding = codings[0] if codings else ""
        response.stream = _BoundedStream(response.stream, watchdog, self.max_bytes, coding, self.settings[1])
        return response

    def close(self) -> None:
        self.inner.close()


def bounded_client(
    deadline_seconds: float,
    max_bytes: int,
    path: str | None = BOUNDED_PATH,
    timeout: httpx.Timeout | float = LLM_TIMEOUT,
    follow_redirects: bool = True,
    settings: tuple[str, str] = LLM_SETTINGS,
) -> httpx.Client:
    """An HTTP client whose every answer to a request for ``path`` (the ``openai`` client's chat completions; every
    request: None) is bounded in time and size, through the environment's proxies as httpx would take them."""
    mounts: dict[str, httpx.BaseTransport | None] = {
        pattern: None if proxy is None else BoundedTransport(deadline_seconds, max_bytes, proxy, path, settings)
        for pattern, proxy in get_environment_proxies().items()
    }
    return httpx.Client(
        transport=BoundedTransport(deadline_seconds, max_bytes, path=path, settings=settings),
        mounts=mounts,
        follow_redirects=follow_redirects,
        timeout=timeout,
    )
