"""Secrets never leave in text: reasons, log lines, metadata and error messages pass through ``redact``.

Whatever produced the text — our code, a library's exception, an endpoint echoing the request back ("Invalid request
for credentials Bearer sk-…") — the configured secrets are replaced by ``***`` before it is stored, logged, exported
or printed. The secrets are the values of the credential variables (``ATLAS_LLM_API_KEY``, ``AWS_SECRET_ACCESS_KEY``,
``AWS_SESSION_TOKEN``, ``DAGSTER_PG_PASSWORD``, and any ``ATLAS_*``, ``AWS_*`` or ``DAGSTER_*`` variable whose name
ends in ``KEY``, ``SECRET``, ``PASSWORD`` or ``TOKEN``), read from the environment when redacting, so a key set after
start-up is covered too; bearer tokens in ``Authorization`` style text are masked whatever their value.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Iterator, Mapping
from urllib.parse import quote

MASK = "***"
MIN_SECRET_LENGTH = 6  # shorter values ("test", "x") would mask ordinary words
_SECRET_NAME = re.compile(r"^(ATLAS|AWS|DAGSTER)_\w*(KEY|SECRET|PASSWORD|TOKEN)$")
_NOT_SECRET = {"AWS_ACCESS_KEY_ID"}  # an identifier, shown in AWS's own error messages
_BEARER = re.compile(r"(?i)\b(bearer\s+|(?:api[_-]?key|access[_-]?token|secret)\s*[:=]\s*)([A-Za-z0-9._~+/=-]{12,})")


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values to mask, longest first (so a secret that contains another is masked whole)."""
    env = os.environ if environ is None else environ
    values = {
        value
        for name, value in env.items()
        if _SECRET_NAME.match(name) and name not in _NOT_SECRET and len(value) >= MIN_SECRET_LENGTH
    }
    values |= {quote(value, safe="") for value in values}
    return sorted(values, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None, secrets: list[str] | None = None) -> str:
    """``text`` with every configured secret and every bearer-style token replaced by ``***``."""
    if not text:
        return text
    for value in secret_values(environ) if secrets is None else secrets:
        if value in text:
            text = text.replace(value, MASK)
    return _BEARER.sub(lambda m: m.group(1) + MASK, text)


def redact_value(value: object, secrets: list[str] | None = None) -> object:
    """``redact`` through strings, lists and dicts (metadata values, records, export rows)."""
    secrets = secret_values() if secrets is None else secrets
    if isinstance(value, str):
        return redact(value, secrets=secrets)
    if isinstance(value, list):
        return [redact_value(item, secrets) for item in value]
    if isinstance(value, dict):
        return {key: redact_value(item, secrets) for key, item in value.items()}
    return value


class RedactingFilter(logging.Filter):
    """A logging filter that masks secrets in the formatted message of every record it sees."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, ()
        return True


_FILTER = RedactingFilter()
REDACTED_LOGGERS = ("atlas", "atlas.llm", "atlas.audit", "openai", "httpx", "httpcore", "pymupdf", "dagster")


def install_log_redaction() -> None:
    """Mask secrets in the records of the loggers Atlas and its libraries write to (idempotent)."""
    for name in REDACTED_LOGGERS:
        logger = logging.getLogger(name)
        if _FILTER not in logger.filters:
            logger.addFilter(_FILTER)


class SecretInErrorError(RuntimeError):
    """An error whose message held a secret, re-raised with the secret masked (its chain dropped)."""


@contextlib.contextmanager
def secrets_masked_in_errors() -> Iterator[None]:
    """Re-raise an error whose message holds a secret as ``SecretInErrorError`` with it masked and without its
    chain (Dagster stores and shows an error's message, and its causes'); other errors pass unchanged."""
    try:
        yield
    except Exception as error:
        message = f"{type(error).__name__}: {error}"
        masked = redact(message)
        chained = error.__cause__ or error.__context__
        if masked != message or (chained is not None and redact(str(chained)) != str(chained)):
            raise SecretInErrorError(masked) from None
        raise
