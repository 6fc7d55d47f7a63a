"""The review page: a person sees each value with its evidence and approves, corrects or rejects it.

Server-rendered with Starlette and Jinja2 (both already installed with Dagster's web server, so nothing heavy is
added; a few lines of JavaScript for keyboard shortcuts and live document statuses). It reads and writes only the
stores — the artifact store (records, snapshots, the decision log) and the knowledge base (uploads) — and the
Dagster instance (document statuses). State changes are POSTs only, from the page's own origin; no setting or
secret is ever rendered. Bound to 127.0.0.1 by ``atlas review``.

This module assembles the app: its middleware (trusted hosts, who is there, changes only from the page itself:
``origin``) and its routes, which live by concern — the lists (``list_routes``), a document's paper
(``paper_routes``), its decisions (``decision_routes``), its repeating groups' entries (``grid_routes``), login
(``login_routes``) and the team, studies, analysis and imports pages — with what they share in ``common``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any
from urllib.parse import urlencode

import dagster as dg
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from atlas_pipeline.config.hosts import LOOPBACK_ADDRESSES, trusted_hosts
from atlas_pipeline.deployment import Deployment
from atlas_pipeline.review.accounts import AccountError
from atlas_pipeline.review_page.analysis_page import analysis
from atlas_pipeline.review_page.common import MAX_FORM_FIELDS, TEMPLATES, not_adjudicator, refused_page
from atlas_pipeline.review_page.decision_routes import decision, document_extraction, undo
from atlas_pipeline.review_page.grid_routes import add_entry, reject_entry, save_grid
from atlas_pipeline.review_page.imports_page import imports, upload_workbook
from atlas_pipeline.review_page.list_routes import disagreements, documents, documents_api, search, set_reviewer, upload
from atlas_pipeline.review_page.login_routes import login, logout
from atlas_pipeline.review_page.origin import SameOriginChanges
from atlas_pipeline.review_page.page_state import WRITING, ReviewPage
from atlas_pipeline.review_page.paper_routes import document, find_api, page_image, page_words_api
from atlas_pipeline.review_page.rob2_routes import save_rob2
from atlas_pipeline.review_page.sessions import OPEN_PATHS
from atlas_pipeline.review_page.study_pages import choose_value, link_report, study_detail, study_list
from atlas_pipeline.review_page.team_pages import assignments, next_document, team


async def team_page(request: Request) -> Response:
    return await run_in_threadpool(team, request, TEMPLATES)


async def team_assignments(request: Request) -> Response:
    return await assignments(request, refused_page)


async def _imports_upload(request: Request) -> Response:
    return await upload_workbook(request, refused_page)


async def _next_document(request: Request) -> Response:
    return await run_in_threadpool(next_document, request)


async def analysis_view(request: Request) -> Response:
    return await run_in_threadpool(analysis, request, TEMPLATES)


async def studies_page(request: Request) -> Response:
    return await run_in_threadpool(study_list, request, TEMPLATES)


async def study_page(request: Request) -> Response:
    return await run_in_threadpool(study_detail, request, TEMPLATES)


async def study_choice(request: Request) -> Response:
    return not_adjudicator(request, "choosing which report's value a study takes") or await choose_value(
        request, TEMPLATES
    )


async def study_link(request: Request) -> Response:
    return not_adjudicator(request, "linking reports into studies") or await link_report(request)


async def _who_is_there(request: Request, call_next) -> Response:
    """Everyone logs in once there are accounts (or a proxy names them): an unknown visitor is sent to the login
    page (GET) or refused (any other method)."""
    page: ReviewPage = request.app.state.page
    request.state.user = None
    try:
        required = page.sessions.required()
        user = page.sessions.user(request) if required else None
    except AccountError as error:
        return PlainTextResponse(str(error), status_code=500)
    if not required and not request.app.state.loopback:  # the last account removed while serving a network
        return PlainTextResponse(
            "this review page listens beyond its machine and has no accounts: add one with `atlas users add`",
            status_code=503,
        )
    if required and user is None and request.url.path not in OPEN_PATHS:
        if request.method == "GET":
            back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
            return RedirectResponse("/login?" + urlencode({"next": back}), status_code=303)
        return PlainTextResponse("log in first: /login", status_code=401)
    request.state.user = user
    return await call_next(request)


def _off_the_loop(handler: Callable[[Request], Awaitable[Response]]) -> Callable[[Request], Awaitable[Response]]:
    """A POST handler whose work (decisions, reviews, templates: files and CPU) runs in a worker thread: the form is
    read from the connection here, on the event loop, and kept on the request; the rest never holds the loop, so one
    heavy request never keeps the login page, or any other, from answering."""

    @functools.wraps(handler)
    async def run(request: Request) -> Response:
        # cached on the request: the handler's own read returns it at once; a grid of many entries has two inputs
        # a cell (Starlette's default of 1,000 fields refused a grid of about twenty entries)
        await request.form(max_fields=MAX_FORM_FIELDS)
        return await run_in_threadpool(_one_at_a_time, handler(request))

    return run


def _one_at_a_time(work: Coroutine[Any, Any, Response]) -> Response:
    """The page's changes one after another, as on the event loop before: two reviewers adding an entry at once
    never take the same entry number, two links of studies never lose one."""
    with WRITING:
        return asyncio.run(work)


def create_app(
    deployment: Deployment, instance: Callable[[], dg.DagsterInstance] | None = None, host: str = "127.0.0.1"
) -> Starlette:
    """The review page's ASGI app over one deployment (``instance``: how to reach the Dagster instance; default
    ``DagsterInstance.get()`` from DAGSTER_HOME, opened once; ``host``: the address it listens on — beyond this
    machine it answers only while people log in)."""
    cached: list[dg.DagsterInstance] = []

    def default_instance() -> dg.DagsterInstance:
        if not cached:
            cached.append(dg.DagsterInstance.get())
        return cached[0]

    hosts = trusted_hosts(deployment.page_access().trusted_hosts)  # no DNS rebinding
    app = Starlette(
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
            Middleware(BaseHTTPMiddleware, dispatch=_who_is_there),
            Middleware(SameOriginChanges),  # a change from another site's page refused before any handler runs
        ],
        routes=[
            Route("/login", login, methods=["GET", "POST"]),
            Route("/logout", logout, methods=["POST"]),
            Route("/team", team_page),
            Route("/team/assignments", _off_the_loop(team_assignments), methods=["POST"]),
            Route("/next", _next_document),
            Route("/analysis", analysis_view),
            Route("/studies", studies_page),
            Route("/studies/links", _off_the_loop(study_link), methods=["POST"]),
            Route("/studies/{study}", study_page),
            Route("/studies/{study}/values", _off_the_loop(study_choice), methods=["POST"]),
            Route("/", documents),
            Route("/api/documents", documents_api),
            Route("/upload", upload, methods=["POST"]),
            Route("/reviewer", _off_the_loop(set_reviewer), methods=["POST"]),
            Route("/imports", imports),
            Route("/imports", _imports_upload, methods=["POST"]),
            Route("/disagreements", disagreements),
            Route("/search", search),
            Route("/documents/{key}", document),
            Route("/documents/{key}/pages/{number:int}.png", page_image),
            Route("/documents/{key}/pages/{number:int}/words", page_words_api),
            Route("/documents/{key}/find", find_api),
            Route("/documents/{key}/extraction", _off_the_loop(document_extraction), methods=["POST"]),
            Route("/documents/{key}/fields/{field}", _off_the_loop(decision), methods=["POST"]),
            Route("/documents/{key}/fields/{field}/undo", _off_the_loop(undo), methods=["POST"]),
            Route("/documents/{key}/groups/{group}/entries", _off_the_loop(add_entry), methods=["POST"]),
            Route("/documents/{key}/groups/{group}/grid", _off_the_loop(save_grid), methods=["POST"]),
            Route("/documents/{key}/rob2/{entry}", _off_the_loop(save_rob2), methods=["POST"]),
            Route(
                "/documents/{key}/groups/{group}/entries/{entry:int}/reject",
                _off_the_loop(reject_entry),
                methods=["POST"],
            ),
        ],
    )
    app.state.page = ReviewPage(deployment, instance or default_instance)
    app.state.templates = TEMPLATES
    app.state.loopback = host in LOOPBACK_ADDRESSES
    return app
