"""How a document's status follows from what is known of it — pure rules, no storage, no Dagster.

The facts come from two places: Dagster (is a run working on it, did a step crash, was its run cancelled) and the
document's own records (the extraction's outcome, the stage that stopped it, the version it was made with, the
review). ``status_of`` is the one place that weighs them, in this order: a run at work, a crashed step, the
extraction's own outcome (stale when made with another version, approved when a person or the policy settled every
value), and a cancellation over anything but a run at work. Every status comes with its reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from atlas_pipeline.core.statuses import DOCUMENT_STAGES, DocumentStatus, Stage


@dataclass(frozen=True)
class RunFacts:
    """What Dagster says of one document's partition."""

    running: bool = False  # a run is materialising it now
    crash: str = ""  # why a step failed (not the document's outcome: the step itself raised), "" when none did
    interrupted: bool = False  # that step was only stopped (a signal, its process died): the document is pending
    extracted: bool = False  # its extraction is materialised
    cancelled: str = ""  # who cancelled its queued run and when, "" when nobody did


@dataclass(frozen=True)
class ExtractionFacts:
    """What the document's latest extraction record says of it."""

    status: DocumentStatus
    reason: str
    stopped_at: Stage | None = None  # the stage whose problem ended it (None: it went through, or was not stopped)
    retryable: bool = False  # failed for a reason outside the document
    version: str = ""  # the extraction version's tag it was made with
    version_changes: tuple[str, ...] = ()  # what differs from the version now (for the reason)
    kept: bool = False  # the latest did not go through: an earlier extraction's values stay shown
    kept_from: str = ""  # that extraction's date, for the reason
    approval: str = ""  # every value settled (a person or the policy): the review's summary; "" otherwise


@dataclass(frozen=True)
class Status:
    """A document's status, its reason and how it came to be."""

    status: DocumentStatus
    reason: str
    stale: bool = False  # made with another extraction version: its values stay out until it is made again
    outside: bool = False  # failed for a reason outside the document: another run may succeed


NOT_YET = Status(DocumentStatus.PENDING, "known, not processed yet")


def status_of(run: RunFacts, extraction: ExtractionFacts | None, version: str | None = None) -> Status:
    """The status of one document. ``version``: the extraction version's tag now (None: every version counts)."""
    status = _before_cancellation(run, extraction, version)
    if run.cancelled and status.status != DocumentStatus.EXTRACTING:
        return Status(DocumentStatus.CANCELLED, run.cancelled, status.stale, status.outside)
    return status


def is_stale(extraction: ExtractionFacts, version: str | None) -> bool:
    """Made with another extraction version — unless a stage before the extraction stopped the document (its problem
    is the file's own; a new version changes nothing for it)."""
    return bool(version) and extraction.version != version and extraction.stopped_at not in DOCUMENT_STAGES


def _before_cancellation(run: RunFacts, extraction: ExtractionFacts | None, version: str | None) -> Status:
    if run.running:
        return Status(DocumentStatus.EXTRACTING, "a run is processing it")
    if run.crash:
        status = DocumentStatus.PENDING if run.interrupted else DocumentStatus.FAILED
        return Status(status, run.crash, outside=True)  # a step that crashed: not the document's doing
    if not run.extracted or extraction is None:
        return NOT_YET
    status, reason = extraction.status, extraction.reason
    outside = status == DocumentStatus.FAILED and extraction.retryable
    stale = is_stale(extraction, version)
    if stale:
        changed = ", ".join(extraction.version_changes or ("version",))
        status = DocumentStatus.PENDING
        reason = (
            f"stale: extracted with version {extraction.version or 'unknown'}, now {version} ({changed} changed); "
            "re-extraction pending"
        )
    if extraction.kept:
        reason += f"; the values of its extraction of {extraction.kept_from} and their decisions stay"
    elif extraction.approval and not stale:  # a failure is never hidden by approval
        status, reason = DocumentStatus.APPROVED, extraction.approval
    return Status(status, reason, stale, outside)
