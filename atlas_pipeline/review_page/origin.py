"""Changes only from the review page itself: a browser names the page a request comes from (Origin, else Referer) with
every POST, so a change asked by another site's page — a form it submits to this one, with the person's cookies —
is refused before any handler runs. One rule for every route, not a check each handler must remember; the login
cookie's ``samesite=strict`` says the same from the other side."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Receive, Scope, Send

READING = frozenset({"GET", "HEAD", "OPTIONS"})  # what changes nothing, from anywhere
REFUSED = "refused: a change must come from the review page itself"


def same_origin(headers: Headers) -> bool:
    """The request comes from a page of this site (Origin, else Referer, names the Host it was sent to), or from no
    browser at all (neither header: curl, a script on this machine)."""
    origin = headers.get("origin") or headers.get("referer")
    if not origin:
        return True
    return urlsplit(origin).netloc == headers.get("host", "")


class SameOriginChanges:
    """ASGI middleware: any request but GET, HEAD or OPTIONS from another site's page is answered 403 (plain text)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] not in READING and not same_origin(Headers(scope=scope)):
            await PlainTextResponse(REFUSED, status_code=403)(scope, receive, send)
            return
        await self.app(scope, receive, send)
