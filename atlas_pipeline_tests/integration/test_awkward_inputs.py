"""Every awkward file of the corpus through the real document job: each ends in a terminal status with a reason,
and none breaks the run of another."""

import shutil

import pytest

from atlas_pipeline.core.statuses import TERMINAL
from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.knowledge.listing import SourceMissingError
from atlas_pipeline.knowledge.snapshots import take_snapshot
from atlas_pipeline_tests.support.corpus import CORPUS
from atlas_pipeline_tests.support.helpers import ran_as_its_document

EXPECTED = {
    "empty_zero_bytes.pdf": ("failed", "snapshot: empty file (0 bytes)"),
    "html_page_saved_with_pdf_extension.pdf": ("failed", "snapshot: not a PDF (HTML content)"),
    "PMC3508963_user_password_aes256.pdf": ("skipped", "parse: encrypted, needs a password"),
    "pypdf_r4-aes-user-password.pdf": ("skipped", "parse: encrypted, needs a password"),
    "tabula_encrypted_FLA_audit_table.pdf": ("skipped", "parse: encrypted, needs a password"),
    "qpdf_bad1.pdf": ("failed", "snapshot: not a PDF (no %PDF- header)"),
    "ocrmypdf_invalid.pdf": ("failed", "parse: not a readable PDF"),
    "ocrmypdf_no_contents.pdf": ("failed", "parse: no extractable text"),
    "PMC5154016_owner_password_no_copy_aes256.pdf": ("done", ""),
    "pypdf_r6-empty-password.pdf": ("done", ""),
    "ocrmypdf_linn.pdf": ("done", ""),
}


@pytest.mark.timeout(900)
def test_every_awkward_file_ends_in_a_terminal_status_with_a_reason(knowledge_base, settings_for, atlas_for, instance):
    for path in sorted((CORPUS / "awkward").rglob("*")):
        if path.is_file() and path.suffix != ".txt" and path.suffix != ".out" and "image_only" not in path.name:
            shutil.copyfile(path, knowledge_base / path.name)  # (the 5-page image-only RCT is left out: slow OCR)
    settings, atlas = settings_for(knowledge_base), atlas_for(knowledge_base)
    keys = list(refresh_catalog(atlas.open_knowledge_base(), atlas.store()).catalog.entries)
    instance.add_dynamic_partitions(documents_partitions.name, keys)
    job = build_definitions(settings).resolve_job_def("document_job")
    runs = {key: job.execute_in_process(partition_key=key, instance=instance, raise_on_error=False) for key in keys}
    states = {state.key: state for state in document_states(instance, atlas)}
    for key, result in runs.items():  # every step went through; only a failed document's last step fails (red)
        assert ran_as_its_document(result, states[key].status), (key, states[key].reason)
    assert len(states) == len(keys) >= 20
    for key, state in states.items():
        assert state.status in TERMINAL, (key, state.status, state.reason)
        assert state.reason, key
    for name, (status, reason) in EXPECTED.items():
        state = states[name]
        assert state.status == status, (name, state.status, state.reason)
        assert state.reason.startswith(reason), (name, state.reason)


def test_a_file_that_vanishes_before_its_snapshot_fails_with_the_reason(knowledge_base, atlas_for):
    (knowledge_base / "fleeting.txt").write_text("here for a moment")
    atlas = atlas_for(knowledge_base)
    entry = refresh_catalog(atlas.open_knowledge_base(), atlas.store()).catalog.entries["fleeting.txt"]
    (knowledge_base / "fleeting.txt").unlink()
    record = take_snapshot(atlas.open_knowledge_base(), atlas.store(), entry)
    assert record.problem.status == "failed"
    assert record.problem.reason == "source vanished before it could be read: fleeting.txt"
    with pytest.raises(SourceMissingError):
        atlas.open_knowledge_base().read("fleeting.txt")
