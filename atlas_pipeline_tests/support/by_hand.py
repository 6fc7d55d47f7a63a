"""Corpus documents processed in the embedded default (skip mode, no LLM): documents a person extracts by hand."""

from pathlib import Path

from atlas_pipeline.definitions import build_definitions
from atlas_pipeline.defs.partitions import documents_partitions
from atlas_pipeline.knowledge.catalog import refresh_catalog
from atlas_pipeline.store.records import ExtractionRecord, read_record
from atlas_pipeline_tests.support.corpus import copy_into
from atlas_pipeline_tests.support.juice_trial import KEY


def processed_by_hand(knowledge_base: Path, settings, atlas, instance):
    """Snapshot, parse and skip-mode extraction of the juice trial; returns (definitions, extraction record)."""
    copy_into(knowledge_base, f"rct/{KEY}")
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, [KEY])
    defs = build_definitions(settings)
    assert defs.resolve_job_def("document_job").execute_in_process(partition_key=KEY, instance=instance).success
    return defs, read_record(atlas.store(), KEY, "extraction", ExtractionRecord)


def processed_in_skip_mode(knowledge_base: Path, settings, atlas, instance, corpus_paths: list[str]):
    """Snapshot, parse and skip-mode extraction of corpus documents (``rct/PMC….pdf`` …); returns the definitions."""
    keys = [path.name for path in copy_into(knowledge_base, *corpus_paths)]
    refresh_catalog(atlas.open_knowledge_base(), atlas.store())
    instance.add_dynamic_partitions(documents_partitions.name, keys)
    defs = build_definitions(settings)
    for key in keys:
        assert defs.resolve_job_def("document_job").execute_in_process(partition_key=key, instance=instance).success
    return defs
