"""Partition keys for documents: readable (from the file name), stable, unique and safe.

Safe means usable as a Dagster partition key and as one path segment: only ``A-Z a-z 0-9 . _ -``, no ``..``,
no leading dot, at most ``MAX_KEY_LENGTH`` characters.
"""

from __future__ import annotations

import hashlib
import posixpath
import re
import unicodedata
from collections.abc import Container

MAX_KEY_LENGTH = 80
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_SAFE_KEY = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9._-]*$")


def is_safe_key(key: str) -> bool:
    return bool(_SAFE_KEY.match(key)) and ".." not in key and len(key) <= MAX_KEY_LENGTH


def slug_for(path: str) -> str:
    """The readable part of a key: the file name, transliterated to ASCII, unsafe runs replaced by ``-``."""
    name = posixpath.basename(path)
    ascii_name = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode("ascii")
    slug = _UNSAFE.sub("-", ascii_name)
    slug = re.sub(r"\.{2,}", ".", slug)
    slug = re.sub(r"-{2,}", "-", slug).strip(".-")
    return slug[: MAX_KEY_LENGTH - 9] or "document"


def make_key(path: str, taken: Container[str]) -> str:
    """A new key for ``path`` that is not in ``taken``; a collision gets a short hash of the full path."""
    slug = slug_for(path)
    if slug not in taken:
        return slug
    digest = hashlib.sha256(path.encode("utf-8")).hexdigest()
    for length in (8, 12, 16, 64):
        candidate = f"{slug}-{digest[:length]}"
        if candidate not in taken:
            return candidate
    raise ValueError(f"cannot make a unique key for {path!r}")
