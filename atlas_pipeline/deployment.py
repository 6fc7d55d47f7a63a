"""The composition root: one deployment's parts, built from its settings in one place.

The CLI, the review page, the sensors and assets (through the thin ``AtlasResource``) and the benchmarks all ask a
``Deployment`` for the stores, the knowledge base, the parser choice, the rule, template and mode, the extraction
version, the LLM client and the search index, so a setting means the same thing wherever it is read. The settings
stay flat ``ATLAS_*`` variables; here they become the value objects the library owns, one per group (parsing,
providers, llm, review, search). Nothing here imports Dagster.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

from atlas_pipeline.config.settings import AtlasSettings, load_settings
from atlas_pipeline.core.templates import Template, assemble_template, load_template
from atlas_pipeline.extraction.prices import PriceTable, load_prices, price_file
from atlas_pipeline.extraction.rules import Rule, load_rule
from atlas_pipeline.extraction.version import ExtractionVersion, extraction_version
from atlas_pipeline.knowledge.listing import KnowledgeBase
from atlas_pipeline.parsing import ParseOptions
from atlas_pipeline.parsing.bounded import ParseLimits
from atlas_pipeline.review.derivations import Derivations
from atlas_pipeline.store.files import Store

if TYPE_CHECKING:
    from atlas_pipeline.extraction.batches import BatchQueue
    from atlas_pipeline.extraction.llm import LLMClient, LLMConfig
    from atlas_pipeline.parsing.providers import ParserChoice, ParsingProvider, ProviderLimits
    from atlas_pipeline.search.backends import InstanceStorage, SearchIndex


@dataclass(frozen=True)
class ReviewPolicy:
    """What the team accepts without a person, and where the review page is (the ``ATLAS_REVIEW_*`` group)."""

    accepted_tiers: frozenset[str]
    port: int
    reviewer: str
    inbox: str

    def document_url(self, key: str) -> str:
        return f"http://127.0.0.1:{self.port}/documents/{quote(key, safe='')}"


@dataclass(frozen=True)
class Deployment:
    """One deployment of Atlas: its settings, and every part built from them. Cheap to make; nothing is opened
    until asked for (files are read when a part is asked for, so an edited rule or template counts at once)."""

    settings: AtlasSettings

    @classmethod
    def from_settings(cls, settings: AtlasSettings) -> Deployment:
        return cls(settings)

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Deployment:
        """The deployment the ``ATLAS_*`` variables describe (``os.environ`` unless given); invalid settings raise
        ``SettingsError`` naming the variable."""
        return cls(load_settings(environ))

    # where things are

    def store(self) -> Store:
        """Snapshots, text, tables, records and decisions (``ATLAS_ARTIFACTS``)."""
        return Store(self.settings.artifacts)

    def exports_store(self) -> Store:
        return Store(self.settings.exports)

    def open_knowledge_base(self) -> KnowledgeBase:
        return KnowledgeBase(self.settings.knowledge_base, max_bytes=self.max_bytes)

    @property
    def knowledge_base(self) -> str:
        return self.settings.knowledge_base

    @property
    def max_bytes(self) -> int:
        return int(self.settings.max_document_mb * 1_000_000)

    # what is extracted, and how

    def load_rule(self) -> Rule:
        return load_rule(Path(self.settings.seeds_dir) / "rules", self.settings.rule)

    def load_template(self) -> Template:
        """The rule's template with the rule's custom fields added."""
        rule = self.load_rule()
        templates = Path(self.settings.seeds_dir) / "templates"
        return assemble_template(load_template(templates, rule.template), rule.custom_fields)

    def mode(self, rule: Rule) -> str:
        """skip or llm: forced by ATLAS_POSTPROCESS_MODE, else llm when an endpoint is configured, else the rule's."""
        if self.settings.postprocess_mode != "auto":
            return self.settings.postprocess_mode
        return "llm" if self.settings.llm_base_url else rule.postprocess_mode

    def extraction_version(self) -> ExtractionVersion:
        """The version extractions are made with now (see ``extraction.version``)."""
        rule = self.load_rule()
        parser = self.parser_choice().describe()
        settings = self.settings
        model, second = settings.llm_model, settings.llm_second_model
        return extraction_version(self.load_template(), rule, self.mode(rule), model, parser, second)

    # the parsing group

    def parse_options(self) -> ParseOptions:
        settings = self.settings
        return ParseOptions(
            engine=settings.pdf_engine,
            ocr=settings.ocr,
            ocr_language=settings.ocr_language,
            ocr_max_text_chars=None if settings.ocr_max_text_chars < 0 else settings.ocr_max_text_chars,
        )

    def parse_limits(self) -> ParseLimits:
        return ParseLimits(seconds=self.settings.parse_timeout_seconds, memory_mb=self.settings.parse_memory_mb)

    # the providers group

    def provider_limits(self) -> ProviderLimits:
        from atlas_pipeline.parsing.providers import ProviderLimits

        settings = self.settings
        return ProviderLimits(
            timeout_seconds=settings.provider_timeout_seconds,
            max_seconds=settings.provider_max_seconds,
            max_retries=settings.provider_max_retries,
            backoff_seconds=settings.provider_backoff_seconds,
            poll_seconds=settings.provider_poll_seconds,
            max_bytes=int(settings.provider_max_mb * 1_000_000),
        )

    def parser_choice(self) -> ParserChoice:
        """Who parses what (``parsing.providers``): the local parser, and a provider for PDFs and images if chosen."""
        from atlas_pipeline.parsing.providers import ParserChoice
        from atlas_pipeline.parsing.providers.local import LocalParser

        local = LocalParser(self.parse_options(), self.parse_limits())
        tables_parser = self.settings.tables_parser
        tables = local if tables_parser == "pymupdf4llm" else self._provider(tables_parser or self.settings.parser)
        return ParserChoice(local, text=self._provider(self.settings.parser), tables=tables)

    def _provider(self, name: str) -> ParsingProvider | None:
        settings, limits = self.settings, self.provider_limits()
        if name == "mineru":
            from atlas_pipeline.parsing.providers.mineru import MinerUHosted, MinerULocal

            language, backend, version = settings.mineru_language, settings.mineru_backend, settings.provider_version
            if settings.mineru_api == "hosted":
                token = settings.mineru_token.get_secret_value()
                return MinerUHosted(settings.mineru_url, token, backend, language, limits, version)
            return MinerULocal(settings.mineru_url, backend, language, limits, version)
        if name == "docling":
            from atlas_pipeline.parsing.providers.docling import DoclingServe

            return DoclingServe(
                settings.docling_url,
                settings.docling_api_key.get_secret_value(),
                settings.docling_table_mode,
                settings.docling_ocr,
                limits,
                settings.provider_version,
            )
        return None

    # the llm group

    @property
    def llm_configured(self) -> bool:
        return bool(self.settings.llm_base_url)

    def llm_config(self) -> LLMConfig:
        from atlas_pipeline.extraction.llm import LLMConfig  # openai loads only where an LLM is called

        settings = self.settings
        values = {
            name: getattr(settings, f"llm_{name}") for name in LLMConfig.__dataclass_fields__ if name != "api_key"
        }
        return LLMConfig(**values, api_key=settings.llm_api_key.get_secret_value())

    def price_file(self) -> str:
        """The price table file (ATLAS_LLM_PRICES, else the seeds folder's llm_prices.toml)."""
        return str(price_file(self.settings.llm_prices, self.settings.seeds_dir))

    def price_table(self) -> PriceTable:
        """The price table; a missing file is an empty table (every cost unknown), a broken one an error."""
        path = self.price_file()
        if not Path(path).exists():
            return PriceTable(currency="USD", models={}, source=path)
        return load_prices(path)

    def llm_client(self, cache: Store | None) -> LLMClient:
        """The client of the configured endpoint; ``cache``: the store that keeps answers (and the Batch API queue)."""
        from atlas_pipeline.extraction.llm import LLMClient

        config, table = self.llm_config(), self.price_table()
        batch = self.batch_queue(cache) if self.settings.llm_batch and cache is not None else None
        return LLMClient(config, cache, price=table.price_of(config.model), currency=table.currency, batch=batch)

    def second_llm_config(self) -> LLMConfig | None:
        """The second, independent extractor (``ATLAS_LLM_SECOND_*``), or None when one extractor is declared: its
        model, on its own endpoint or the first's, with the first's limits."""
        settings = self.settings
        if not settings.llm_second_model:
            return None
        first = self.llm_config()
        base_url = settings.llm_second_base_url or first.base_url
        key = settings.llm_second_api_key.get_secret_value()
        if not key and base_url.rstrip("/") == first.base_url.rstrip("/"):
            key = first.api_key
        return dataclasses.replace(first, model=settings.llm_second_model, base_url=base_url, api_key=key)

    def second_llm_client(self, cache: Store | None) -> LLMClient | None:
        """The second extractor's client (its answers cached and accounted on their own), or None."""
        from atlas_pipeline.extraction.llm import LLMClient

        config = self.second_llm_config()
        if config is None:
            return None
        table = self.price_table()
        return LLMClient(config, cache, price=table.price_of(config.model), currency=table.currency)

    def batch_queue(self, store: Store) -> BatchQueue:
        """The Batch API queue kept in the artifact store (``extraction.batches``)."""
        from atlas_pipeline.extraction.batches import BatchQueue

        return BatchQueue(store, self.settings.llm_batch_deadline_hours)

    # the review group

    def review_policy(self) -> ReviewPolicy:
        settings = self.settings
        return ReviewPolicy(settings.accepted_tiers, settings.review_port, settings.reviewer, settings.review_inbox)

    def accepted_tiers(self) -> frozenset[str]:
        """Tiers the team accepts without a person (ATLAS_REVIEW_ACCEPT_TIERS)."""
        return self.settings.accepted_tiers

    def final_values_policy(self) -> str:
        """A fingerprint of what makes a value final besides people's decisions — the tiers accepted without a
        person, the derivation rules and the cautioned methods opted in to, the template —: the aggregates record
        the one they were made with, and a change of any of them refreshes them (``planning.aggregates_stale``)."""
        derivations = self.derivations()
        canonical = {
            "accepted_tiers": sorted(self.accepted_tiers()),
            "derivations": derivations.fingerprint,
            "template": derivations.template.content_hash,
            "template_version": derivations.template.version,
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:16]

    def derivations(self) -> Derivations:
        """What a review derives: the template's rules, and the cautioned conversions the team opted in to
        (ATLAS_DERIVE_OPT_IN)."""
        return Derivations(self.load_template(), self.settings.derivations_opted_in)

    # the search group

    def search_index(self, instance: InstanceStorage) -> SearchIndex:
        """The search index: PostgreSQL beside a PostgreSQL instance, else SQLite (``ATLAS_SEARCH_BACKEND``)."""
        from atlas_pipeline.search.backends import open_index

        return open_index(self.settings.search_backend, self.settings.search_sqlite, instance)
