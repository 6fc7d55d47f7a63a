"""Accounts that resist guessing, on the real review page (uvicorn on 127.0.0.1): failed logins are slowed down per
account and per client address — refused with 429 and Retry-After, the password not even checked, the right one
included — until the wait has passed; a success clears the counts; every failure and lockout is logged, never a
password. And the page's cookies are Secure whenever it is served beyond this machine."""

import http.client
import logging
import time
import urllib.parse
from email.message import Message

import pytest

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.accounts import add_account, load_accounts
from atlas_pipeline_tests.support.helpers import serve

PASSWORD = "a long passphrase"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _post(site: str, path: str, form: dict, headers: dict | None = None) -> tuple[int, Message, str]:
    """(status, headers, body) of a POST, redirects not followed; ``headers`` may set Host."""
    address = urllib.parse.urlsplit(site)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
    try:
        body = urllib.parse.urlencode(form).encode()
        sent = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
        connection.request("POST", path, body, sent)
        answer = connection.getresponse()
        return answer.status, answer.headers, answer.read().decode("utf-8", "replace")
    finally:
        connection.close()


def _login(site: str, name: str, password: str, headers: dict | None = None) -> tuple[int, Message, str]:
    return _post(site, "/login", {"name": name, "password": password, "next": "/"}, headers)


@pytest.fixture
def page_for(knowledge_base, settings_for, instance, monkeypatch):
    """A review page with two accounts, on given settings; counts the password checks it makes."""
    from atlas_pipeline.review_page import app as review_app
    from atlas_pipeline.review_page import login_routes

    checks = []
    real = login_routes.authenticate
    monkeypatch.setattr(login_routes, "authenticate", lambda *args: checks.append(args[1]) or real(*args))

    def make(clock: Clock | None = None, **extra: str):
        settings = settings_for(knowledge_base, **extra)
        for name in {"Ana Lima", "Dan"} - set(load_accounts(settings.review.users)):
            add_account(settings.review.users, name, "extractor", PASSWORD)
        app = review_app.create_app(Deployment.from_settings(settings), instance=lambda: instance)
        if clock is not None:
            app.state.page.sessions.guard.clock = clock
        return app, checks

    return make


def test_twenty_failed_logins_are_slowed_down_and_the_right_password_waits_too(page_for, caplog):
    clock = Clock()
    app, checks = page_for(clock)
    guard = app.state.page.sessions.guard
    caplog.set_level(logging.INFO, logger="atlas.review")
    with serve(app) as site:
        answers = [_login(site, "Ana Lima", f"wrong guess {n}") for n in range(20)]
        assert [status for status, _, _ in answers] == [401] * 5 + [429] * 15
        assert len(checks) == 5  # locked: the password is not even checked
        status, headers, body = _login(site, "Ana Lima", PASSWORD)  # the right one, during the wait
        assert status == 429 and headers["Retry-After"] == "1" and len(checks) == 5
        assert "too many failed logins for &#39;Ana Lima&#39;: try again in 1 s" in body
        assert "set-cookie" not in headers

        clock.now += 1  # the wait is over: one more wrong guess, and the next wait doubles
        assert _login(site, "Ana  Lima", "wrong guess 21")[0] == 401  # the same account, however spaced
        status, headers, _ = _login(site, "Ana Lima", PASSWORD)
        assert status == 429 and headers["Retry-After"] == "2"
        clock.now += 2
        status, headers, _ = _login(site, "Ana Lima", PASSWORD)
        assert status == 303 and headers["Set-Cookie"].startswith("atlas_session=")
        assert guard.failures(("account", "Ana Lima")) == 0 and guard.failures(("address", "127.0.0.1")) == 0

        # counts cleared: the free failures are free again
        assert [_login(site, "Ana Lima", "wrong again!")[0] for _ in range(6)] == [401] * 5 + [429]

    log = caplog.text
    assert log.count("failed login to the review page as 'Ana Lima' from '127.0.0.1'") == 10
    assert "failed login to the review page as 'Ana  Lima' from '127.0.0.1' (in a row: 6 for the account" in log
    assert "review page logins locked for account 'Ana Lima': 1 s after 5 failed logins in a row" in log
    assert "review page logins locked for account 'Ana Lima': 2 s after 6 failed logins in a row" in log
    assert "review page login refused while locked: account 'Ana Lima'" in log
    assert "wrong guess" not in log and PASSWORD not in log  # never a password


def test_the_configured_wait_passes_on_the_real_clock(page_for):
    app, checks = page_for(review_login_free_failures="3", review_login_max_lockout_seconds="1")
    with serve(app) as site:
        assert [_login(site, "Dan", "not his password")[0] for _ in range(3)] == [401] * 3
        status, headers, _ = _login(site, "Dan", PASSWORD)
        assert status == 429 and headers["Retry-After"] == "1" and len(checks) == 3
        time.sleep(1.05)
        assert _login(site, "Dan", PASSWORD)[0] == 303


def test_one_address_guessing_across_accounts_is_slowed_down(page_for):
    app, checks = page_for(Clock())
    with serve(app) as site:
        names = ["Ana Lima", "Dan", "Ben", "Carla", "Eve"]
        assert [_login(site, name, "Summer2024!")[0] for name in names] == [401] * 5
        # from this machine (a TLS proxy in front forwarding no address looks the same) the address is not counted:
        # five failures of anyone never lock the whole team out; each account's own count holds
        assert _login(site, "Dan", PASSWORD)[0] == 303 and len(checks) == 6
        # a forwarded address the page does not trust never helps: the account's count holds whatever it says
        spoofed = [_login(site, "Zoe", "Summer2024!", {"X-Forwarded-For": f"203.0.113.{n}"})[0] for n in range(7)]
        assert spoofed == [401] * 5 + [429] * 2

    # behind the trusted proxy (ATLAS_REVIEW_AUTH_HEADER), the address it forwards is the one counted
    proxied, checks = page_for(Clock(), review_auth_header="X-Forwarded-User")
    with serve(proxied) as site:
        first = {"X-Forwarded-For": "198.51.100.7"}
        assert [_login(site, name, "Summer2024!", first)[0] for name in names] == [401] * 5
        status, headers, body = _login(site, "Dan", PASSWORD, first)  # Dan has one failure, this address five
        assert status == 429 and headers["Retry-After"] == "1" and "too many failed logins for this address" in body
        assert _login(site, "Ana Lima", PASSWORD, first)[0] == 429
        other = {"X-Forwarded-For": "203.0.113.200, 198.51.100.8"}  # what the client wrote first is not believed
        assert _login(site, "Ana Lima", PASSWORD, other)[0] == 303
        assert _login(site, "Ana Lima", PASSWORD, {"X-Forwarded-For": "203.0.113.200, 198.51.100.7"})[0] == 429


def test_cookies_are_secure_beyond_loopback(page_for, knowledge_base, settings_for, instance):
    app, _ = page_for(trusted_hosts="review.example.org")
    with serve(app) as site:
        port = urllib.parse.urlsplit(site).port
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"):
            status, headers, _ = _login(site, "Ana Lima", PASSWORD, {"Host": host})
            assert status == 303 and "secure" not in headers["Set-Cookie"].lower(), host
        status, headers, _ = _login(site, "Ana Lima", PASSWORD, {"Host": "review.example.org"})
        cookie = headers["Set-Cookie"]
        assert status == 303 and cookie.startswith("atlas_session=") and "; secure" in cookie.lower()
        assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
        token = cookie.split(";")[0]
        status, headers, _ = _post(site, "/logout", {}, {"Host": "review.example.org", "Cookie": token})
        assert status == 303 and "; secure" in headers["Set-Cookie"].lower()

    proxied, _ = page_for(review_auth_header="X-Forwarded-User")
    with serve(proxied) as site:  # TLS ends at the trusted proxy, which says so
        status, headers, _ = _login(site, "Dan", PASSWORD, {"X-Forwarded-Proto": "https"})
        assert status == 303 and "; secure" in headers["Set-Cookie"].lower()
        status, headers, _ = _login(site, "Dan", PASSWORD, {"X-Forwarded-Proto": "http"})
        assert status == 303 and "secure" not in headers["Set-Cookie"].lower()

    # an open page (no account, this machine only): the reviewer's name cookie follows the same rule
    open_page = settings_for(knowledge_base, trusted_hosts="review.example.org", review_users="")
    from atlas_pipeline.review_page.app import create_app

    with serve(create_app(Deployment.from_settings(open_page), instance=lambda: instance)) as site:
        _, headers, _ = _post(site, "/reviewer", {"reviewer": "Ana"}, {"Host": "review.example.org"})
        assert headers["Set-Cookie"].startswith("atlas_reviewer=") and "; secure" in headers["Set-Cookie"].lower()
        _, headers, _ = _post(site, "/reviewer", {"reviewer": "Ana"})
        assert "secure" not in headers["Set-Cookie"].lower()
