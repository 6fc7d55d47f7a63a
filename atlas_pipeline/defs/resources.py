"""The ``atlas`` resource: the settings a run needs, and the stores and seed data built from them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import dagster as dg

from atlas_pipeline.config.settings import (
    AtlasSettings,
    DoclingTableMode,
    MinerUApi,
    ParserName,
    PdfEngine,
    PostprocessMode,
    SearchBackend,
    StructuredOutput,
    TablesParserName,
)
from atlas_pipeline.core.templates import Template, assemble_template, load_template
from atlas_pipeline.defs.document_states import collect_document_states
from atlas_pipeline.extraction.prices import PriceTable, load_prices, price_file
from atlas_pipeline.extraction.rules import Rule, load_rule
from atlas_pipeline.extraction.version import ExtractionVersion, extraction_version
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry, load_catalog, load_entry
from atlas_pipeline.knowledge.listing import KnowledgeBase
from atlas_pipeline.outputs.completion import DocumentState
from atlas_pipeline.parsing import ParseOptions
from atlas_pipeline.parsing.bounded import ParseLimits
from atlas_pipeline.store.files import Store

if TYPE_CHECKING:
    from atlas_pipeline.extraction.batches import BatchQueue
    from atlas_pipeline.extraction.llm import LLMClient
    from atlas_pipeline.parsing.providers import ParserChoice, ParsingProvider
    from atlas_pipeline.search.backends import SearchIndex


class AtlasResource(dg.ConfigurableResource):
    """Locations and parse options of one deployment: the ``AtlasSettings`` a run needs, copied by name (see
    ``from_settings``; the settings hold the defaults, the descriptions and the validation)."""

    knowledge_base: str
    artifacts: str
    exports: str
    seeds_dir: str
    rule: str
    ocr: bool
    ocr_language: str
    ocr_max_text_chars: int
    pdf_engine: PdfEngine
    max_document_mb: float
    parse_timeout_seconds: float
    parse_memory_mb: float
    postprocess_mode: PostprocessMode
    llm_model: str
    review_port: int
    review_accept_tiers: str
    search_backend: SearchBackend
    search_sqlite: str
    parser: ParserName
    tables_parser: TablesParserName
    mineru_url: str
    mineru_api: MinerUApi
    mineru_token: str  # an EnvVar: resolved at run time, never shown or stored
    mineru_backend: str
    mineru_language: str
    docling_url: str
    docling_api_key: str  # an EnvVar too
    docling_table_mode: DoclingTableMode
    docling_ocr: bool
    provider_timeout_seconds: float
    provider_max_seconds: float
    provider_max_retries: int
    provider_backoff_seconds: float
    provider_poll_seconds: float
    provider_max_mb: float
    provider_version: str
    llm_configured: bool  # an endpoint is set (ATLAS_LLM_BASE_URL): llm mode unless forced otherwise

    @classmethod
    def from_settings(cls, settings: AtlasSettings) -> AtlasResource:
        secrets = {"mineru_token": "ATLAS_MINERU_TOKEN", "docling_api_key": "ATLAS_DOCLING_API_KEY"}
        shared = {
            name: getattr(settings, name)
            for name in cls.model_fields
            if name in AtlasSettings.model_fields and name not in secrets
        }
        for name, variable in secrets.items():
            shared[name] = dg.EnvVar(variable) if getattr(settings, name).get_secret_value() else ""
        return cls(**shared, llm_configured=bool(settings.llm_base_url))

    def parser_choice(self) -> ParserChoice:
        """Who parses what (``parsing.providers``): the local parser, and a provider for PDFs and images if chosen."""
        from atlas_pipeline.parsing.providers import ParserChoice, ProviderLimits
        from atlas_pipeline.parsing.providers.local import LocalParser

        limits = ProviderLimits(
            timeout_seconds=self.provider_timeout_seconds,
            max_seconds=self.provider_max_seconds,
            max_retries=self.provider_max_retries,
            backoff_seconds=self.provider_backoff_seconds,
            poll_seconds=self.provider_poll_seconds,
            max_bytes=int(self.provider_max_mb * 1_000_000),
        )

        def provider(name: str) -> ParsingProvider | None:
            if name == "mineru":
                from atlas_pipeline.parsing.providers.mineru import MinerUHosted, MinerULocal

                if self.mineru_api == "hosted":
                    return MinerUHosted(
                        self.mineru_url,
                        self.mineru_token,
                        self.mineru_backend,
                        self.mineru_language,
                        limits,
                        self.provider_version,
                    )
                return MinerULocal(
                    self.mineru_url, self.mineru_backend, self.mineru_language, limits, self.provider_version
                )
            if name == "docling":
                from atlas_pipeline.parsing.providers.docling import DoclingServe

                return DoclingServe(
                    self.docling_url,
                    self.docling_api_key,
                    self.docling_table_mode,
                    self.docling_ocr,
                    limits,
                    self.provider_version,
                )
            return None

        local = LocalParser(self.parse_options(), self.parse_limits())
        tables = local if self.tables_parser == "pymupdf4llm" else provider(self.tables_parser or self.parser)
        return ParserChoice(local, text=provider(self.parser), tables=tables)

    def search_index(self, instance: dg.DagsterInstance) -> SearchIndex:
        from atlas_pipeline.search.backends import open_index

        return open_index(self.search_backend, self.search_sqlite, instance)

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
        parser = self.parser_choice().describe()
        return extraction_version(self.load_template(), rule, self.mode(rule), self.llm_model, parser)

    def parse_options(self) -> ParseOptions:
        return ParseOptions(
            engine=self.pdf_engine,
            ocr=self.ocr,
            ocr_language=self.ocr_language,
            ocr_max_text_chars=None if self.ocr_max_text_chars < 0 else self.ocr_max_text_chars,
        )

    def document_states(self, instance: dg.DagsterInstance, only: list[str] | None = None) -> list[DocumentState]:
        """Where every known document (or just ``only``) stands now (see ``collect_document_states``)."""
        store = self.store()
        return collect_document_states(
            instance, store, load_catalog(store), self.extraction_version(), only, self.accepted_tiers()
        )

    def accepted_tiers(self) -> frozenset[str]:
        """Tiers the team accepts without a person (ATLAS_REVIEW_ACCEPT_TIERS)."""
        return frozenset(filter(None, self.review_accept_tiers.split(",")))

    def review_link(self, key: str) -> dg.MetadataValue:
        """The document on the review page (`atlas review`, also started by `atlas dev`)."""
        return dg.MetadataValue.url(f"http://127.0.0.1:{self.review_port}/documents/{quote(key, safe='')}")

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


_NOT_COPIED = ("api_key", "prices")  # the key an EnvVar, the price table's file found in the seeds


class LLMResource(dg.ConfigurableResource):
    """An OpenAI-compatible endpoint: the ``ATLAS_LLM_*`` settings, copied by name. The key is an ``EnvVar``:
    resolved at run time, never shown or stored."""

    base_url: str
    model: str
    api_key: str
    timeout_seconds: float
    max_retries: int
    backoff_seconds: float
    structured_output: StructuredOutput
    max_tokens: int
    concurrency: int
    requests_per_minute: int
    tokens_per_minute: int
    gate_dir: str
    batch: bool
    batch_poll_seconds: int
    prices: str  # the price table file (ATLAS_LLM_PRICES, else the seeds folder's llm_prices.toml)

    @classmethod
    def from_settings(cls, settings: AtlasSettings) -> LLMResource:
        shared = {name: getattr(settings, f"llm_{name}") for name in cls.model_fields if name not in _NOT_COPIED}
        has_key = bool(settings.llm_api_key.get_secret_value())
        prices = str(price_file(settings.llm_prices, settings.seeds_dir))
        return cls(**shared, prices=prices, api_key=dg.EnvVar("ATLAS_LLM_API_KEY") if has_key else "")

    @property
    def configured(self) -> bool:
        return bool(self.base_url)

    def client(self, cache: Store | None) -> LLMClient:
        from atlas_pipeline.extraction.llm import LLMClient, LLMConfig  # openai loads only where an LLM is called

        table = self.price_table()
        config = LLMConfig(**{name: getattr(self, name) for name in LLMConfig.__dataclass_fields__})
        batch = self.batch_queue(cache) if self.batch and cache is not None else None
        return LLMClient(config, cache, price=table.price_of(self.model), currency=table.currency, batch=batch)

    def batch_queue(self, store: Store) -> BatchQueue:
        """The Batch API queue kept in the artifact store (``extraction.batches``)."""
        from atlas_pipeline.extraction.batches import BatchQueue  # openai loads only where an LLM is called

        return BatchQueue(store)

    def price_table(self) -> PriceTable:
        """The price table; a missing file is an empty table (every cost unknown), a broken one an error."""
        if not Path(self.prices).exists():
            return PriceTable(currency="USD", models={}, source=self.prices)
        return load_prices(self.prices)
