"""Secrets never leave in text: reasons, log lines, metadata and error messages pass through ``redact``.

Whatever produced the text — our code, a library's exception, an endpoint echoing the request back ("Invalid request
for credentials Bearer sk-…"), or echoing it disguised — the configured secrets are replaced by ``***`` before it is
stored, logged, exported or printed. The secrets are the values of the credential variables (``ATLAS_LLM_API_KEY``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``DAGSTER_PG_PASSWORD``, and any ``ATLAS_*``, ``AWS_*`` or
``DAGSTER_*`` variable whose name ends in ``KEY``, ``SECRET``, ``PASSWORD`` or ``TOKEN``), read from the environment
when redacting, so a key set after start-up is covered too. Of each secret these forms are masked:

- the secret itself, and any run of 8 or more characters equal to its start (a key cut to its first 12 characters is
  masked as far as it goes; a run of 7 is left, and a secret shorter than 8 only whole);
- its URL encodings: ``quote`` with ``safe=""``, the default ``quote`` (``/`` kept), ``quote_plus``, with upper- or
  lower-case hex;
- its base64, standard and URL-safe, padded or not, of the secret alone and of ``Bearer <secret>``, and the part of
  any longer base64 text that encodes the secret, at each of the three alignments a string can have in base64 (the
  characters that also carry bits of the neighbouring bytes are left); those in a URL percent-encoded too;
- the same in base32 (upper or lower case, at each of its five alignments);
- the secret in upper and in lower case;
- base64 or base32 text broken into lines (MIME's 76-character lines, PEM's 64): a block of such lines is read
  joined, and masked whole where it holds a form.

Bearer tokens in ``Authorization`` style text are masked whatever their value. The forms are derived once per set of
secrets (cached) and found with one compiled pattern, so ``redact`` stays cheap on every string of every export row.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import NamedTuple
from urllib.parse import quote, quote_plus

from atlas_pipeline.core.errors import AtlasError

MASK = "***"
MIN_SECRET_LENGTH = 6  # shorter values ("test", "x") would mask ordinary words
PREFIX_LENGTH = 8  # a run this long equal to a secret's start is masked (shorter ones would mask ordinary text)
_SECRET_NAME = re.compile(r"^(ATLAS|AWS|DAGSTER)_\w*(KEY|SECRET|PASSWORD|TOKEN)$")
_NOT_SECRET = {"AWS_ACCESS_KEY_ID"}  # an identifier, shown in AWS's own error messages
_BEARER = re.compile(r"(?i)\b(bearer\s+|(?:api[_-]?key|access[_-]?token|secret)\s*[:=]\s*)([A-Za-z0-9._~+/=-]{12,})")
_PERCENT_HEX = re.compile(r"%[0-9A-F]{2}")
# two or more lines of base64 / base32 text (MIME, PEM): read joined, since a form may be broken across them
_WRAPPED = re.compile(r"[A-Za-z0-9+/_=-]{8,}(?:\r?\n[A-Za-z0-9+/_=-]{1,})+")
# characters of base64 text at the start of a secret placed 0, 1 or 2 bytes into a 3-byte group that also carry bits
# of the bytes before it
_UNSTABLE_LEAD = (0, 2, 3)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values to mask, longest first (``redact`` masks their encoded forms and prefixes too)."""
    env = os.environ if environ is None else environ
    values = {
        value
        for name, value in env.items()
        if _SECRET_NAME.match(name) and name not in _NOT_SECRET and len(value) >= MIN_SECRET_LENGTH
    }
    return sorted(values, key=len, reverse=True)


def redact(text: str, environ: Mapping[str, str] | None = None, secrets: list[str] | None = None) -> str:
    """``text`` with every configured secret (in any of the forms the module names) and every bearer-style token
    replaced by ``***``."""
    if not text:
        return text
    finder = _finder(tuple(secret_values(environ) if secrets is None else secrets))
    if finder is not None and len(text) >= finder.shortest:
        if "\n" in text:  # a form broken across lines (MIME base64): each block of such lines read joined
            text = _WRAPPED.sub(lambda m: _joined_masked(finder, m.group(0)), text)
        text = finder.mask(text)
    return _BEARER.sub(lambda m: m.group(1) + MASK, text)


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    parts, done = [], 0
    for start, end in spans:
        parts += (text[done:start], MASK)
        done = end
    parts.append(text[done:])
    return "".join(parts)


def _joined_masked(finder: _Finder, block: str) -> str:
    """A block of base64 lines with each form found in its lines joined masked where it lies (the line breaks within
    a form go with it; the others stay)."""
    kept = [index for index, char in enumerate(block) if char not in "\r\n"]  # joined position → block position
    spans = finder.spans("".join(block[index] for index in kept))
    if not spans:
        return block
    return _masked(block, [(kept[start], kept[end - 1] + 1) for start, end in spans])


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


def _url_forms(text: str) -> set[str]:
    """``text`` URL-encoded as the usual encoders do it, with upper- and lower-case hex."""
    forms = {quote(text, safe=""), quote(text), quote_plus(text)}
    return forms | {_PERCENT_HEX.sub(lambda m: m.group(0).lower(), form) for form in forms}


def _base64_forms(payload: bytes) -> set[str]:
    """The base64 of ``payload`` (standard and URL-safe, padded or not), and for each of the three alignments it can
    have inside longer base64 text the characters that encode only its bytes."""
    forms = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(payload).decode()
        forms |= {whole, whole.rstrip("=")}
        for offset, lead in enumerate(_UNSTABLE_LEAD):
            encoded = encode(bytes(offset) + payload).decode().rstrip("=")
            tail = 1 if (offset + len(payload)) % 3 else 0  # its last character also carries the next byte's bits
            forms.add(encoded[lead : len(encoded) - tail])
    return forms


def _base32_forms(payload: bytes) -> set[str]:
    """The base32 of ``payload`` (upper and lower case, padded or not), and at each of the five alignments it can have
    inside longer base32 text the characters that encode only its bytes (5 bits a character)."""
    forms = set()
    whole = base64.b32encode(payload).decode()
    forms |= {whole, whole.rstrip("=")}
    for offset in range(5):
        encoded = base64.b32encode(bytes(offset) + payload).decode().rstrip("=")
        lead = -(-8 * offset // 5)  # the first character carrying none of the bytes before it
        end = 8 * (offset + len(payload)) // 5  # characters after it carry the next bytes' bits too
        forms.add(encoded[lead:end])
    return forms | {form.lower() for form in forms}


def derived_forms(secret: str) -> set[str]:
    """Every fixed string that discloses ``secret`` (its prefixes aside): itself, URL-encoded, base64-encoded."""
    data = secret.encode()
    encoded = _base64_forms(data) | _base64_forms(b"Bearer " + data) | _base32_forms(data)
    forms = {secret, secret.upper(), secret.lower()} | _url_forms(secret) | encoded
    forms |= {quote(form, safe="") for form in encoded}  # base64 in a query string: "+", "/" and "=" escaped
    return {form for form in forms if len(form) >= MIN_SECRET_LENGTH}


class _Finder(NamedTuple):
    pattern: re.Pattern[str]  # every fixed form, and the first PREFIX_LENGTH characters of each long secret
    heads: dict[str, tuple[str, ...]]  # those first characters -> the secrets that start with them
    shortest: int  # no text shorter than this holds a form

    def mask(self, text: str) -> str:
        return _masked(text, self.spans(text))

    def spans(self, text: str) -> list[tuple[int, int]]:
        """Where forms are in ``text`` (overlapping forms as one run), in order."""
        found: list[tuple[int, int]] = []
        match = self.pattern.search(text)
        while match is not None:
            start, end = match.start(), self._end(text, match)
            match = self.pattern.search(text, start + 1)
            while match is not None and match.start() < end:  # overlapping forms: masked as one run
                end = max(end, self._end(text, match))
                match = self.pattern.search(text, match.start() + 1)
            found.append((start, end))
        return found

    def _end(self, text: str, match: re.Match[str]) -> int:
        """Where the form found by ``match`` ends: a secret's first characters run on as far as they equal it."""
        start, end = match.span()
        for secret in self.heads.get(text[start : start + PREFIX_LENGTH], ()):
            end = max(end, start + _common_start(text, start, secret))
        return end


def _common_start(text: str, start: int, secret: str) -> int:
    """How many characters of ``text`` from ``start`` equal the start of ``secret`` (a binary search of C compares)."""
    low, high = 0, min(len(secret), len(text) - start)  # text[start:start + low] == secret[:low]
    while low < high:
        middle = (low + high + 1) // 2
        if text.startswith(secret[:middle], start):
            low = middle
        else:
            high = middle - 1
    return low


@functools.lru_cache(maxsize=32)
def _finder(secrets: tuple[str, ...]) -> _Finder | None:
    """The pattern finding every form of ``secrets`` (derived once per set of secrets)."""
    if not secrets:
        return None
    words, heads = set(), {}
    for secret in secrets:
        words |= derived_forms(secret)
        if len(secret) >= PREFIX_LENGTH:
            head = secret[:PREFIX_LENGTH]
            heads[head] = (*heads.get(head, ()), secret)
            words.add(head)
    return _Finder(re.compile(_trie_pattern(words)), heads, min(len(word) for word in words))


def _trie_pattern(words: Iterable[str]) -> str:
    """One regular expression matching any of ``words``, the longest at a place: a trie, so that at each character
    one branch is followed whatever the number of words."""
    trie: dict = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}  # a word ends here

    def pattern(node: dict) -> str:
        chain = []
        while len(node) == 1 and "" not in node:  # a run without branches: one literal
            ((char, node),) = node.items()
            chain.append(re.escape(char))
        branches = [re.escape(char) + pattern(child) for char, child in node.items() if char]
        if not branches:
            return "".join(chain)
        group = "(?:" + "|".join(branches) + ")"
        if "" in node:  # a word ends here too: the longer ones first (greedy), else this one
            group += "?"
        return "".join(chain) + group

    return pattern(trie)


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


class SecretInErrorError(AtlasError, RuntimeError):
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
