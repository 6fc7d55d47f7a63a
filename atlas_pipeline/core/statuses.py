"""Document statuses: every known document is in exactly one, and every terminal one carries a reason."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """The stage that ended a document's way, written by the stage itself on its record (a record made before the
    stage was kept is read once, where records are read: ``store.records.legacy_stage``)."""

    SNAPSHOT = "snapshot"  # the file could not be kept (unsupported, locked, unreadable, gone)
    PARSE = "parse"  # its text could not be read (a broken PDF, a parsing provider that failed)
    EXTRACT = "extract"  # the values could not be asked for (the endpoint failed, no endpoint configured)


# the stages whose problem is the document's own: a new extraction version changes nothing for it
DOCUMENT_STAGES = frozenset({Stage.SNAPSHOT, Stage.PARSE})


class DocumentStatus(StrEnum):
    PENDING = "pending"  # known (partition exists), not processed yet
    EXTRACTING = "extracting"  # a run is working on it
    WAITING = "waiting"  # its LLM requests wait at the endpoint's Batch API; extracted when the answers arrive
    DONE = "done"
    APPROVED = "approved"  # extracted, and every value decided by a person or accepted by the team's policy
    PARTIAL = "partial"
    INCOMPLETE = "incomplete"
    FAILED = "failed"  # permanent error, with its message
    SKIPPED = "skipped"  # unsupported or locked, with the reason
    CANCELLED = "cancelled"  # its queued run was cancelled by a person (who, when); runs again when asked


# the statuses of a document that went through extraction (its values, if any, are there to review and export)
WENT_THROUGH = frozenset(
    {DocumentStatus.DONE, DocumentStatus.PARTIAL, DocumentStatus.INCOMPLETE, DocumentStatus.APPROVED}
)


TERMINAL = frozenset(
    {
        DocumentStatus.DONE,
        DocumentStatus.APPROVED,
        DocumentStatus.PARTIAL,
        DocumentStatus.INCOMPLETE,
        DocumentStatus.FAILED,
        DocumentStatus.SKIPPED,
        DocumentStatus.CANCELLED,
    }
)
ORDER = list(DocumentStatus)
