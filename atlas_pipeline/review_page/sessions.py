"""Who is at the review page: a login (accounts file) kept as a session, or the name a trusted proxy passes.

Sessions live in the page's memory: a random token in an HttpOnly, SameSite=Strict cookie, valid for
``ATLAS_REVIEW_SESSION_HOURS``; restarting `atlas review` logs everyone out (nothing to steal on disk). With no
account and no proxy header the page is open, as before, but it then listens on this machine only.

The cookies are ``Secure`` whenever the page is served beyond this machine (see ``cookies_secure``), and failed logins
are counted per account and per client address (``login_guard``).
"""

from __future__ import annotations

import hashlib
import ipaddress
import secrets
import threading
import time
from dataclasses import dataclass

from starlette.requests import Request

from atlas_pipeline.config.hosts import LOOPBACK_ADDRESSES
from atlas_pipeline.deployment import PageAccess
from atlas_pipeline.review.accounts import Account, load_accounts, logins_required
from atlas_pipeline.review.decisions import reviewer_name
from atlas_pipeline.review_page.login_guard import LoginGuard

SESSION_COOKIE = "atlas_session"
OPEN_PATHS = ("/login",)


@dataclass
class _Session:
    name: str
    expires: float
    password: str  # a fingerprint of the password hash at login: a changed password ends the session


class Sessions:
    """The page's logins: token → who and until when."""

    def __init__(self, access: PageAccess) -> None:
        self.access = access
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()
        self.guard = LoginGuard(free_failures=access.login_free_failures, max_wait=access.login_max_lockout_seconds)

    def accounts(self) -> dict[str, Account]:
        return load_accounts(self.access.users_file)

    def required(self) -> bool:
        """Whether people must be known: a proxy passes their name, or the accounts file holds an account."""
        return logins_required(self.access.users_file, self.access.auth_header)

    def start(self, account: Account) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = time.time()
            self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now}  # the expired let go
            expires = now + self.access.session_hours * 3600
            self._sessions[token] = _Session(account.name, expires, _fingerprint(account))
        return token

    def end(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(token, None)

    def user(self, request: Request) -> Account | None:
        """Who sent the request: the proxy's header when one is configured, else the session's account (an account
        removed or changed since the login counts as it is now)."""
        accounts = self.accounts()
        header = self.access.auth_header
        if header:
            try:
                name = reviewer_name(" ".join(request.headers.get(header, "").split()))
            except ValueError:
                return None  # no name, or one that cannot be recorded as written
            return accounts.get(name) or Account(name=name, role="extractor")
        session = self._sessions.get(request.cookies.get(SESSION_COOKIE, ""))
        if session is None or session.expires <= time.time():
            return None
        account = accounts.get(session.name)
        return account if account is not None and _fingerprint(account) == session.password else None

    def behind_proxy(self) -> bool:
        """Whether requests come through the documented proxy (``ATLAS_REVIEW_AUTH_HEADER``: the page then listens
        on 127.0.0.1 and only that proxy reaches it), whose X-Forwarded-For and X-Forwarded-Proto are believed."""
        return bool(self.access.auth_header)

    def client_address(self, request: Request) -> str:
        """The address a login comes from, for counting failures: the connection's, or behind the trusted proxy the
        address it forwards (the last of X-Forwarded-For, the one it added). A forwarded address the page does not
        trust never counts: the server may already have taken it as the connection's (uvicorn does so for requests
        from 127.0.0.1), and then every such request counts under one address however its header varies."""
        peer = request.client.host if request.client else ""
        if self.behind_proxy():
            forwarded = _forwarded_for(request) if peer in LOOPBACK_ADDRESSES else None
            return forwarded or peer or "unknown"
        if peer and peer in ",".join(request.headers.getlist("x-forwarded-for")):
            return "forwarded by an untrusted proxy"
        return peer or "unknown"

    def cookies_secure(self, request: Request) -> bool:
        """Whether the page's cookies carry ``Secure``: always over https (the connection's, or X-Forwarded-Proto
        from the trusted proxy), and whenever the page is reached under another name than 127.0.0.1, localhost or
        [::1] — it is then served beyond this machine, where a cookie must never travel over plain http."""
        if request.url.scheme == "https":
            return True
        proto = request.headers.get("x-forwarded-proto", "").split(",")[-1].strip().lower()
        if self.behind_proxy() and proto == "https":
            return True
        return (request.url.hostname or "").lower() not in LOOPBACK_ADDRESSES


def _forwarded_for(request: Request) -> str | None:
    """The address a proxy on this machine forwards: the last one in X-Forwarded-For that is not this machine's
    (the proxy appends the address it was reached from; what comes before it the client may have written)."""
    items = [item.strip() for header in request.headers.getlist("x-forwarded-for") for item in header.split(",")]
    for item in reversed(items):
        try:
            address = ipaddress.ip_address(item.removeprefix("[").split("]")[0] if item.startswith("[") else item)
        except ValueError:
            return None  # not an address: the proxy is not the one described, believe nothing
        if not address.is_loopback:
            return str(address)
    return None


def _fingerprint(account: Account) -> str:
    return hashlib.sha256(account.password_hash.encode()).hexdigest()[:16]
