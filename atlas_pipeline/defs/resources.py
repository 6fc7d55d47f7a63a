"""The ``atlas`` resource: the settings a run needs, and the stores and seed data built from them."""

from pathlib import Path

import dagster as dg

from atlas_pipeline.catalog import Catalog, CatalogEntry, load_catalog, load_entry
from atlas_pipeline.completion import DocumentState
from atlas_pipeline.extraction.llm import LLMClient, LLMConfig
from atlas_pipeline.extraction.rules import Rule, load_rule
from atlas_pipeline.extraction.templates import Template, assemble_template, load_template
from atlas_pipeline.extraction.version import ExtractionVersion, extraction_version
from atlas_pipeline.knowledge_base import KnowledgeBase
from atlas_pipeline.parsing import ParseOptions
from atlas_pipeline.processing import ParseLimits
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
    ocr_max_text_chars: int = 200
    pdf_engine: str = "layout"
    max_document_mb: float = 200.0
    parse_timeout_seconds: float = 600.0
    parse_memory_mb: float = 4096.0
    postprocess_mode: str = "auto"
    llm_configured: bool = False  # an endpoint is set (ATLAS_LLM_BASE_URL): llm mode unless forced otherwise
    llm_model: str = ""

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
            ocr_max_text_chars=settings.ocr_max_text_chars,
            pdf_engine=settings.pdf_engine,
            max_document_mb=settings.max_document_mb,
            parse_timeout_seconds=settings.parse_timeout_seconds,
            parse_memory_mb=settings.parse_memory_mb,
            postprocess_mode=settings.postprocess_mode,
            llm_configured=bool(settings.llm_base_url),
            llm_model=settings.llm_model,
        )

    def store(self) -> Store:
        return Store(self.artifacts)

    def exports_store(self) -> Store:
        return Store(self.exports)

    def open_knowledge_base(self) -> KnowledgeBase:
        return KnowledgeBase(self.knowledge_base, max_bytes=self.max_bytes)

    def load_rule(self) -> Rule:
        return load_rule(Path(self.seeds_dir) / "rules", self.rule)

    def load_template(self) -> Template:
        """The rule's template with the rule's custom fields added."""
        rule = self.load_rule()
        return assemble_template(load_template(Path(self.seeds_dir) / "templates", rule.template), rule.custom_fields)

    def mode(self, rule: Rule) -> str:
        """skip or llm: forced by ATLAS_POSTPROCESS_MODE, else llm when an endpoint is configured, else the rule's."""
        if self.postprocess_mode != "auto":
            return self.postprocess_mode
        return "llm" if self.llm_configured else rule.postprocess_mode

    def extraction_version(self) -> ExtractionVersion:
        """The version extractions are made with now (see ``extraction.version``)."""
        rule = self.load_rule()
        return extraction_version(self.load_template(), rule, self.mode(rule), self.llm_model)

    def parse_options(self) -> ParseOptions:
        return ParseOptions(
            engine=self.pdf_engine,
            ocr=self.ocr,
            ocr_language=self.ocr_language,
            ocr_max_text_chars=None if self.ocr_max_text_chars < 0 else self.ocr_max_text_chars,
        )

    def document_states(self, instance: dg.DagsterInstance, only: list[str] | None = None) -> list[DocumentState]:
        """Where every known document (or just ``only``) stands now (see ``collect_document_states``)."""
        from atlas_pipeline.defs.document_states import collect_document_states

        store = self.store()
        return collect_document_states(instance, store, load_catalog(store), self.extraction_version(), only)

    def parse_limits(self) -> ParseLimits:
        return ParseLimits(seconds=self.parse_timeout_seconds, memory_mb=self.parse_memory_mb)

    @property
    def max_bytes(self) -> int:
        return int(self.max_document_mb * 1_000_000)

    def catalog_entry(self, key: str, catalog: Catalog | None = None) -> CatalogEntry:
        """The catalog entry of a partition (``catalog``: one already loaded, for runs over many partitions)."""
        entry = catalog.entries.get(key) if catalog is not None else load_entry(self.store(), key)
        if entry is None:
            raise dg.Failure(
                description=f"document {key!r} is not in the catalog: it was not found by a knowledge-base scan "
                f"of {self.knowledge_base} (add the file there and let the sensor or `atlas run` pick it up)"
            )
        return entry


class LLMResource(dg.ConfigurableResource):
    """An OpenAI-compatible endpoint. The key is an ``EnvVar``: resolved at run time, never shown or stored."""

    base_url: str = ""
    model: str = "gpt-4o-mini"
    api_key: str = ""
    timeout_seconds: float = 120.0
    max_retries: int = 4
    backoff_seconds: float = 2.0
    structured_output: str = "json_schema"
    max_tokens: int = 4096

    @classmethod
    def from_settings(cls, settings: AtlasSettings) -> "LLMResource":
        has_key = bool(settings.llm_api_key.get_secret_value())
        return cls(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=dg.EnvVar("ATLAS_LLM_API_KEY") if has_key else "",
            timeout_seconds=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
            backoff_seconds=settings.llm_backoff_seconds,
            structured_output=settings.llm_structured_output,
            max_tokens=settings.llm_max_tokens,
        )

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    def client(self, cache: Store | None) -> LLMClient:
        config = LLMConfig(**{name: getattr(self, name) for name in LLMConfig.__dataclass_fields__})
        return LLMClient(config, cache=cache)
