"""The provider interface: bytes + a name in, a ``ParsedDocument`` (markdown, tables, pages, task id, timings,
version) out, or a ``DocumentError`` with a specific reason."""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from atlas_pipeline.parsing.errors import UnreadableDocumentError
from atlas_pipeline.parsing.media import PDF
from atlas_pipeline.parsing.model import ParsedDocument

EXTENSIONS = {PDF: "pdf", "image/png": "png", "image/jpeg": "jpg", "image/tiff": "tiff", "image/bmp": "bmp"}


class ProviderError(UnreadableDocumentError):
    """A provider gave no usable result for this document (its task failed, it timed out, it answered something
    malformed, it refused the request). Never cached: the next run asks again."""

    def __init__(self, reason: str, status: str = "failed", retryable: bool = False) -> None:
        super().__init__(reason)
        self.status = status
        self.retryable = retryable  # the provider was down, slow or busy: the next `atlas run` asks again


@dataclass(frozen=True)
class ProviderLimits:
    """How long and how often to ask (``ATLAS_PROVIDER_*``)."""

    timeout_seconds: float = 300.0  # one request
    max_seconds: float = 1800.0  # one document: upload, queue, parse, download
    max_retries: int = 3
    backoff_seconds: float = 2.0
    poll_seconds: float = 2.0
    max_bytes: int = 200_000_000


class ParsingProvider(ABC):
    """One way to parse PDFs and images. ``options`` are what changes the output (they and ``revision`` make the
    fingerprint, the cache key part); ``version_label`` names the deployment's version (``ATLAS_PROVIDER_VERSION``)."""

    name: ClassVar[str]
    revision: ClassVar[int] = 1  # of this adapter: bump when a change here changes what it makes of an answer
    media_types: ClassVar[frozenset[str]] = frozenset(EXTENSIONS)  # what MinerU and docling both read

    limits: ProviderLimits = ProviderLimits()

    def __init__(self, version_label: str = "") -> None:
        self.version_label = version_label

    def options(self) -> dict[str, Any]:
        return {}

    def fingerprint(self) -> str:
        material = {"provider": self.name, "revision": self.revision, "version": self.version_label, **self.options()}
        return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]

    def accepts(self, media_type: str | None) -> bool:
        return media_type in self.media_types

    @abstractmethod
    def parse(self, data: bytes, filename: str, media_type: str) -> ParsedDocument:
        """Parse ``data``; raise ``ProviderError`` (or another ``DocumentError``) with the reason."""


def neutral_name(data: bytes, media_type: str) -> str:
    """The name a document is sent under: its content hash and extension — never its path or title."""
    return f"{hashlib.sha256(data).hexdigest()[:16]}.{EXTENSIONS.get(media_type, 'bin')}"
