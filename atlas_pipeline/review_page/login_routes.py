"""The review page's login and logout: a person's name and password checked (``review.accounts``), failures slowed
down per account and per address (``login_guard``), a session cookie given and taken back (``sessions``)."""

from __future__ import annotations

import logging
import math

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from atlas_pipeline.config.hosts import LOOPBACK_ADDRESSES
from atlas_pipeline.review.accounts import authenticate
from atlas_pipeline.review_page.common import TEMPLATES
from atlas_pipeline.review_page.login_guard import account_key, address_key
from atlas_pipeline.review_page.page_state import ReviewPage
from atlas_pipeline.review_page.sessions import SESSION_COOKIE

LOG = logging.getLogger("atlas.review")


def _local_path(raw: str) -> str:
    """A path on this site to go back to (never another site's address)."""
    return raw if raw.startswith("/") and not raw.startswith("//") and "\\" not in raw else "/"


async def login(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    context = {"next": _local_path(request.query_params.get("next", "/")), "error": "", "reviewer": ""}
    context["proxy"] = bool(page.access.auth_header)
    context["accounts"] = bool(page.sessions.accounts())
    if request.method == "GET":
        return TEMPLATES.TemplateResponse(request, "login.html", context)
    form = await request.form()
    context["next"] = _local_path(str(form.get("next") or "/"))
    name, address = str(form.get("name") or ""), page.sessions.client_address(request)
    # a loopback peer is this machine (or a TLS proxy on it that forwards no address): counting it as one address
    # would let five failures of anyone lock the whole team out; the account's count still holds
    keys = [account_key(name)] + ([address_key(address)] if address not in LOOPBACK_ADDRESSES else [])
    locked = page.sessions.guard.attempt(keys)  # counted as a failure until the password proves right
    if locked is not None:  # refused without looking at the password: the right one waits too
        whom = f"for {locked.who!r}" if locked.kind == "account" else "for this address"
        context["error"] = f"too many failed logins {whom}: try again in {locked.retry_after} s"
        (LOG.warning if locked.first else LOG.info)(
            "review page login refused while locked: %s %r for %d s more (as %r)",
            locked.kind, locked.who[:60], locked.retry_after, name[:60],
        )  # fmt: skip
        headers = {"Retry-After": str(locked.retry_after)}
        return TEMPLATES.TemplateResponse(request, "login.html", context, status_code=429, headers=headers)
    account = await run_in_threadpool(authenticate, page.sessions.accounts(), name, str(form.get("password") or ""))
    if account is None:
        context["error"] = "unknown name or wrong password"
        counts = page.sessions.guard.failed(keys)  # never the password, in the log or anywhere
        in_a_row = ", ".join(f"{n} for the {kind}" for (kind, _), n, _ in counts)
        LOG.warning("failed login to the review page as %r from %r (in a row: %s)", name[:120], address, in_a_row)
        for (kind, who), failures, wait in counts:
            if wait > 0:
                LOG.warning(
                    "review page logins locked for %s %r: %d s after %d failed logins in a row",
                    kind, who[:60], math.ceil(wait), failures,
                )  # fmt: skip
        return TEMPLATES.TemplateResponse(request, "login.html", context, status_code=401)
    page.sessions.guard.succeeded(keys[:1])  # the account's count only: a login of one's own never clears an address
    response = RedirectResponse(context["next"], status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        page.sessions.start(account),
        httponly=True,
        samesite="strict",
        secure=page.sessions.cookies_secure(request),
        max_age=int(page.access.session_hours * 3600),
    )
    return response


async def logout(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    page.sessions.end(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        SESSION_COOKIE, httponly=True, samesite="strict", secure=page.sessions.cookies_secure(request)
    )
    return response
