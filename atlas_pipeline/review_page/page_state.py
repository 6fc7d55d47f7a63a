"""What the review page's handlers share: the deployment, its stores, its template and the Dagster
instance, who is deciding, and what they may see (``review.extraction_team``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Any
from urllib.parse import unquote

import dagster as dg
from starlette.requests import Request

from atlas_pipeline.core.templates import Template
from atlas_pipeline.defs.document_states import PartitionFacts, document_states, instance_stamp, partition_facts
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.read_model.document_state import DocumentState
from atlas_pipeline.review.accounts import Account
from atlas_pipeline.review.decisions import load_decisions
from atlas_pipeline.review.extraction_team import Team, load_assignments, team_of, teams
from atlas_pipeline.review.final_values import review_document
from atlas_pipeline.review_page.sessions import Sessions
from atlas_pipeline.store.files import Store

REVIEWER_COOKIE = "atlas_reviewer"
# the page's changes one after another: two reviewers adding an entry at once never take the same entry number
WRITING = threading.Lock()


class ReviewPage:
    """What the page's handlers share: the deployment, its stores and policies, and the Dagster instance."""

    def __init__(self, deployment: Deployment, instance: Callable[[], dg.DagsterInstance]) -> None:
        self.deployment = deployment
        self.policy = deployment.review_policy()
        self.access = deployment.page_access()
        self.store: Store = deployment.store()
        self._instance = instance
        self.sessions = Sessions(self.access)
        self._facts: dict[tuple[str, ...], tuple[tuple[object, ...], PartitionFacts]] = {}
        self._facts_lock = threading.Lock()

    def instance(self) -> dg.DagsterInstance:
        return self._instance()

    def template(self) -> Template:
        return self.deployment.load_template()

    def states(self, only: list[str] | None = None) -> list[DocumentState]:
        """Where the documents stand. The partitions' facts (the costly part: a status per asset from Dagster) are
        kept while nothing has run since, so a decision or the next field does not wait for them; the records, the
        decisions and the review are read afresh every time."""
        instance = self.instance()
        stamp = instance_stamp(instance)

        def facts(keys: list[str]) -> PartitionFacts:
            if stamp is None:
                return partition_facts(instance, self.store, keys)
            with self._facts_lock:
                kept = self._facts.get(tuple(keys))
                if kept is not None and kept[0] == stamp:
                    return kept[1]
            read = partition_facts(instance, self.store, keys)
            with self._facts_lock:
                if len(self._facts) > 64:
                    self._facts.clear()
                self._facts[tuple(keys)] = (stamp, read)
            return read

        return document_states(instance, self.deployment, only, facts)

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
        return typed or unquote(request.cookies.get(REVIEWER_COOKIE, "")) or self.policy.reviewer

    def logins(self) -> bool:
        """Whether people log in (accounts or a trusted proxy): then independence is the server's to keep."""
        return self.sessions.required()

    def team(self, key: str) -> Team:
        return team_of(
            key, load_decisions(self.store, key), load_assignments(self.store).get(key), self.policy.extractors
        )

    def teams(self, keys: list[str]) -> dict[str, Team]:
        return teams(self.store, keys, self.policy.extractors)

    def blind_to(self, request: Request, team: Team) -> tuple[str, ...]:
        """What the person at the page may not see of the team's document now (``Team.blind_to``): nothing on a page
        without logins, where a reviewer chooses their own independent pass."""
        user = self.user(request)
        if user is None:  # set only while people log in (``app._who_is_there``)
            return ()
        return team.blind_to(user.name, user.role, self.policy.hide_model_values)

    def hidden_documents(self, request: Request, keys: list[str]) -> set[str]:
        """The documents among ``keys`` whose people's values the person at the page may not see now."""
        user = self.user(request)
        if user is None:  # set only while people log in (``app._who_is_there``)
            return set()
        return {key for key, team in self.teams(keys).items() if self.blind_to(request, team)}

    def visible_states(self, request: Request) -> list[DocumentState]:
        """Every document's state as the person at the page may see it: where they extract blind, the review holds
        only their own decisions (none of anyone's when the models are hidden too) — for the pages that show values
        across documents (studies, analysis)."""
        states = self.states()
        user = self.user(request)
        if user is None:  # set only while people log in (``app._who_is_there``)
            return states
        teams = self.teams([state.key for state in states])
        shown = []
        for state in states:
            unseen = self.blind_to(request, teams[state.key])
            if unseen and state.extraction is not None:
                mine = [d for d in load_decisions(self.store, state.key) if d.reviewer == user.name]
                review = None
                if "models" not in unseen:
                    review = review_document(
                        state.extraction,
                        mine,
                        self.deployment.accepted_tiers(),
                        self.deployment.derivations(),
                        team=True,  # their own values: waiting for the comparison, never pooled
                    )
                state = replace(state, review=review)
            shown.append(state)
        return shown
