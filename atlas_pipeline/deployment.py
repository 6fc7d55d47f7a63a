"""The composition root: one deployment's parts, built from its settings in one place.

The CLI, the review page, the sensors and assets (through the thin ``AtlasResource``) and the benchmarks all ask a
``Deployment`` for the stores, the knowledge base, the parser choice, the rule, template and mode, the extraction
version, the LLM client and the search index, so a setting means the same thing wherever it is read. The settings
are typed groups read from flat ``ATLAS_*`` variables (``config.settings``); here they become the value objects the
library owns (``LLMConfig``, ``ParseOptions``, ``ProviderLimits``, ``Politeness``, …), which also own the defaults the
settings take. The CLI, the Dagster floor and the review page are handed a Deployment and read no setting themselves.
Nothing here imports Dagster.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from atlas_pipeline.config.settings import (
    ENV_PREFIX,
    SECRET_SETTINGS,
    AtlasSettings,
    SettingsError,
    load_settings,
    settings_environment,
)
from atlas_pipeline.core.rob2_module import rob2_module
from atlas_pipeline.core.templates import Template, assemble_template, load_template
from atlas_pipeline.extraction.prices import PriceTable, load_prices, price_file
from atlas_pipeline.extraction.rules import Rule, load_rule
from atlas_pipeline.extraction.version import ExtractionVersion, extraction_version
from atlas_pipeline.knowledge.listing import KnowledgeBase
from atlas_pipeline.knowledge.planning import documents_per_run
from atlas_pipeline.parsing import ParseOptions
from atlas_pipeline.parsing.bounded import ParseLimits
from atlas_pipeline.review.derivations import Derivations
from atlas_pipeline.review.finality import FINALITY_RULE
from atlas_pipeline.store.files import Store

if TYPE_CHECKING:
    from atlas_pipeline.extraction.llm.batch import BatchQueue
    from atlas_pipeline.extraction.llm.client import LLMClient
    from atlas_pipeline.extraction.llm.config import LLMConfig
    from atlas_pipeline.parsing.providers import ParserChoice, ParsingProvider, ProviderLimits
    from atlas_pipeline.review.workbook_import import ImportReport
    from atlas_pipeline.search.backends import InstanceStorage
    from atlas_pipeline.search.index import SearchIndex
    from atlas_pipeline.sources.config import Source
    from atlas_pipeline.sources.politeness import Politeness


@dataclass(frozen=True)
class ReviewPolicy:
    """What the team accepts without a person, and where the review page is (the ``ATLAS_REVIEW_*`` group)."""

    accepted_tiers: frozenset[str]
    port: int
    reviewer: str
    inbox: str
    workbook_max_rows: int
    workbook_sheet_rows: int  # the most rows the exported workbook writes in a sheet
    extractors: int  # people who extract each document independently
    hide_model_values: bool  # an extractor's pass is blind to the model's values too

    @property
    def page_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def document_url(self, key: str) -> str:
        return f"{self.page_url}/documents/{quote(key, safe='')}"


@dataclass(frozen=True)
class PageAccess:
    """Who may use the review page and how long a login lasts (accounts, a trusted proxy, the hosts it answers)."""

    users_file: str
    auth_header: str
    session_hours: float
    login_free_failures: int
    login_max_lockout_seconds: int
    trusted_hosts: str


@dataclass(frozen=True)
class ExtractionSetup:
    """What an extraction is made with — the rule, its template, the mode — and the version they make together."""

    rule: Rule
    template: Template
    mode: str
    version: ExtractionVersion


@dataclass(frozen=True)
class Pace:
    """How often the sensors look and how much one tick takes on (the intervals and per-tick limits)."""

    scan_interval_seconds: int
    scan_budget_seconds: float
    max_runs_per_tick: int
    review_interval_seconds: int
    automation_interval_seconds: int
    batch_poll_seconds: int
    sources_interval_seconds: int
    llm_concurrency: int  # requests in flight in one run


@dataclass(frozen=True)
class Executor:
    """Where a run's steps execute (``ATLAS_EXECUTOR``: in process, multiprocess, celery, k8s) and its YAML config."""

    name: str
    config: str


@dataclass(frozen=True)
class Gold:
    """The human gold answers an evaluation compares with (``ATLAS_GOLD``; none: no evaluation asset)."""

    path: str
    tolerance: float


@dataclass(frozen=True)
class Deployment:
    """One deployment of Atlas: its settings, and every part built from them. Cheap to make; nothing is opened
    until asked for (files are read when a part is asked for, so an edited rule or template counts at once)."""

    settings: AtlasSettings

    @classmethod
    def from_settings(cls, settings: AtlasSettings) -> Deployment:
        return cls(settings)

    @classmethod
    def of(cls, given: AtlasSettings | Deployment) -> Deployment:
        """``given`` as a Deployment (the entry points take either; inside, only the Deployment is read)."""
        return given if isinstance(given, Deployment) else cls(given)

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Deployment:
        """The deployment the ``ATLAS_*`` variables describe (``os.environ`` unless given); invalid settings raise
        ``SettingsError`` naming the variable."""
        return cls(load_settings(environ))

    def with_values(self, **values: Any) -> Deployment:
        """This deployment with some settings changed (by setting name, validated again): the source of a
        migration, a page served with another policy."""
        return Deployment(self.settings.updated(**values))

    def environment(self) -> dict[str, str]:
        """The settings as the ``ATLAS_*`` variables that make them again, secrets left out (a run's config)."""
        return settings_environment(self.settings)

    @staticmethod
    def secret_names() -> frozenset[str]:
        """The settings that are secrets (keys, tokens): never shown, never stored."""
        return SECRET_SETTINGS

    def secret_variables(self) -> frozenset[str]:
        """The ``ATLAS_*`` variables of the secrets this deployment has a value for."""
        return frozenset(
            ENV_PREFIX + name.upper() for name in SECRET_SETTINGS if self.settings.value(name).get_secret_value()
        )

    # how the deployment runs

    def pace(self) -> Pace:
        settings = self.settings
        return Pace(
            scan_interval_seconds=settings.runtime.sensor_interval_seconds,
            scan_budget_seconds=settings.runtime.sensor_scan_budget_seconds,
            max_runs_per_tick=settings.runtime.sensor_max_runs_per_tick,
            review_interval_seconds=settings.review.interval_seconds,
            automation_interval_seconds=settings.runtime.automation_interval_seconds,
            batch_poll_seconds=settings.llm.batch_poll_seconds,
            sources_interval_seconds=settings.sources.interval_seconds,
            llm_concurrency=settings.llm.concurrency,
        )

    @property
    def instance_config(self) -> str:
        """The Dagster instance config an empty ``DAGSTER_HOME`` is given (``ATLAS_INSTANCE_CONFIG``; empty: the
        project's dagster.yaml)."""
        return self.settings.runtime.instance_config

    def executor(self) -> Executor:
        return Executor(self.settings.runtime.executor, self.settings.runtime.executor_config)

    def gold(self) -> Gold | None:
        return Gold(self.settings.review.gold, self.gold_tolerance) if self.settings.review.gold else None

    @property
    def gold_tolerance(self) -> float:
        """How near the gold a number must be to count as equal (``ATLAS_GOLD_TOLERANCE``), gold file or not."""
        return self.settings.review.gold_tolerance

    @property
    def llm_batch(self) -> bool:
        """Extractions go through the endpoint's Batch API (``ATLAS_LLM_BATCH`` with an endpoint)."""
        return bool(self.settings.llm.batch and self.settings.llm.base_url)

    # the sources group

    def politeness(self) -> Politeness:
        from atlas_pipeline.sources.politeness import Politeness

        settings = self.settings
        return Politeness(
            user_agent=settings.sources.user_agent,
            max_bytes=self.max_bytes,
            backlog_threshold=settings.sources.backlog_threshold,
        )

    def declared_sources(self) -> list[Source]:
        """The sources of the sources file (``ATLAS_SOURCES``, else the seeds'); a broken file raises
        ``SourcesError``."""
        from atlas_pipeline.sources.config import load_sources, sources_file

        path = sources_file(self.settings.sources.file, self.settings.project.seeds_dir)
        return load_sources(path) if path else []

    # where things are

    def store(self) -> Store:
        """Snapshots, text, tables, records and decisions (``ATLAS_ARTIFACTS``)."""
        return Store(self.settings.project.artifacts)

    def exports_store(self) -> Store:
        return Store(self.settings.project.exports)

    def open_knowledge_base(self) -> KnowledgeBase:
        return KnowledgeBase(self.settings.project.knowledge_base, max_bytes=self.max_bytes)

    @property
    def knowledge_base(self) -> str:
        return self.settings.project.knowledge_base

    @property
    def max_bytes(self) -> int:
        return int(self.settings.parsing.max_document_mb * 1_000_000)

    # what is extracted, and how

    @property
    def rule_name(self) -> str:
        return self.settings.project.rule

    def load_rule(self) -> Rule:
        return load_rule(Path(self.settings.project.seeds_dir) / "rules", self.settings.project.rule)

    def load_template(self) -> Template:
        """The rule's template with the rule's custom fields added."""
        return self._template_of(self.load_rule())

    def _template_of(self, rule: Rule) -> Template:
        templates = Path(self.settings.project.seeds_dir) / "templates"
        assessment = rob2_module(rule.rob2) if rule.rob2 else None
        return assemble_template(load_template(templates, rule.template), rule.custom_fields, assessment)

    def extraction_setup(self) -> ExtractionSetup:
        """The rule, template and mode read once, with the version computed from these very ones: an extraction is
        tagged with the version it was made with, even when a file is edited while it runs."""
        rule = self.load_rule()
        template, mode = self._template_of(rule), self.mode(rule)
        parser = self.parser_choice().describe()
        model, second = self.settings.llm.model, self.settings.llm.second_model
        return ExtractionSetup(rule, template, mode, extraction_version(template, rule, mode, model, parser, second))

    def mode(self, rule: Rule) -> str:
        """skip or llm: forced by ATLAS_POSTPROCESS_MODE, else llm when an endpoint is configured, else the rule's."""
        if self.settings.project.postprocess_mode != "auto":
            return self.settings.project.postprocess_mode
        return "llm" if self.settings.llm.base_url else rule.postprocess_mode

    def documents_per_run(self, rule: Rule | None = None, chosen: int = 0) -> int:
        """How many documents one run takes on (``knowledge.planning.documents_per_run``): ``chosen`` (``atlas run
        --batch``), else ``ATLAS_DOCUMENTS_PER_RUN``, else the LLM concurrency when a model extracts, else one."""
        mode = self.mode(rule if rule is not None else self.load_rule())
        chosen = chosen or self.settings.runtime.documents_per_run
        return documents_per_run(mode, self.settings.llm.concurrency, chosen)

    def extraction_version(self) -> ExtractionVersion:
        """The version extractions are made with now (see ``extraction.version``)."""
        return self.extraction_setup().version

    # the parsing group

    def parse_options(self) -> ParseOptions:
        settings = self.settings
        return ParseOptions(
            engine=settings.parsing.pdf_engine,
            ocr=settings.parsing.ocr,
            ocr_language=settings.parsing.ocr_language,
            ocr_max_text_chars=None if settings.parsing.ocr_max_text_chars < 0 else settings.parsing.ocr_max_text_chars,
        )

    def parse_limits(self) -> ParseLimits:
        return ParseLimits(
            seconds=self.settings.parsing.parse_timeout_seconds, memory_mb=self.settings.parsing.parse_memory_mb
        )

    # the providers group

    def provider_limits(self) -> ProviderLimits:
        from atlas_pipeline.parsing.providers import ProviderLimits

        settings = self.settings
        return ProviderLimits(
            timeout_seconds=settings.providers.provider_timeout_seconds,
            max_seconds=settings.providers.provider_max_seconds,
            max_retries=settings.providers.provider_max_retries,
            backoff_seconds=settings.providers.provider_backoff_seconds,
            poll_seconds=settings.providers.provider_poll_seconds,
            max_bytes=int(settings.providers.provider_max_mb * 1_000_000),
        )

    def parser_choice(self) -> ParserChoice:
        """Who parses what (``parsing.providers``): the local parser, and a provider for PDFs and images if chosen."""
        from atlas_pipeline.parsing.providers import ParserChoice
        from atlas_pipeline.parsing.providers.local import LocalParser

        local = LocalParser(self.parse_options(), self.parse_limits())
        tables_parser = self.settings.providers.tables_parser
        tables = (
            local if tables_parser == "pymupdf4llm" else self._provider(tables_parser or self.settings.providers.parser)
        )
        return ParserChoice(local, text=self._provider(self.settings.providers.parser), tables=tables)

    def _provider(self, name: str) -> ParsingProvider | None:
        settings, limits = self.settings, self.provider_limits()
        if name == "mineru":
            from atlas_pipeline.parsing.providers.mineru import MinerUHosted, MinerULocal

            language, backend, version = (
                settings.providers.mineru_language,
                settings.providers.mineru_backend,
                settings.providers.provider_version,
            )
            if settings.providers.mineru_api == "hosted":
                token = settings.providers.mineru_token.get_secret_value()
                return MinerUHosted(settings.providers.mineru_url, token, backend, language, limits, version)
            return MinerULocal(settings.providers.mineru_url, backend, language, limits, version)
        if name == "docling":
            from atlas_pipeline.parsing.providers.docling import DoclingServe

            return DoclingServe(
                settings.providers.docling_url,
                settings.providers.docling_api_key.get_secret_value(),
                settings.providers.docling_table_mode,
                settings.providers.docling_ocr,
                limits,
                settings.providers.provider_version,
            )
        return None

    # the llm group

    @property
    def llm_configured(self) -> bool:
        return bool(self.settings.llm.base_url)

    def llm_config(self, shared_database: str | None = None) -> LLMConfig:
        """The endpoint and its limits. ``shared_database``, given where requests are sent through the gate (the
        extraction step): the Dagster instance's PostgreSQL URL, "" for another instance — where the request gate
        counts ``ATLAS_LLM_CONCURRENCY`` for every machine (``ATLAS_LLM_GATE``); None where nothing is sent through
        it (what a command shows, the Batch API's uploads): this machine's files."""
        from atlas_pipeline.extraction.llm.config import LLMConfig

        settings = self.settings
        own = set(LLMConfig.__dataclass_fields__) - {"api_key", "gate_url"}
        values = {name: getattr(settings.llm, name) for name in own}
        gate = settings.llm.gate
        if gate == "postgres" and shared_database == "":
            raise SettingsError(
                "ATLAS_LLM_GATE=postgres needs a Dagster instance on PostgreSQL (deploy/postgres/dagster.yaml): its "
                "database holds the request gate (or set ATLAS_LLM_GATE=host)"
            )
        gate_url = (shared_database or "") if gate != "host" else ""
        return LLMConfig(**values, api_key=settings.llm.api_key.get_secret_value(), gate_url=gate_url)

    def price_file(self) -> str:
        """The price table file (ATLAS_LLM_PRICES, else the seeds folder's llm_prices.toml)."""
        return str(price_file(self.settings.llm.prices, self.settings.project.seeds_dir))

    def price_table(self) -> PriceTable:
        """The price table; a missing file is an empty table (every cost unknown), a broken one an error."""
        path = self.price_file()
        if not Path(path).exists():
            return PriceTable(currency="USD", models={}, source=path)
        return load_prices(path)

    def llm_client(self, cache: Store | None, shared_database: str | None = None) -> LLMClient:
        """The client of the configured endpoint; ``cache``: the store that keeps answers (and the Batch API queue);
        ``shared_database``: see ``llm_config``."""
        from atlas_pipeline.extraction.llm.client import LLMClient  # openai loads only where an LLM is called

        config, table = self.llm_config(shared_database), self.price_table()
        batch = self.batch_queue(cache) if self.settings.llm.batch and cache is not None else None
        return LLMClient(config, cache, price=table.price_of(config.model), currency=table.currency, batch=batch)

    def second_llm_config(self, shared_database: str | None = None) -> LLMConfig | None:
        """The second, independent extractor (``ATLAS_LLM_SECOND_*``), or None when one extractor is declared: its
        model, on its own endpoint or the first's, with the first's limits."""
        settings = self.settings
        if not settings.llm.second_model:
            return None
        first = self.llm_config(shared_database)
        base_url = settings.llm.second_base_url or first.base_url
        key = settings.llm.second_api_key.get_secret_value()
        if not key and base_url.rstrip("/") == first.base_url.rstrip("/"):
            key = first.api_key
        return dataclasses.replace(first, model=settings.llm.second_model, base_url=base_url, api_key=key)

    def second_llm_client(self, cache: Store | None, shared_database: str | None = None) -> LLMClient | None:
        """The second extractor's client (its answers cached and accounted on their own), or None."""
        from atlas_pipeline.extraction.llm.client import LLMClient  # openai loads only where an LLM is called

        config = self.second_llm_config(shared_database)
        if config is None:
            return None
        table = self.price_table()
        return LLMClient(config, cache, price=table.price_of(config.model), currency=table.currency)

    def batch_queue(self, store: Store) -> BatchQueue:
        """The Batch API queue kept in the artifact store (``extraction.llm.batch``)."""
        from atlas_pipeline.extraction.llm.batch import BatchQueue

        return BatchQueue(store, self.settings.llm.batch_deadline_hours)

    # the review group

    def review_policy(self) -> ReviewPolicy:
        """The settings alone (nothing read): asked for per document, per tick and per page."""
        settings = self.settings
        return ReviewPolicy(
            settings.review.accepted_tiers,
            settings.review.port,
            settings.review.reviewer,
            settings.review.inbox,
            settings.review.workbook_max_rows,
            settings.review.workbook_sheet_rows,
            settings.review.extractors,
            settings.review.hide_model_values,
        )

    def person(self, given: str | None = None) -> str:
        """Who a person's act is recorded under: ``given``, else ``ATLAS_REVIEWER``, else the login ($USER)."""
        return given or self.settings.review.reviewer or os.environ.get("USER", "unknown")

    def page_access(self) -> PageAccess:
        settings = self.settings
        return PageAccess(
            users_file=settings.review.users,
            auth_header=settings.review.auth_header,
            session_hours=settings.review.session_hours,
            login_free_failures=settings.review.login_free_failures,
            login_max_lockout_seconds=settings.review.login_max_lockout_seconds,
            trusted_hosts=settings.runtime.trusted_hosts,
        )

    def import_review_inbox(self) -> Iterator[ImportReport]:
        """Take in the reviewed workbooks dropped into the review inbox (``ATLAS_REVIEW_INBOX``; none: nothing), a
        report per workbook — what the review sensor and ``atlas run`` both do."""
        from atlas_pipeline.review.accounts import logins_required
        from atlas_pipeline.review.workbook_import import import_inbox  # polars' xlsx reader: only when asked

        policy, access = self.review_policy(), self.page_access()
        if not policy.inbox:
            return
        yield from import_inbox(
            Store(policy.inbox),
            self.store(),
            self.load_template(),
            policy.reviewer,
            self.derivations(),
            policy.accepted_tiers,
            policy.workbook_max_rows,
            authors_required=logins_required(access.users_file, access.auth_header),  # read now: a login added counts
        )

    def accepted_tiers(self) -> frozenset[str]:
        """Tiers the team accepts without a person (ATLAS_REVIEW_ACCEPT_TIERS)."""
        return self.settings.review.accepted_tiers

    def team_review(self) -> bool:
        """Whether the review is a team's: people log in (accounts, or a trusted proxy naming them) — a value is then
        final only once its document's extractions are compared (``review.finality``). Read now: an account added
        counts at once."""
        from atlas_pipeline.review.accounts import logins_required

        access = self.page_access()
        return logins_required(access.users_file, access.auth_header)

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
            "team": self.team_review(),
            "finality": FINALITY_RULE,
        }
        return hashlib.sha256(json.dumps(canonical, sort_keys=True).encode()).hexdigest()[:16]

    def derivations(self) -> Derivations:
        """What a review derives: the template's rules, and the cautioned conversions the team opted in to
        (ATLAS_DERIVE_OPT_IN)."""
        return Derivations(self.load_template(), self.settings.review.derivations_opted_in)

    # the search group

    def search_index(self, instance: InstanceStorage) -> SearchIndex:
        """The search index: PostgreSQL beside a PostgreSQL instance, else SQLite (``ATLAS_SEARCH_BACKEND``)."""
        from atlas_pipeline.search.backends import open_index

        return open_index(self.settings.search.backend, self.settings.search.sqlite, instance)
