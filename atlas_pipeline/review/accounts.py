"""The review team's accounts: who may log in to the review page, with which role.

A small JSON file (``ATLAS_REVIEW_USERS``) managed by ``atlas users``: per person a role and a scrypt hash of their
password (the standard library's ``hashlib.scrypt``; a random salt each, never the password itself). Roles:

- ``extractor``: decides on values (approve, correct, reject, extract by hand);
- ``adjudicator``: also settles reviewers' disagreements (the consensus step);
- ``admin``: also uploads documents.

Once the file holds an account, the review page asks everyone to log in and records the decision under the login,
never a name typed in a box.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from atlas_pipeline.core.clock import now_iso
from atlas_pipeline.core.errors import AtlasError
from atlas_pipeline.review.decisions import reviewer_name

Role = Literal["extractor", "adjudicator", "admin"]
ROLES: tuple[str, ...] = ("extractor", "adjudicator", "admin")
MIN_PASSWORD_CHARS = 10
_SCRYPT = {"n": 2**14, "r": 8, "p": 1}  # OWASP's scrypt minimum; about 50 ms a check


class AccountError(AtlasError, ValueError):
    """An account cannot be made or changed; the message says why."""


class Account(BaseModel):
    name: str = Field(min_length=1, max_length=120)
    role: Role
    password_hash: str = ""  # empty: the account logs in through the trusted proxy header only
    created_at: str = ""

    def may_settle(self) -> bool:
        """Whether this person may settle a disagreement between reviewers."""
        return self.role in ("adjudicator", "admin")


def hash_password(password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **_SCRYPT)
    return f"scrypt${_SCRYPT['n']}${_SCRYPT['r']}${_SCRYPT['p']}${salt.hex()}${digest.hex()}"


def password_matches(password: str, stored: str) -> bool:
    try:
        kind, n, r, p, salt, digest = stored.split("$")
        if kind != "scrypt":
            return False
        got = hashlib.scrypt(password.encode(), salt=bytes.fromhex(salt), n=int(n), r=int(r), p=int(p), dklen=32)
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got.hex(), digest)


def load_accounts(path: str | Path) -> dict[str, Account]:
    """The accounts in the file (none when it does not exist); a damaged file is an error, never "no accounts"
    (that would open the page to anyone)."""
    file = Path(path)
    if not str(path) or not file.exists():
        return {}
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
        return {name: Account.model_validate({**item, "name": name}) for name, item in data["accounts"].items()}
    except (ValueError, KeyError, TypeError) as error:
        raise AccountError(
            f"the accounts file {file} cannot be read ({type(error).__name__}): fix or remove it"
        ) from None


def logins_required(path: str | Path, auth_header: str) -> bool:
    """Whether people are known by their login: a trusted proxy names them, or the accounts file holds an account.
    Then every decision has an author who logged in (a workbook dropped in the inbox has none). A damaged accounts
    file counts as accounts: it never opens anything to anyone."""
    try:
        return bool(auth_header) or bool(load_accounts(path))
    except AccountError:
        return True


def save_accounts(path: str | Path, accounts: dict[str, Account]) -> None:
    """Written whole to a temporary file then renamed (never half a file), readable by its owner only."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    data = {"accounts": {name: account.model_dump(exclude={"name"}) for name, account in sorted(accounts.items())}}
    handle, temporary = tempfile.mkstemp(dir=file.parent, prefix=".accounts-")
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        json.dump(data, out, indent=2)
    os.chmod(temporary, 0o600)
    os.replace(temporary, file)


def _checked_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_CHARS:
        raise AccountError(f"a password has at least {MIN_PASSWORD_CHARS} characters")
    return password


def add_account(path: str | Path, name: str, role: str, password: str | None) -> Account:
    """A new account (``password`` None: logs in through the trusted proxy header only)."""
    try:  # the name decisions are recorded under: the same rules as a reviewer's name typed on the page
        name = reviewer_name(" ".join(name.split()))
    except ValueError as error:
        raise AccountError(str(error)) from None
    if role not in ROLES:
        raise AccountError(f"unknown role {role!r}: {', '.join(ROLES)}")
    accounts = load_accounts(path)
    if name in accounts:
        raise AccountError(f"{name} already has an account (change it with `atlas users role` or `passwd`)")
    hashed = hash_password(_checked_password(password)) if password is not None else ""
    accounts[name] = Account(name=name, role=role, password_hash=hashed, created_at=now_iso())  # type: ignore[arg-type]
    save_accounts(path, accounts)
    return accounts[name]


def change_account(
    path: str | Path, name: str, *, role: str | None = None, password: str | None = None, remove: bool = False
) -> None:
    accounts = load_accounts(path)
    if name not in accounts:
        raise AccountError(f"no account {name!r} (accounts: {', '.join(accounts) or 'none'})")
    if remove:
        del accounts[name]
    if role is not None:
        if role not in ROLES:
            raise AccountError(f"unknown role {role!r}: {', '.join(ROLES)}")
        accounts[name].role = role  # type: ignore[assignment]
    if password is not None:
        accounts[name].password_hash = hash_password(_checked_password(password))
    save_accounts(path, accounts)


def authenticate(accounts: dict[str, Account], name: str, password: str) -> Account | None:
    """The account when the password is its own; the same work is done for an unknown name (no timing oracle)."""
    try:
        account = accounts.get(reviewer_name(" ".join(name.split())))
    except ValueError:
        account = None
    stored = account.password_hash if account and account.password_hash else _dummy()
    matches = password_matches(password, stored)
    return account if account and account.password_hash and matches else None


@functools.cache
def _dummy() -> str:
    return hash_password(secrets.token_hex(8))
