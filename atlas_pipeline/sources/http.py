"""Polite HTTP: a descriptive User-Agent, robots.txt honoured, conditional GET, a timeout and a size limit on every
request. Nothing here decides *when* to ask — ``pace`` does; this module only asks well."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

import httpx2 as httpx
from protego import Protego

from atlas_pipeline.core.errors import AtlasError

ROBOTS_TTL_SECONDS = 24 * 3600


class FetchError(AtlasError, RuntimeError):
    """A request that did not give a usable answer; the message says why (status, timeout, size, robots).
    ``permanent``: asking again will not help (404, 410, a body over the limit, a URL that is not one) — the item
    is given up at once and the source's health is not at stake; otherwise (timeouts, 5xx, network) it is."""

    def __init__(self, message: str, permanent: bool = False) -> None:
        super().__init__(message)
        self.permanent = permanent


class DisallowedError(FetchError):
    """robots.txt of the site does not let this User-Agent fetch the URL: never retried as a failure."""

    def __init__(self, message: str) -> None:
        super().__init__(message, permanent=True)


TRANSIENT_STATUSES = frozenset({408, 425, 429})
MAX_ROBOTS_BYTES = 500_000
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
DEADLINE_TIMEOUTS = 3  # a request's whole answer within this many read timeouts: a trickling server is a failure


@dataclass(frozen=True, slots=True)
class Fetched:
    """An answer: ``not_modified`` (304, no body) or the body with its validators and content type."""

    url: str
    status: int
    body: bytes = b""
    content_type: str = ""
    etag: str = ""
    last_modified: str = ""

    @property
    def not_modified(self) -> bool:
        return self.status == 304


def domain_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL ("" for one that cannot be split: it is refused when fetched)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return f"{parts.scheme}://{parts.netloc}".lower()


class PoliteClient:
    """One client per collection pass. ``robots`` caches robots.txt texts by domain ((text, fetched at)); pass the
    same dict again to keep it across passes."""

    def __init__(
        self,
        user_agent: str,
        timeout_seconds: float,
        max_bytes: int,
        robots: dict[str, tuple[str, float]] | None = None,
        before_hop: Callable[[str], None] | None = None,
    ) -> None:
        self.user_agent = user_agent
        self.max_bytes = max_bytes
        self.robots = robots if robots is not None else {}
        self.deadline_seconds = DEADLINE_TIMEOUTS * timeout_seconds
        self.before_hop = before_hop  # a redirect to another site: the caller's pace decides (raises FetchError)
        self._client = httpx.Client(
            headers={"User-Agent": user_agent},
            timeout=httpx.Timeout(timeout_seconds),
            follow_redirects=False,  # followed by hand: every hop checked like the first request
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> PoliteClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def allowed(self, url: str) -> bool:
        """Whether robots.txt lets us fetch ``url`` (a missing robots.txt allows everything; one that cannot be read
        for a server error or a timeout raises ``FetchError`` — we do not guess)."""
        domain = domain_of(url)
        cached = self.robots.get(domain)
        if cached is None or time.time() - cached[1] > ROBOTS_TTL_SECONDS:
            deadline = time.monotonic() + self.deadline_seconds
            try:
                with self._client.stream("GET", f"{domain}/robots.txt") as response:
                    status = response.status_code
                    body = b""
                    for chunk in response.iter_bytes():
                        body += chunk
                        self._in_time(f"{domain}/robots.txt", deadline)
                        if len(body) > MAX_ROBOTS_BYTES:  # Google's limit: the rest is not read
                            break
            except httpx.TimeoutException as error:
                raise FetchError(f"robots.txt of {domain} timed out ({type(error).__name__})") from error
            except (httpx.HTTPError, httpx.InvalidURL, ValueError) as error:
                raise FetchError(f"robots.txt of {domain} cannot be read: {type(error).__name__}: {error}") from error
            if status >= 500 or status in TRANSIENT_STATUSES:
                raise FetchError(f"robots.txt of {domain} answered HTTP {status}")
            text = body.decode("utf-8", "replace") if status == 200 else ""  # 4xx: no rules
            cached = (text, time.time())
            self.robots[domain] = cached
        return Protego.parse(cached[0]).can_fetch(url, self.user_agent)

    def _in_time(self, url: str, deadline: float) -> None:
        if time.monotonic() > deadline:
            raise FetchError(f"{url} took longer than {self.deadline_seconds:g} s in all (a server sending slowly)")

    def get(self, url: str, etag: str = "", last_modified: str = "") -> Fetched:
        """GET ``url`` (conditional when validators are given), following at most ``MAX_REDIRECTS`` redirects by
        hand — each hop an http(s) URL that robots.txt allows, and, on another site, one the caller's pace allows;
        ``DisallowedError`` when robots.txt forbids one, ``FetchError`` for a timeout, a whole answer slower than
        ``deadline_seconds``, a network error, an HTTP error status or a body over the size limit."""
        first = url
        deadline = time.monotonic() + self.deadline_seconds
        for _ in range(MAX_REDIRECTS + 1):
            answer = self._get_one(url, etag, last_modified, deadline, first)
            if isinstance(answer, Fetched):
                return answer
            following = urljoin(url, answer)
            if self.before_hop is not None and domain_of(following) != domain_of(url):
                self.before_hop(following)
            url = following
        raise FetchError(f"{first}: more than {MAX_REDIRECTS} redirects", permanent=True)

    def _get_one(self, url: str, etag: str, last_modified: str, deadline: float, first: str) -> Fetched | str:
        """One hop: the answer, or where a redirect points."""
        if not url.startswith(("http://", "https://")) or not domain_of(url):
            what = "" if url == first else f" (redirected from {first})"
            raise FetchError(f"{url!r} is not a URL that can be fetched{what}", permanent=True)
        if not self.allowed(url):
            what = "" if url == first else f" (redirected from {first})"
            raise DisallowedError(f"robots.txt of {domain_of(url)} disallows {urlsplit(url).path or '/'}{what}")
        headers = {}
        if etag:
            headers["If-None-Match"] = etag
        if last_modified:
            headers["If-Modified-Since"] = last_modified
        try:
            with self._client.stream("GET", url, headers=headers) as response:
                if response.status_code == 304:
                    return Fetched(url=str(response.url), status=304, etag=etag, last_modified=last_modified)
                status = response.status_code
                if status in REDIRECTS and response.headers.get("Location"):
                    return response.headers["Location"]
                if status >= 400:
                    permanent = status < 500 and status not in TRANSIENT_STATUSES
                    raise FetchError(f"{url} answered HTTP {status}", permanent=permanent)
                declared = response.headers.get("Content-Length", "")
                if declared.isdigit() and int(declared) > self.max_bytes:
                    raise FetchError(
                        f"{url} is {int(declared):,} bytes, over the limit of {self.max_bytes:,}", permanent=True
                    )
                chunks: list[bytes] = []
                size = 0
                for chunk in response.iter_bytes():
                    size += len(chunk)
                    self._in_time(url, deadline)
                    if size > self.max_bytes:
                        raise FetchError(
                            f"{url} is over the limit of {self.max_bytes:,} bytes (stopped reading)", permanent=True
                        )
                    chunks.append(chunk)
                return Fetched(
                    url=str(response.url),
                    status=response.status_code,
                    body=b"".join(chunks),
                    content_type=response.headers.get("Content-Type", "").split(";")[0].strip().lower(),
                    etag=response.headers.get("ETag", ""),
                    last_modified=response.headers.get("Last-Modified", ""),
                )
        except httpx.TimeoutException as error:
            raise FetchError(f"{url} timed out ({type(error).__name__})") from error
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as error:
            raise FetchError(f"{url} is not a URL that can be fetched: {error}", permanent=True) from error
        except httpx.HTTPError as error:
            raise FetchError(f"{url}: {type(error).__name__}: {error}") from error
