"""The ``atlas`` resource: the deployment (``atlas_pipeline.deployment``) as Dagster config, so the UI shows the
settings a run used and assets, sensors and checks ask the same ``Deployment`` the CLI and the review page build."""

from __future__ import annotations

import functools

import dagster as dg
from pydantic import SecretStr

from atlas_pipeline.config.settings import ENV_PREFIX, AtlasSettings, load_settings
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry, load_entry

SECRETS = {name for name, field in AtlasSettings.model_fields.items() if field.annotation is SecretStr}


def environment_of(settings: AtlasSettings) -> dict[str, str]:
    """The settings as the ``ATLAS_*`` variables that make them again, secrets left out."""
    values = settings.model_dump(exclude=SECRETS)
    return {
        ENV_PREFIX + name.upper(): str(value).lower() if isinstance(value, bool) else str(value)
        for name, value in values.items()
    }


@functools.lru_cache(maxsize=16)
def _deployment(environment: tuple[tuple[str, str], ...]) -> Deployment:
    return Deployment.from_settings(load_settings(dict(environment)))


class AtlasResource(dg.ConfigurableResource):
    """The deployment's settings as ``ATLAS_*`` variables (``environment``); its secrets are ``EnvVar``s, resolved at
    run time and never shown or stored. Everything else is the ``Deployment``'s."""

    environment: dict[str, str]
    mineru_token: str = ""
    docling_api_key: str = ""
    llm_api_key: str = ""
    llm_second_api_key: str = ""

    @classmethod
    def from_settings(cls, settings: AtlasSettings) -> AtlasResource:
        secrets = {
            name: dg.EnvVar(ENV_PREFIX + name.upper()) for name in SECRETS if getattr(settings, name).get_secret_value()
        }
        return cls(environment=environment_of(settings), **secrets)

    @property
    def deployment(self) -> Deployment:
        secrets = {ENV_PREFIX + name.upper(): getattr(self, name) for name in SECRETS if getattr(self, name)}
        return _deployment(tuple(sorted({**self.environment, **secrets}.items())))

    def catalog_entry(self, key: str, catalog: Catalog | None = None) -> CatalogEntry:
        """The catalog entry of a partition (``catalog``: one already loaded, for runs over many partitions)."""
        deployment = self.deployment
        entry = catalog.entries.get(key) if catalog is not None else load_entry(deployment.store(), key)
        if entry is None:
            raise dg.Failure(
                description=f"document {key!r} is not in the catalog: it was not found by a knowledge-base scan "
                f"of {deployment.knowledge_base} (add the file there and let the sensor or `atlas run` pick it up)"
            )
        return entry

    def review_link(self, key: str) -> dg.MetadataValue:
        """The document on the review page (`atlas review`, also started by `atlas dev`)."""
        return dg.MetadataValue.url(self.deployment.review_policy().document_url(key))
