"""What the review page's handlers share: the deployment's settings, its stores, its template and the Dagster
instance, and who is deciding."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

import dagster as dg
from starlette.requests import Request

from atlas_pipeline.config.settings import AtlasSettings
from atlas_pipeline.core.templates import Template
from atlas_pipeline.defs.document_states import document_states
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.outputs.completion import DocumentState
from atlas_pipeline.review.accounts import Account
from atlas_pipeline.review_page.sessions import Sessions
from atlas_pipeline.store.files import Store

REVIEWER_COOKIE = "atlas_reviewer"


class ReviewPage:
    """What the page's handlers share: the deployment's settings, its stores and the Dagster instance."""

    def __init__(self, settings: AtlasSettings, instance: Callable[[], dg.DagsterInstance]) -> None:
        self.settings = settings
        self.deployment = Deployment.from_settings(settings)
        self.store: Store = self.deployment.store()
        self._instance = instance
        self.sessions = Sessions(settings)

    def instance(self) -> dg.DagsterInstance:
        return self._instance()

    def template(self) -> Template:
        return self.deployment.load_template()

    def states(self, only: list[str] | None = None) -> list[DocumentState]:
        return document_states(self.instance(), self.deployment, only)

    def user(self, request: Request) -> Account | None:
        """The logged-in person (accounts or a trusted proxy), or None on an open page."""
        return getattr(request.state, "user", None)

    def reviewer(self, request: Request, form: Any = None) -> str:
        """Who decides: the login when there is one (a name in the form is then ignored), else the name in the
        form, else the one set on the page, else ``ATLAS_REVIEWER``."""
        user = self.user(request)
        if user is not None:
            return user.name
        typed = str(form.get("reviewer") or "").strip() if form is not None else ""
        return typed or unquote(request.cookies.get(REVIEWER_COOKIE, "")) or self.settings.reviewer
