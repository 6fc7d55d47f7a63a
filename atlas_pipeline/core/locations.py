"""Where things are: a local folder or an fsspec URL (``s3://bucket/prefix``), told apart and made absolute once."""

from __future__ import annotations

from pathlib import Path


def is_url(location: str) -> bool:
    """True for fsspec URLs such as ``s3://bucket/prefix`` (a Windows drive letter is not a URL)."""
    return "://" in location


def resolve_location(location: str) -> str:
    """An absolute path for local locations, the URL unchanged otherwise."""
    if is_url(location) and not location.startswith("file://"):
        return location.rstrip("/")
    local = location.removeprefix("file://")
    return str(Path(local).expanduser().resolve())
