"""The review page's guard against guessed passwords (review_page.login_guard), on a clock the test moves, and how
the page tells where a login comes from and whether its cookies must be Secure (review_page.sessions)."""

from dataclasses import replace

import pytest
from starlette.requests import Request

from atlas_pipeline.config.settings import load_settings
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review_page.login_guard import LoginGuard, account_key, address_key
from atlas_pipeline.review_page.sessions import Sessions


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


ANA, HOME = account_key("Ana Lima"), address_key("198.51.100.7")


def _fail(guard: LoginGuard, *keys) -> None:
    assert guard.attempt(keys) is None, "refused while it should be free"
    guard.failed(keys)


def test_five_free_failures_then_a_wait_that_doubles_up_to_the_cap():
    clock = Clock()
    guard = LoginGuard(free_failures=5, max_wait=10, clock=clock)
    for _ in range(5):
        _fail(guard, ANA, HOME)
    assert guard.failures(ANA) == guard.failures(HOME) == 5
    waits = []
    for _ in range(6):
        refused = guard.attempt([ANA, HOME])  # refused attempts are not counted: the wait does not grow with them
        assert refused is not None and refused.first and guard.attempt([ANA, HOME]).first is False
        waits.append(refused.retry_after)
        clock.now += refused.seconds
        _fail(guard, ANA, HOME)
    assert waits == [1, 2, 4, 8, 10, 10]
    assert guard.failures(ANA) == 11
    assert guard.wait_after(10_000) == 10  # no overflow however long the siege


def test_a_success_clears_the_account_and_the_address():
    clock = Clock()
    guard = LoginGuard(free_failures=2, clock=clock)
    _fail(guard, ANA, HOME)
    _fail(guard, ANA, HOME)
    assert guard.attempt([ANA, HOME]) is not None and guard.locked_for(ANA) == 1
    clock.now += 1
    assert guard.attempt([ANA, HOME]) is None  # the right password this time
    guard.succeeded([ANA, HOME])
    assert guard.failures(ANA) == guard.failures(HOME) == 0 and len(guard) == 0


def test_either_key_locks_and_the_longest_wait_is_told():
    clock = Clock()
    guard = LoginGuard(free_failures=1, clock=clock)
    _fail(guard, ANA, HOME)
    clock.now += 1
    _fail(guard, account_key("Dan"), HOME)  # the address: two failures in a row, 2 s
    refused = guard.attempt([account_key("Ben"), HOME])  # another name from the same address
    assert (refused.kind, refused.who, refused.retry_after) == ("address", "198.51.100.7", 2)
    refused = guard.attempt([ANA, address_key("203.0.113.5")])  # Ana from elsewhere: her own second, nothing more
    assert refused is None


def test_attempts_in_flight_count_before_their_outcome():
    """A hundred guesses sent at once get no more password checks than the free ones."""
    guard = LoginGuard(free_failures=5, clock=Clock())
    allowed = [guard.attempt([ANA, HOME]) is None for _ in range(100)]
    assert allowed.count(True) == 5 and allowed[:5] == [True] * 5


def test_counts_are_forgotten_after_a_quiet_time_and_the_tracked_keys_are_bounded():
    clock = Clock()
    guard = LoginGuard(free_failures=3, max_wait=60, forget_after=600, max_keys=3, clock=clock)
    _fail(guard, ANA)
    clock.now += 599
    assert guard.failures(ANA) == 1
    clock.now += 1
    assert guard.failures(ANA) == 0 and len(guard) == 0  # 10 quiet minutes: a typo long ago is not held against her
    for number in range(5):
        clock.now += 1
        _fail(guard, address_key(f"203.0.113.{number}"))
    assert len(guard) == 3 and guard.failures(address_key("203.0.113.0")) == 0  # the longest quiet let go
    assert guard.failures(address_key("203.0.113.4")) == 1


def test_account_names_are_counted_as_they_are_looked_up():
    assert account_key("  Ana \t Lima ") == ANA
    assert account_key("Cafe\u0301") == account_key("Caf\u00e9")
    assert len(account_key("x" * 1_000_000)[1]) == 120  # a huge name is not kept whole
    with pytest.raises(ValueError):
        LoginGuard(free_failures=0)


def _request(host: str = "127.0.0.1:3001", peer: str = "127.0.0.1", scheme: str = "http", **headers: str) -> Request:
    raw = [(b"host", host.encode())] + [(k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items()]
    return Request({"type": "http", "method": "POST", "path": "/login", "headers": raw, "client": (peer, 5000),
                    "scheme": scheme, "server": ("127.0.0.1", 3001), "query_string": b""})  # fmt: skip


def _access(tmp_path):
    settings = load_settings({"ATLAS_REVIEW_USERS": str(tmp_path / "users.json")})
    return Deployment.from_settings(settings).page_access()


def test_the_address_is_the_forwarded_one_only_behind_the_trusted_proxy(tmp_path):
    plain = Sessions(
        Deployment.from_settings(load_settings({"ATLAS_REVIEW_USERS": str(tmp_path / "users.json")})).page_access()
    )
    proxied = Sessions(replace(plain.access, auth_header="X-Forwarded-User"))
    forwarded = {"x_forwarded_for": "203.0.113.9, 198.51.100.7"}  # the client wrote the first, the proxy added one
    assert proxied.client_address(_request(**forwarded)) == "198.51.100.7"
    assert proxied.client_address(_request(x_forwarded_for="198.51.100.7, 127.0.0.1")) == "198.51.100.7"
    assert proxied.client_address(_request(x_forwarded_for="not an address")) == "127.0.0.1"
    assert proxied.client_address(_request()) == "127.0.0.1"
    assert plain.client_address(_request(**forwarded)) == "127.0.0.1"  # no trusted proxy: the header is not believed
    assert plain.client_address(_request(peer="192.0.2.1", **forwarded)) == "192.0.2.1"
    # a server that took an untrusted header as the connection's address (uvicorn, from 127.0.0.1): one bucket
    assert plain.client_address(_request(peer="198.51.100.7", **forwarded)) == "forwarded by an untrusted proxy"
    assert plain.client_address(_request(peer="198.51.100.8", x_forwarded_for="198.51.100.8")) == (
        "forwarded by an untrusted proxy"
    )


def test_cookies_are_secure_beyond_loopback_or_over_https(tmp_path):
    plain = Sessions(
        Deployment.from_settings(load_settings({"ATLAS_REVIEW_USERS": str(tmp_path / "users.json")})).page_access()
    )
    proxied = Sessions(replace(plain.access, auth_header="X-Forwarded-User"))
    for host in ("127.0.0.1:3001", "localhost:3001", "[::1]:3001", "LOCALHOST"):
        assert not plain.cookies_secure(_request(host)), host
    assert plain.cookies_secure(_request("review.example.org"))
    assert plain.cookies_secure(_request("10.0.0.5:3001"))
    assert plain.cookies_secure(_request(scheme="https"))
    assert proxied.cookies_secure(_request(x_forwarded_proto="https"))
    assert not proxied.cookies_secure(_request(x_forwarded_proto="http"))
    assert not plain.cookies_secure(_request(x_forwarded_proto="https"))  # only the trusted proxy is believed
