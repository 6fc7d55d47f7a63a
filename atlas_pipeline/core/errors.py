"""The root of every error Atlas raises on purpose.

``except AtlasError`` catches what Atlas means to say (a refused setting, a document it cannot read, an endpoint that
failed) and nothing else — never a bug. Each error also derives from the built-in error it is a kind of
(``ValueError``, ``OSError``, …), so code that catches those keeps catching it.
"""

from __future__ import annotations


class AtlasError(Exception):
    """An error Atlas raises on purpose, with a message meant for the person who reads it."""
