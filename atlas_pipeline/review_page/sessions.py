"""Who is at the review page: a login (accounts file) kept as a session, or the name a trusted proxy passes.

Sessions live in the page's memory: a random token in an HttpOnly, SameSite=Strict cookie, valid for
``ATLAS_REVIEW_SESSION_HOURS``; restarting `atlas review` logs everyone out (nothing to steal on disk). With no
account and no proxy header the page is open, as before, but it then listens on this machine only.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from dataclasses import dataclass

from starlette.requests import Request

from atlas_pipeline.config.settings import AtlasSettings
from atlas_pipeline.review.accounts import Account, load_accounts
from atlas_pipeline.review.decisions import reviewer_name

SESSION_COOKIE = "atlas_session"
OPEN_PATHS = ("/login",)


@dataclass
class _Session:
    name: str
    expires: float
    password: str  # a fingerprint of the password hash at login: a changed password ends the session


class Sessions:
    """The page's logins: token → who and until when."""

    def __init__(self, settings: AtlasSettings) -> None:
        self.settings = settings
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def accounts(self) -> dict[str, Account]:
        return load_accounts(self.settings.review_users)

    def required(self) -> bool:
        """Whether people must be known: a proxy passes their name, or the accounts file holds an account."""
        return bool(self.settings.review_auth_header) or bool(self.accounts())

    def start(self, account: Account) -> str:
        token = secrets.token_urlsafe(32)
        with self._lock:
            now = time.time()
            self._sessions = {k: s for k, s in self._sessions.items() if s.expires > now}  # the expired let go
            expires = now + self.settings.review_session_hours * 3600
            self._sessions[token] = _Session(account.name, expires, _fingerprint(account))
        return token

    def end(self, token: str) -> None:
        with self._lock:
            self._sessions.pop(token, None)

    def user(self, request: Request) -> Account | None:
        """Who sent the request: the proxy's header when one is configured, else the session's account (an account
        removed or changed since the login counts as it is now)."""
        accounts = self.accounts()
        header = self.settings.review_auth_header
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


def _fingerprint(account: Account) -> str:
    return hashlib.sha256(account.password_hash.encode()).hexdigest()[:16]
