"""The ``atlas`` resource: the deployment (``atlas_pipeline.deployment``) as Dagster config, so the UI shows the
settings a run used and assets, sensors and checks ask the same ``Deployment`` the CLI and the review page build."""

from __future__ import annotations

import functools

import dagster as dg

from atlas_pipeline.deployment import Deployment
from atlas_pipeline.knowledge.catalog import Catalog, CatalogEntry, load_entry


@functools.lru_cache(maxsize=16)
def _deployment(environment: tuple[tuple[str, str], ...]) -> Deployment:
    return Deployment.from_environment(dict(environment))


class AtlasResource(dg.ConfigurableResource):
    """The deployment's settings as ``ATLAS_*`` variables (``environment``); its secrets are ``EnvVar``s, resolved at
    run time and never shown or stored. Everything else is the ``Deployment``'s."""

    environment: dict[str, str]
    mineru_token: str = ""
    docling_api_key: str = ""
    llm_api_key: str = ""
    llm_second_api_key: str = ""

    @classmethod
    def from_deployment(cls, deployment: Deployment) -> AtlasResource:
        secrets = {
            variable.removeprefix("ATLAS_").lower(): dg.EnvVar(variable) for variable in deployment.secret_variables()
        }
        return cls(environment=deployment.environment(), **secrets)

    @property
    def deployment(self) -> Deployment:
        """The run's deployment, built once per process for these settings."""
        secrets = {
            f"ATLAS_{name.upper()}": getattr(self, name) for name in Deployment.secret_names() if getattr(self, name)
        }
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
