"""Content fingerprints: a document, a workbook or an answer is known by the SHA-256 of its bytes."""

from __future__ import annotations

import hashlib


def sha256_of(data: bytes) -> str:
    """The hex SHA-256 of ``data``."""
    return hashlib.sha256(data).hexdigest()
