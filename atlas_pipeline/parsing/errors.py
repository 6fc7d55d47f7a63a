"""Why a document cannot be parsed. Each error carries the terminal status it leads to and a specific reason."""

from __future__ import annotations

from atlas_pipeline.core.errors import AtlasError


class DocumentError(AtlasError):
    """Base class: the document itself is the problem (not the pipeline). ``status`` is failed or skipped."""

    status = "failed"

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class UnreadableDocumentError(DocumentError):
    """Corrupt, truncated, empty, or not what its name says (e.g. HTML saved as ``.pdf``)."""

    status = "failed"


class LockedDocumentError(DocumentError):
    """Encrypted and needs a password we do not have."""

    status = "skipped"


class UnsupportedDocumentError(DocumentError):
    """A kind of file the pipeline does not read (images, office files, archives…), or too large."""

    status = "skipped"
