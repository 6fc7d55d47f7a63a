"""`atlas run`'s exit status: 3 only for what this run could not do for a reason outside the documents."""

from atlas_pipeline.cli.exit_status import EXIT_DONE, EXIT_OUTSIDE, exit_status
from atlas_pipeline.core.statuses import DocumentStatus
from atlas_pipeline.read_model.document_state import DocumentState


def _state(key: str, status: DocumentStatus, outside: bool = False, removed: bool = False) -> DocumentState:
    return DocumentState(key=key, status=status, reason=f"{key}: why", outside=outside, source_removed=removed)


def test_only_what_this_run_took_and_could_not_do_counts(capsys):
    unreadable = _state("bad.pdf", DocumentStatus.FAILED)  # the file's own failure: an outcome
    endpoint = _state("a.pdf", DocumentStatus.FAILED, outside=True)
    assert exit_status([unreadable, _state("ok.pdf", DocumentStatus.DONE)], {"bad.pdf", "ok.pdf"}, {}) == EXIT_DONE
    assert exit_status([unreadable, endpoint], {"bad.pdf", "a.pdf"}, {}) == EXIT_OUTSIDE
    said = capsys.readouterr().err
    assert "a.pdf: a.pdf: why" in said and "bad.pdf" not in said
    assert exit_status([endpoint], {"other.pdf"}, {}) == EXIT_DONE  # `--only other.pdf`: not this run's
    gone = _state("a.pdf", DocumentStatus.FAILED, outside=True, removed=True)
    assert exit_status([gone], {"a.pdf"}, {}) == EXIT_DONE  # removed: never run again
    assert exit_status([_state("c.pdf", DocumentStatus.PENDING)], {"c.pdf"}, {}) == EXIT_OUTSIDE  # a crashed step
    assert exit_status([], set(), {"atlas_fields.csv": "OSError: disk full"}) == EXIT_OUTSIDE
    assert "1 export file(s) could not be written" in capsys.readouterr().err
