"""The shared test corpus: real documents with human gold, found once and copied into temporary knowledge bases.

Tests that call these helpers are marked ``corpus`` (see ``conftest.py``)."""

from __future__ import annotations

import functools
import os
import shutil
from pathlib import Path

import pytest

from atlas_pipeline.config.settings import PROJECT_ROOT
from atlas_pipeline.parsing import ParsedDocument, parse_document

CORPUS = Path(os.environ.get("ATLAS_TEST_CORPUS", PROJECT_ROOT.parent / "shared" / "corpus"))
SEED_KB = PROJECT_ROOT / "seeds" / "knowledge_base"


def corpus_file(relative: str) -> Path:
    path = CORPUS / relative
    if not path.exists():
        pytest.fail(f"test corpus file missing: {path} (set ATLAS_TEST_CORPUS to the shared corpus folder)")
    return path


@functools.cache
def parsed_corpus(relative: str) -> ParsedDocument:
    """``parse_document`` of a corpus file with default options, parsed once per test session."""
    path = corpus_file(relative)
    return parse_document(path.read_bytes(), path.name)


@functools.cache
def corpus_scope(pmcid: str) -> str:
    """What quotes are graded against for a corpus RCT: our own parse of its PDF (markdown + table text)."""
    from atlas_pipeline.grading.locations import EvidenceScope

    parsed = parsed_corpus(f"rct/{pmcid}.pdf")
    return EvidenceScope(parsed.markdown, parsed.tables).text


def copy_into(folder: Path, *relatives: str, rename: dict[str, str] | None = None) -> list[Path]:
    """Copy corpus files into ``folder`` (optionally under new names) and return the new paths."""
    folder.mkdir(parents=True, exist_ok=True)
    copied = []
    for relative in relatives:
        source = corpus_file(relative)
        target = folder / (rename or {}).get(relative, source.name)
        shutil.copyfile(source, target)
        copied.append(target)
    return copied
