"""Which ``Host`` headers the local web servers answer: the review page and the Dagster UI of ``atlas dev``.

A page on any site can have a browser send requests to 127.0.0.1 under the site's own name (DNS rebinding): a server
that answers every Host would hand that page its data and its buttons. These servers answer their loopback names only,
and the names a team lists in ``ATLAS_TRUSTED_HOSTS`` when it serves them on a network (``--host 0.0.0.0``).
"""

from __future__ import annotations

LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")
LOOPBACK_ADDRESSES = ("127.0.0.1", "localhost", "::1")  # what a server is bound to when it serves this machine only


def trusted_hosts(listed: str = "") -> list[str]:
    """The loopback names, then ``listed`` (comma-separated host names, as ``ATLAS_TRUSTED_HOSTS`` holds them)."""
    extra = [name.strip().lower() for name in listed.split(",") if name.strip()]
    return list(dict.fromkeys([*LOOPBACK_HOSTS, *extra]))
