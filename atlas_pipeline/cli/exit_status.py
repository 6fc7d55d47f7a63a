"""The exit statuses of `atlas run`, for the cron job or CI that drives a living review (docs/operations.md)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping

from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.read_model.document_state import DocumentState

EXIT_DONE = 0  # the run did its work: every document ended in a status of its own (an unreadable one is an outcome)
EXIT_NOT_STARTED = 2  # nothing ran: a bad setting, rule or template, an unknown key, an instance that cannot be used
EXIT_OUTSIDE = 3  # a document could not be processed for a reason outside it (endpoint, storage, a crashed step)


def not_processed(states: Iterable[DocumentState], ran: set[str]) -> list[DocumentState]:
    """Among the documents this run took (``ran``), those that failed for a reason outside them and those it left
    pending (a crashed step). A document removed from the knowledge base is never run again: not counted."""
    return [
        state
        for state in states
        if state.key in ran
        and not state.source_removed
        and ((state.outside and state.status == DocumentStatus.FAILED) or state.status == DocumentStatus.PENDING)
    ]


def exit_status(states: list[DocumentState], ran: set[str], files_not_written: Mapping[str, str]) -> int:
    """``EXIT_OUTSIDE`` when a document this run took could not be processed for a reason outside it, or an export
    file could not be written (said on stderr, with the first reasons), else ``EXIT_DONE``."""
    left = not_processed(states, ran)
    if left:
        print(
            f"atlas: {len(left)} document(s) could not be processed for a reason outside them; they run again with "
            "the next `atlas run`:",
            file=sys.stderr,
        )
        for state in left[:5]:
            print(f"  {state.key}: {state.reason}", file=sys.stderr)
        if len(left) > 5:
            print(f"  … and {len(left) - 5} more", file=sys.stderr)
    if files_not_written:
        print(f"atlas: {len(files_not_written)} export file(s) could not be written (listed above)", file=sys.stderr)
    return EXIT_OUTSIDE if left or files_not_written else EXIT_DONE
