"""The ``atlas`` resource: the settings a run needs, and the stores and seed data built from them."""

from pathlib import Path

import dagster as dg

from atlas_pipeline.catalog import CatalogEntry, load_catalog
from atlas_pipeline.extraction.rules import Rule, load_rule
from atlas_pipeline.extraction.templates import Template, load_template
from atlas_pipeline.knowledge_base import KnowledgeBase
from atlas_pipeline.parsing import ParseOptions
from atlas_pipeline.settings import AtlasSettings
from atlas_pipeline.storage import Store


class AtlasResource(dg.ConfigurableResource):
    """Locations and parse options of one deployment (filled from ``ATLAS_*`` settings)."""

    knowledge_base: str
    artifacts: str
    exports: str
    seeds_dir: str
    rule: str = "default"
    ocr: bool = True
    ocr_language: str = "eng"
    pdf_engine: str = "layout"
    max_document_mb: float = 200.0

    @classmethod
    def from_settings(cls, settings: AtlasSettings) -> "AtlasResource":
        return cls(
            knowledge_base=settings.knowledge_base,
            artifacts=settings.artifacts,
            exports=settings.exports,
            seeds_dir=settings.seeds_dir,
            rule=settings.rule,
            ocr=settings.ocr,
            ocr_language=settings.ocr_language,
            pdf_engine=settings.pdf_engine,
            max_document_mb=settings.max_document_mb,
        )

    def store(self) -> Store:
        return Store(self.artifacts)

    def exports_store(self) -> Store:
        return Store(self.exports)

    def open_knowledge_base(self) -> KnowledgeBase:
        return KnowledgeBase(self.knowledge_base)

    def load_rule(self) -> Rule:
        return load_rule(Path(self.seeds_dir) / "rules", self.rule)

    def load_template(self) -> Template:
        return load_template(Path(self.seeds_dir) / "templates", self.load_rule().template)

    def parse_options(self) -> ParseOptions:
        return ParseOptions(engine=self.pdf_engine, ocr=self.ocr, ocr_language=self.ocr_language)

    @property
    def max_bytes(self) -> int:
        return int(self.max_document_mb * 1_000_000)

    def catalog_entry(self, key: str) -> CatalogEntry:
        entry = load_catalog(self.store()).entries.get(key)
        if entry is None:
            raise dg.Failure(
                description=f"document {key!r} is not in the catalog: it was not found by a knowledge-base scan "
                f"of {self.knowledge_base} (add the file there and let the sensor or `atlas run` pick it up)"
            )
        return entry
