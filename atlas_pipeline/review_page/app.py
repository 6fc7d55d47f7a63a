"""The review page: a person sees each value with its evidence and approves, corrects or rejects it.

Server-rendered with Starlette and Jinja2 (both already installed with Dagster's web server, so nothing heavy is
added; a few lines of JavaScript for keyboard shortcuts and live document statuses). It reads and writes only the
stores — the artifact store (records, snapshots, the decision log) and the knowledge base (uploads) — and the
Dagster instance (document statuses). State changes are POSTs only, from the page's own origin; no setting or
secret is ever rendered. Bound to 127.0.0.1 by ``atlas review``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import math
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote as url_quote
from urllib.parse import urlencode, urlsplit

import dagster as dg
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from atlas_pipeline.config.hosts import LOOPBACK_ADDRESSES, trusted_hosts
from atlas_pipeline.config.settings import AtlasSettings
from atlas_pipeline.core.templates import ADDED_FROM, entry_field_name, entry_field_parts, entry_in_range
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.knowledge.partition_keys import is_safe_key
from atlas_pipeline.outputs.agreement_report import agreement_rows
from atlas_pipeline.outputs.completion import DocumentState
from atlas_pipeline.parsing.citation import short_authors
from atlas_pipeline.review.accounts import AccountError, authenticate
from atlas_pipeline.review.decisions import (
    WHOLE_DOCUMENT,
    DecisionRefused,
    coerce_value,
    decide,
    load_decisions,
    value_text,
    withdraw,
)
from atlas_pipeline.review.derivations import DERIVED_TIER
from atlas_pipeline.review.entry_grid import NEW_ROW, CellQuote, cell_quotes, entry_refusal, grid_edits
from atlas_pipeline.review.evidence import find_in_document, page_words, render_page
from atlas_pipeline.review.extraction_team import comparison
from atlas_pipeline.review.final_values import decisions_by_field, review_document
from atlas_pipeline.review.person_quotes import Selection, document_scope, selected_words
from atlas_pipeline.review_page.analysis_page import analysis
from atlas_pipeline.review_page.document_view import consensus_candidates, document_context
from atlas_pipeline.review_page.imports_page import imports, upload_workbook
from atlas_pipeline.review_page.login_guard import account_key, address_key
from atlas_pipeline.review_page.page_state import REVIEWER_COOKIE, WRITING, ReviewPage
from atlas_pipeline.review_page.sessions import OPEN_PATHS, SESSION_COOKIE
from atlas_pipeline.review_page.study_pages import choose_value, link_report, study_detail, study_list
from atlas_pipeline.review_page.team_pages import assignments, extraction_state, next_document, team
from atlas_pipeline.search.entries import MAX_QUERY_CHARS, QueryTooLongError
from atlas_pipeline.store.layout import record_path
from atlas_pipeline.store.records import ExtractionRecord, SnapshotRecord, read_record

LOG = logging.getLogger("atlas.review")
BLINDNESS = {"1": ("reviewers",), "models": ("reviewers", "models")}  # the page's independent passes → ``blind_to``
MAX_UPLOAD_FILES = 20

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).with_name("templates")))
TEMPLATES.env.filters["value"] = value_text


def _state_row(state: DocumentState) -> dict[str, Any]:
    review = state.current_review
    parse = state.parse
    return {
        "key": state.key,
        "title": parse.title if parse else "",
        "authors": short_authors(parse.authors) if parse else "",
        "year": parse.year if parse else None,
        "status": state.status.value,
        "reason": state.reason,
        "to_review": review.to_review if review else None,
        "recheck": review.counts.get("recheck", 0) if review else 0,
        "decisions": review.decisions if review else 0,
        "reviewers": ", ".join(review.reviewers) if review else "",
        "disagreements": review.disagreements if review else 0,
        "review_state": review.state if review else "",
    }


def _priority(row: dict[str, Any]) -> tuple:
    """What needs a person first: re-checks, then most fields to review, then the rest by name."""
    waiting = row["to_review"] or 0
    return (-(row["recheck"] or 0), -waiting, row["status"] == "approved", row["key"])


def documents(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    rows = sorted(_state_rows(page, request), key=_priority)
    status, needs = request.query_params.get("status", ""), request.query_params.get("needs") == "review"
    statuses = sorted({row["status"] for row in rows})
    shown = [r for r in rows if (not status or r["status"] == status) and (not needs or (r["to_review"] or 0) > 0)]
    return TEMPLATES.TemplateResponse(
        request,
        "documents.html",
        {
            "rows": shown,
            "total": len(rows),
            "statuses": statuses,
            "status": status,
            "needs": needs,
            "reviewer": page.reviewer(request),
            "message": request.query_params.get("message", ""),
        },
    )


def documents_api(request: Request) -> Response:
    """Statuses for the list's live refresh (pending → extracting → done / failed with the reason)."""
    page: ReviewPage = request.app.state.page
    return JSONResponse(_state_rows(page, request))


def _state_rows(page: ReviewPage, request: Request) -> list[dict[str, Any]]:
    """The list's rows; where the person is extracting blind, nothing that tells how others' values compare."""
    states = page.states()
    hidden = page.hidden_documents(request, [state.key for state in states])
    rows = [_state_row(state) for state in states]
    for row in rows:
        if row["key"] in hidden:
            row["disagreements"] = 0
    return rows


def _key(request: Request) -> str:
    key = request.path_params["key"]
    if not is_safe_key(key):
        raise _NotFound(f"no document {key!r}")
    return key


class _NotFound(Exception):
    pass


def document(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    try:
        key = _key(request)
    except _NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    if not page.store.exists(record_path(key, "snapshot")):
        return PlainTextResponse(f"no document {key!r}", status_code=404)
    return TEMPLATES.TemplateResponse(request, "document.html", document_context(page, request, key))


def _pdf(request: Request) -> bytes | Response:
    """The document's PDF snapshot (immutable), or the 404 that says why there is none."""
    page: ReviewPage = request.app.state.page
    try:
        key = _key(request)
    except _NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    snapshot = read_record(page.store, key, "snapshot", SnapshotRecord)
    if snapshot is None or not snapshot.snapshot_path or not (snapshot.media_type or "").endswith("pdf"):
        return PlainTextResponse("no PDF snapshot for this document", status_code=404)
    return page.store.read_bytes(snapshot.snapshot_path)


MAX_FORM_FIELDS = 100_000
CACHED = {"Cache-Control": "private, max-age=3600"}  # a snapshot never changes: its pages neither


async def page_image(request: Request) -> Response:
    pdf = _pdf(request)
    if isinstance(pdf, Response):
        return pdf
    try:
        scale = float(request.query_params.get("scale", "1"))
        scale = min(max(scale, 0.5), 3.0) if math.isfinite(scale) else 1.0
    except ValueError:
        scale = 1.0
    rotate = request.query_params.get("rotate", "0")
    rotate = int(rotate) if rotate.isascii() and rotate.isdecimal() and len(rotate) <= 3 else -1
    try:
        image = await run_in_threadpool(render_page, pdf, int(request.path_params["number"]), scale, rotate)
    except ValueError as error:
        return PlainTextResponse(str(error), status_code=404)
    return Response(image, media_type="image/png", headers=CACHED)


async def page_words_api(request: Request) -> Response:
    """One page's words and their boxes: the viewer's selectable text layer."""
    pdf = _pdf(request)
    if isinstance(pdf, Response):
        return pdf
    try:
        words = await run_in_threadpool(page_words, pdf, int(request.path_params["number"]))
    except ValueError as error:
        return PlainTextResponse(str(error), status_code=404)
    return JSONResponse(words, headers=CACHED)


async def find_api(request: Request) -> Response:
    """Find in the whole document: the pages where the words are, with their boxes."""
    pdf = _pdf(request)
    if isinstance(pdf, Response):
        return pdf
    query = request.query_params.get("q", "")[:MAX_QUERY_CHARS]
    return JSONResponse(await run_in_threadpool(find_in_document, pdf, query))


def _same_origin(request: Request) -> bool:
    """State changes only from the page itself: a browser sends Origin (or Referer) with every POST."""
    origin = request.headers.get("origin") or request.headers.get("referer")
    if not origin:
        return True  # not a browser (curl, a script on this machine)
    return urlsplit(origin).netloc == request.headers.get("host", "")


@dataclass(frozen=True)
class _FieldPost:
    """A POST about one field of one document, from the page itself."""

    page: ReviewPage
    key: str
    field: str
    form: Any
    reviewer: str

    @property
    def blind(self) -> str:
        """The independent pass to stay in, as a query parameter."""
        return f"&blind={self.form.get('blind')}" if self.form.get("blind") in BLINDNESS else ""


@dataclass(frozen=True)
class _Standing:
    """How a person's decision on a document is recorded: as a reviewer (extractor) or an adjudicator, what they did
    not see, and the decisions they may see (their own only, while they extract blind)."""

    role: str
    blind_to: tuple[str, ...]
    visible: list


def _standing(page: ReviewPage, request: Request, key: str, role: str, form: Any) -> _Standing:
    """With logins, the server's say (``DecisionRefused`` when the person may not decide on ``key`` now): an
    adjudicator or admin who is not one of its extractors settles — never before every extraction is complete once
    one has started; an extractor extracts, within the team's rules (``Team.refusal``). Without logins, what the
    reviewer chose (``role``, the independent pass in ``form``)."""
    decisions = load_decisions(page.store, key)
    user = page.user(request)
    if user is None or not page.logins():
        blind = BLINDNESS.get(str(form.get("blind") or ""), ())
        return _Standing(
            role, blind, [d for d in decisions if d.reviewer == page.reviewer(request, form)] if blind else decisions
        )
    team = page.team(key)
    if role == "adjudicator" or (user.may_settle() and user.name not in team.extractors):
        if user.name in team.extractors and not team.open:
            raise DecisionRefused(
                f"you extract {key} yourself: its differences are settled once every extraction is complete"
            )
        if team.started and not team.open:
            waiting = [name for name in team.extractors if name not in team.completed]
            raise DecisionRefused(
                f"{key} is being extracted by {' and '.join(team.extractors)}: an adjudicator settles it once every "
                f"extraction is complete (waiting for {' and '.join(waiting) or 'a second extractor'})"
            )
        return _Standing("adjudicator", (), decisions)
    refusal = team.refusal(user.name)
    if refusal:
        raise DecisionRefused(refusal)
    blind_to = page.blind_to(request, team)
    return _Standing("reviewer", blind_to, [d for d in decisions if d.reviewer == user.name] if blind_to else decisions)


def refused_page(request: Request, why: str, what: str, status: int = 403) -> Response:
    """A refusal a person reads: what was refused, why, and what to do instead."""
    page: ReviewPage = request.app.state.page
    context = {"why": why, "what": what, "reviewer": page.reviewer(request)}
    return TEMPLATES.TemplateResponse(request, "refused.html", context, status_code=status)


async def _field_post(request: Request, what: str) -> _FieldPost | Response:
    """The post, or the refusal: from another site (403), about an unknown document (404)."""
    page: ReviewPage = request.app.state.page
    if not _same_origin(request):
        return PlainTextResponse(f"refused: {what} must come from the review page itself", status_code=403)
    try:
        key = _key(request)
    except _NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    form = await request.form()
    reviewer = page.reviewer(request, form)
    return _FieldPost(page, key, str(request.path_params["field"]), form, reviewer)


def _page_number(raw: Any) -> int | None:
    text = str(raw or "").strip()
    return int(text) if text.isascii() and text.isdecimal() and 0 < int(text) < 100_000 else None


async def decision(request: Request) -> Response:
    post = await _field_post(request, "a decision")
    if isinstance(post, Response):
        return post
    page, key, field, form, reviewer = post.page, post.key, post.field, post.form, post.reviewer
    user = page.user(request)
    role = "adjudicator" if form.get("role") == "adjudicator" else "reviewer"
    if role == "adjudicator" and user is not None and not user.may_settle():
        return refused_page(
            request,
            f"{user.name} is an {user.role}: settling reviewers' differences takes an adjudicator",
            "Ask an adjudicator of your team to settle it (the Disagreements page lists what waits for one).",
        )
    template = page.template()
    record = reviewed_extraction(page.store, key)
    quote = str(form.get("quote") or "").strip()
    selection = Selection.parse(_page_number(form.get("quote_page")), str(form.get("quote_words") or ""))
    # words selected on the page are the quote and its place; a typed (or edited) quote is found in the text
    selection_scope = selected_words(page.store, key, selection, quote) if selection and quote else None
    scope = selection_scope or (document_scope(page.store, key) if quote else None)
    try:
        standing = _standing(page, request, key, role, form)
        if form.get("action") == "correct" and str(form.get("value") or "").strip():
            value = coerce_value(form.get("value"), template.field_definition(field))
            review = review_document(  # checked against what the person may see: never a hidden value in a refusal
                record, standing.visible, page.deployment.accepted_tiers(), page.deployment.derivations()
            )
            refusal = entry_refusal(review.fields if review else {}, {field: value})
            if refusal:
                raise DecisionRefused(refusal)
        decide(
            page.store,
            record,
            field,
            str(form.get("action") or ""),
            reviewer=reviewer,
            shown=(str(form.get("sha256") or ""), str(form.get("extraction_version") or "")),
            shown_value=str(form["model_value"]) if "model_value" in form else None,
            template_field=template.field_definition(field),
            identity=template.identity_for(field),
            value=form.get("value"),
            quote=str(form.get("quote") or ""),
            note=str(form.get("note") or ""),
            source="page",
            role=standing.role,
            blind_to=standing.blind_to,  # with logins, what the server hid from them; else what the reviewer chose
            reason=str(form.get("reason") or ""),
            scope=scope,
            selected_on=_page_number(form.get("quote_page")),
            proposed=_derived_proposal(page, record, field, standing.visible),
            selection=selection if scope is not None and selection_scope is scope else None,
        )
    except DecisionRefused as refused:
        context = document_context(page, request, key, error=str(refused))
        return TEMPLATES.TemplateResponse(request, "document.html", context, status_code=409)
    go_to = str(form.get("next") or field)
    response = RedirectResponse(
        f"/documents/{url_quote(key)}?field={url_quote(go_to)}{post.blind}&message="
        + url_quote(f"{form.get('action')} recorded for {field} by {reviewer}"),
        status_code=303,
    )
    secure = page.sessions.cookies_secure(request)
    response.set_cookie(REVIEWER_COOKIE, url_quote(reviewer), httponly=True, samesite="strict", secure=secure)
    return response


def _derived_proposal(page: ReviewPage, record: ExtractionRecord | None, field: str, visible: list) -> dict | None:
    """The derived value the page shows the person (from the decisions they may see) in a field the model left
    empty (``review.derivations``), if any."""
    if record is None or (record.values().get(field) or {}).get("value") is not None:
        return None
    review = review_document(record, visible, page.deployment.accepted_tiers(), page.deployment.derivations())
    final = review.fields.get(field) if review else None
    if final is None or final.tier != DERIVED_TIER:
        return None
    return {"value": final.model_value, "tier": DERIVED_TIER}


async def undo(request: Request) -> Response:
    """Take back the reviewer's last decision on a field (a withdrawal in the log; the one before counts again)."""
    post = await _field_post(request, "an undo")
    if isinstance(post, Response):
        return post
    page, key, field, reviewer = post.page, post.key, post.field, post.reviewer
    try:
        record = reviewed_extraction(page.store, key)
        if record is None:
            raise DecisionRefused("this document has no extraction to review yet")
        if field == WHOLE_DOCUMENT:
            raise DecisionRefused("a completed extraction is reopened with its own button, not undone")
        standing = _standing(page, request, key, "reviewer", post.form)
        aligned = decisions_by_field(record, standing.visible, page.deployment.derivations()).get(field, [])
        withdrawn = withdraw(page.store, record, field, reviewer=reviewer, among=aligned)
    except DecisionRefused as refused:
        context = document_context(page, request, key, error=str(refused))
        return TEMPLATES.TemplateResponse(request, "document.html", context, status_code=409)
    undone = withdrawn.note.removeprefix("undo of ")  # the decision taken back ("reject", "correct → 29")
    message = f"{withdrawn.reviewer}'s {undone} of {field} undone"
    return RedirectResponse(
        f"/documents/{url_quote(key)}?field={url_quote(field)}{post.blind}&message={url_quote(message)}",
        status_code=303,
    )


def _group(page: ReviewPage, name: str):
    return next((group for group in page.template().groups if group.name == name), None)


def _back(key: str, message: str, form) -> RedirectResponse:
    blind = f"&blind={form.get('blind')}" if form.get("blind") in BLINDNESS else ""
    return RedirectResponse(f"/documents/{url_quote(key)}?message={url_quote(message)}{blind}", status_code=303)


def _check_entry(group, given: dict[str, str]) -> list:
    """The (field, value) pairs of a new entry, every value checked (refused: no identity, a value of the wrong
    type) before anything is recorded."""
    values = [(field, given[field.name]) for field in group.fields if given.get(field.name)]
    if not any(field.name == group.identity[0] for field, _ in values):
        raise DecisionRefused(f"a new {group.name} entry needs at least its {group.identity[0]}")
    typed = {f"{group.name}[0].{field.name}": coerce_value(value, field) for field, value in values}
    refusal = entry_refusal({}, typed)
    if refusal:
        raise DecisionRefused(refusal.replace(f"{group.name}[0]", f"the new {group.name} entry"))
    return values


def _quote_evidence(page: ReviewPage, key: str, given: CellQuote | None) -> dict[str, Any]:
    """A cell's quote as ``decide`` takes it: words selected on a page graded on themselves, a typed one in the
    document's text (``review.person_quotes``)."""
    if given is None:
        return {}
    page_number = _page_number(given.page)
    selection = Selection.parse(page_number, given.words)
    chosen = selected_words(page.store, key, selection, given.quote) if selection else None
    scope = chosen or document_scope(page.store, key)
    return {
        "quote": given.quote,
        "scope": scope,
        "selected_on": page_number,
        "selection": selection if chosen is not None else None,
    }


def _add_entry(
    page: ReviewPage,
    key: str,
    record,
    group,
    given: dict[str, str],
    reviewer: str,
    form,
    standing: _Standing,
    quotes: dict[str, CellQuote] | None = None,
) -> int:
    """Record a person's new entry of ``group`` (``given``: field → value) on the next free entry number; every
    value is checked before any is recorded. Returns the entry's number."""
    values = _check_entry(group, given)
    taken = {entry_field_parts(name)[1] for name in (record.fields if record else {})}
    taken |= {entry_field_parts(d.field)[1] for d in load_decisions(page.store, key)}
    # a person's entries are numbered from ADDED_FROM: a model's entry never takes their number later
    number = max((n for n in taken if n is not None and n >= ADDED_FROM), default=ADDED_FROM - 1) + 1
    if not entry_in_range(number, group.max_entries):
        raise DecisionRefused(f"{group.name} holds at most {group.max_entries} entries added by people")
    for field, value in values:
        decide(
            page.store,
            record,
            entry_field_name(group.name, number, field.name),
            "correct",
            reviewer=reviewer,
            shown=(str(form.get("sha256") or ""), str(form.get("extraction_version") or "")),
            template_field=field,
            value=value,
            note=str(form.get("note") or ""),
            role=standing.role,
            blind_to=standing.blind_to,
            **_quote_evidence(page, key, (quotes or {}).get(field.name)),
        )
    return number


@dataclass(frozen=True)
class _GroupPost:
    """A POST about one repeating group of one document, from the page itself."""

    page: ReviewPage
    key: str
    group: Any  # a TemplateModule
    form: Any
    record: ExtractionRecord | None
    reviewer: str


async def _group_post(request: Request) -> _GroupPost | Response:
    """The post, or the refusal: from another site (403), about an unknown document or group (404)."""
    page: ReviewPage = request.app.state.page
    if not _same_origin(request):
        return PlainTextResponse("refused: a decision must come from the review page itself", status_code=403)
    try:
        key = _key(request)
    except _NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    group = _group(page, request.path_params["group"])
    if group is None:
        return PlainTextResponse(f"no repeating group {request.path_params['group']!r}", status_code=404)
    form = await request.form(max_fields=MAX_FORM_FIELDS)
    record = reviewed_extraction(page.store, key)
    return _GroupPost(page, key, group, form, record, page.reviewer(request, form))


async def add_entry(request: Request) -> Response:
    """A person adds an entry the model missed (an outcome of the report): one ``correct`` decision per value
    given, on the next free entry number of the group; all values are checked before any is recorded."""
    post = await _group_post(request)
    if isinstance(post, Response):
        return post
    page, key, group, form, record, reviewer = post.page, post.key, post.group, post.form, post.record, post.reviewer
    given = {field.name: str(form.get(field.name) or "").strip() for field in group.fields}
    try:
        standing = _standing(page, request, key, "reviewer", form)
        number = _add_entry(page, key, record, group, given, reviewer, form, standing)
    except DecisionRefused as refused:
        context = document_context(page, request, key, error=str(refused))
        return TEMPLATES.TemplateResponse(request, "document.html", context, status_code=409)
    return _back(key, f"entry {number} of {group.name} added by {reviewer}", form)


async def save_grid(request: Request) -> Response:
    """A repeating group edited as a grid: each changed cell a decision (a new value corrects it, an emptied cell is
    rejected as not reported), the filled new row an added entry; every value checked before any is recorded."""
    post = await _group_post(request)
    if isinstance(post, Response):
        return post
    page, key, group, form, record, reviewer = post.page, post.key, post.group, post.form, post.record, post.reviewer
    edits, new_row = grid_edits(group.name, form)
    definitions = {field.name: field for field in group.fields}
    shown = (str(form.get("sha256") or ""), str(form.get("extraction_version") or ""))
    try:
        standing = _standing(page, request, key, "reviewer", form)
        review = review_document(  # the grid the person saw: their own decisions while they extract blind
            record, standing.visible, page.deployment.accepted_tiers(), page.deployment.derivations()
        )
        fields = review.fields if review else {}
        entries = {entry_field_parts(name)[1] for name in fields if entry_field_parts(name)[0] == group.name}
        changes = {}
        for edit in edits:
            if edit.bare not in definitions:
                raise DecisionRefused(f"{group.name} has no field {edit.bare!r}")
            if entry_field_parts(edit.field)[1] not in entries:
                raise DecisionRefused(f"{key} has no entry {entry_field_parts(edit.field)[1]} of {group.name}")
            changes[edit.field] = coerce_value(edit.value, definitions[edit.bare]) if edit.value else None
        refusal = entry_refusal(fields, changes)
        if refusal:
            raise DecisionRefused(refusal)
        if new_row:
            _check_entry(group, new_row)  # the new row too, before any cell is recorded
        for edit in edits:
            decide(
                page.store,
                record,
                edit.field,
                "correct" if edit.value else "reject",
                reviewer=reviewer,
                shown=shown,
                template_field=definitions[edit.bare],
                identity=group.identity,
                value=edit.value or None,
                reason="" if edit.value else "not_reported",
                note=("edited in the grid" if edit.value != edit.was else "quoted in the grid")
                if edit.value
                else "emptied in the grid",
                role=standing.role,
                blind_to=standing.blind_to,
                **_quote_evidence(page, key, edit.quote),
            )
        quotes = {bare: quote for (entry, bare), quote in cell_quotes(form).items() if entry == NEW_ROW}
        number = _add_entry(page, key, record, group, new_row, reviewer, form, standing, quotes) if new_row else None
    except DecisionRefused as refused:
        context = document_context(page, request, key, error=str(refused))
        return TEMPLATES.TemplateResponse(request, "document.html", context, status_code=409)
    said = [f"{len(edits)} cell(s) changed"] + ([f"entry {number} added"] if number else [])
    return _back(key, f"{group.name} grid: {', '.join(said)} by {reviewer}", form)


async def reject_entry(request: Request) -> Response:
    """A person deletes an entry (not an outcome of this report, a duplicate): every value of it rejected."""
    page: ReviewPage = request.app.state.page
    if not _same_origin(request):
        return PlainTextResponse("refused: a decision must come from the review page itself", status_code=403)
    try:
        key = _key(request)
    except _NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    group, number = request.path_params["group"], int(request.path_params["entry"])
    form = await request.form()
    record = reviewed_extraction(page.store, key)
    reviewer = page.reviewer(request, form)
    template = page.template()
    try:
        standing = _standing(page, request, key, "reviewer", form)
        tiers, derivations = page.deployment.accepted_tiers(), page.deployment.derivations()
        review = review_document(record, standing.visible, tiers, derivations)  # the entry as the person saw it
        names = [n for n in (review.fields if review else {}) if entry_field_parts(n)[:2] == (group, number)]
        if not names:
            raise DecisionRefused(f"{key} has no entry {number} of {group}")
        for name in names:
            if review and review.fields[name].provenance == "rejected":
                continue
            decide(
                page.store,
                record,
                name,
                "reject",
                reviewer=reviewer,
                shown=(str(form.get("sha256") or ""), str(form.get("extraction_version") or "")),
                template_field=template.field_definition(name),
                identity=template.identity_for(name),
                note=str(form.get("note") or "") or "the whole entry rejected",
                role=standing.role,
                blind_to=standing.blind_to,
            )
    except DecisionRefused as refused:
        context = document_context(page, request, key, error=str(refused))
        return TEMPLATES.TemplateResponse(request, "document.html", context, status_code=409)
    return _back(key, f"entry {number} of {group} rejected by {reviewer}", form)


async def set_reviewer(request: Request) -> Response:
    if not _same_origin(request):
        return PlainTextResponse("refused: not from the review page", status_code=403)
    if request.app.state.page.user(request) is not None:
        return PlainTextResponse("refused: decisions are recorded under your login", status_code=403)
    form = await request.form()
    name = str(form.get("reviewer") or "").strip()
    back = str(form.get("back") or "/")
    response = RedirectResponse(back if back.startswith("/") and not back.startswith("//") else "/", status_code=303)
    if name:
        secure = request.app.state.page.sessions.cookies_secure(request)
        response.set_cookie(REVIEWER_COOKIE, url_quote(name), httponly=True, samesite="strict", secure=secure)
    else:
        response.delete_cookie(REVIEWER_COOKIE)
    return response


async def upload(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    if not _same_origin(request):
        return PlainTextResponse("refused: an upload must come from the review page itself", status_code=403)
    user = page.user(request)
    if user is not None and user.role != "admin":
        return refused_page(
            request,
            f"{user.name} is an {user.role}: adding documents to the knowledge base takes an admin",
            "Ask an admin of your team to upload it, or to drop it into the knowledge base folder.",
        )
    knowledge_base = page.deployment.open_knowledge_base()
    limit = knowledge_base.max_bytes
    declared = request.headers.get("content-length", "")
    if limit is not None and declared.isdigit() and int(declared) > MAX_UPLOAD_FILES * limit + 1_000_000:
        message = f"refused: at most {MAX_UPLOAD_FILES} files of {limit / 1e6:g} MB an upload (ATLAS_MAX_DOCUMENT_MB)"
        return RedirectResponse("/?" + urlencode({"message": message}), status_code=303)
    form = await request.form(max_files=MAX_UPLOAD_FILES)  # files spooled to disk as they arrive, not to memory
    added, problems = [], []
    for item in form.getlist("documents"):
        if not hasattr(item, "read"):
            continue
        try:  # read in chunks, the limit counted as they come
            added.append(await run_in_threadpool(knowledge_base.add, item.filename or "", item.file))
        except (ValueError, OSError) as error:
            problems.append(str(error))
        finally:
            await item.close()
    message = (f"added {', '.join(added)}: the sensor picks them up on its next scan. " if added else "") + " ".join(
        problems
    )
    return RedirectResponse("/?" + urlencode({"message": message.strip() or "no file chosen"}), status_code=303)


def disagreements(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    rows, differences = [], []
    states = page.states()
    user, template = page.user(request), page.template()
    teams = page.teams([state.key for state in states]) if user is not None else {}
    hidden = {key for key, team in teams.items() if page.blind_to(request, team)}  # an extractor's own in progress
    states = [state for state in states if state.key not in hidden]
    for state in states:
        team = teams.get(state.key)
        if team is not None and team.started and not team.open:
            continue  # extractions in progress: compared once every extractor has completed
        review = state.current_review  # merged with every decision made so far (``document_states``)
        disputed = [(name, final) for name, final in (review.fields.items() if review else []) if final.disagreement]
        log = load_decisions(page.store, state.key) if disputed and state.extraction is not None else []
        by_field = decisions_by_field(state.extraction, log, page.deployment.derivations()) if log else {}
        extractors = comparison(log) or {}
        for name, final in disputed:
            extracted = state.extraction.fields.get(name) if state.extraction is not None else None
            candidates = consensus_candidates(extracted or {}, by_field.get(name, []), extractors)
            rows.append(
                {
                    "key": state.key,
                    "field": name,
                    "final": final,
                    "candidates": candidates,
                    "entry": _entry_label(review, name, template.identity_for(name)),
                }
            )
        extracted = state.extraction.fields if state.extraction is not None and not state.stale else {}
        for name, field in extracted.items():
            final = review.fields.get(name) if review else None
            differs = isinstance(field, dict) and field.get("agreement") in ("disagreed", "only_one")
            if differs and (final is None or not final.decided):
                differences.append({"key": state.key, "field": name, "extracted": field})
    context = {
        "rows": rows,
        "hidden": len(hidden),
        "may_settle": user is None or user.may_settle(),
        "records": {state.key: state.extraction for state in states if state.extraction is not None},
        "differences": differences,
        "agreement": agreement_rows(states, template),
        "reviewer": page.reviewer(request),
    }
    return TEMPLATES.TemplateResponse(request, "disagreements.html", context)


def _entry_label(review, name: str, identity: list[str]) -> str:
    """A group entry's identity as the adjudicator reads it ("Duration of diarrhea · after randomization"), else ""."""
    group, number, _ = entry_field_parts(name)
    if group is None or review is None:
        return ""
    prefix = f"{group}[{number}]."
    values = [
        value_text(final.final_value if final.decided else final.model_value)
        for part in identity
        if (final := review.fields.get(prefix + part)) is not None
    ]
    return " · ".join(value for value in values if value != "—")


def search(request: Request) -> Response:
    """Search box results: every document's text, tables and values, ranked, each a link to its review."""
    page: ReviewPage = request.app.state.page
    query = request.query_params.get("q", "").strip()
    filters = {name: request.query_params.get(name, "").strip() for name in ("status", "field", "source")}
    hits, error, total = [], "", 0
    if query:
        try:
            with page.deployment.search_index(page.instance()) as index:
                hits = index.search(query, limit=50, **filters)
                total = index.count()
        except QueryTooLongError as problem:
            error = str(problem)
        except Exception as problem:  # said on the page in a few words (never SQL, never a stack trace), logged whole
            LOG.exception("search failed")
            error = f"search unavailable ({type(problem).__name__}); the review page's log has the details"
    hidden = page.hidden_documents(request, sorted({hit.key for hit in hits if hit.part == "field"}))
    hits = [hit for hit in hits if not (hit.part == "field" and hit.key in hidden)]  # values of a blind extraction
    user = page.user(request)
    return TEMPLATES.TemplateResponse(
        request,
        "search.html",
        {
            "search_query": query[:MAX_QUERY_CHARS],  # a query past the limit is not echoed whole
            "filters": filters,
            "hits": hits,
            "blind_note": user is not None and page.logins() and user.role == "extractor",  # said always, never counted
            "total": total,
            "error": error,
            "reviewer": page.reviewer(request),
        },
    )


def _local_path(raw: str) -> str:
    """A path on this site to go back to (never another site's address)."""
    return raw if raw.startswith("/") and not raw.startswith("//") and "\\" not in raw else "/"


async def login(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    context = {"next": _local_path(request.query_params.get("next", "/")), "error": "", "reviewer": ""}
    context["proxy"] = bool(page.settings.review_auth_header)
    context["accounts"] = bool(page.sessions.accounts())
    if request.method == "GET":
        return TEMPLATES.TemplateResponse(request, "login.html", context)
    if not _same_origin(request):
        return PlainTextResponse("refused: a login must come from the review page itself", status_code=403)
    form = await request.form()
    context["next"] = _local_path(str(form.get("next") or "/"))
    name, address = str(form.get("name") or ""), page.sessions.client_address(request)
    # a loopback peer is this machine (or a TLS proxy on it that forwards no address): counting it as one address
    # would let five failures of anyone lock the whole team out; the account's count still holds
    keys = [account_key(name)] + ([address_key(address)] if address not in LOOPBACK_ADDRESSES else [])
    locked = page.sessions.guard.attempt(keys)  # counted as a failure until the password proves right
    if locked is not None:  # refused without looking at the password: the right one waits too
        whom = f"for {locked.who!r}" if locked.kind == "account" else "for this address"
        context["error"] = f"too many failed logins {whom}: try again in {locked.retry_after} s"
        (LOG.warning if locked.first else LOG.info)(
            "review page login refused while locked: %s %r for %d s more (as %r)",
            locked.kind, locked.who[:60], locked.retry_after, name[:60],
        )  # fmt: skip
        headers = {"Retry-After": str(locked.retry_after)}
        return TEMPLATES.TemplateResponse(request, "login.html", context, status_code=429, headers=headers)
    account = await run_in_threadpool(authenticate, page.sessions.accounts(), name, str(form.get("password") or ""))
    if account is None:
        context["error"] = "unknown name or wrong password"
        counts = page.sessions.guard.failed(keys)  # never the password, in the log or anywhere
        in_a_row = ", ".join(f"{n} for the {kind}" for (kind, _), n, _ in counts)
        LOG.warning("failed login to the review page as %r from %r (in a row: %s)", name[:120], address, in_a_row)
        for (kind, who), failures, wait in counts:
            if wait > 0:
                LOG.warning(
                    "review page logins locked for %s %r: %d s after %d failed logins in a row",
                    kind, who[:60], math.ceil(wait), failures,
                )  # fmt: skip
        return TEMPLATES.TemplateResponse(request, "login.html", context, status_code=401)
    page.sessions.guard.succeeded(keys[:1])  # the account's count only: a login of one's own never clears an address
    response = RedirectResponse(context["next"], status_code=303)
    response.set_cookie(
        SESSION_COOKIE,
        page.sessions.start(account),
        httponly=True,
        samesite="strict",
        secure=page.sessions.cookies_secure(request),
        max_age=int(page.settings.review_session_hours * 3600),
    )
    return response


async def logout(request: Request) -> Response:
    page: ReviewPage = request.app.state.page
    if not _same_origin(request):
        return PlainTextResponse("refused: not from the review page", status_code=403)
    page.sessions.end(request.cookies.get(SESSION_COOKIE, ""))
    response = RedirectResponse("/login", status_code=303)
    response.delete_cookie(
        SESSION_COOKIE, httponly=True, samesite="strict", secure=page.sessions.cookies_secure(request)
    )
    return response


async def team_page(request: Request) -> Response:
    return await run_in_threadpool(team, request, TEMPLATES)


async def team_assignments(request: Request) -> Response:
    if not _same_origin(request):
        return PlainTextResponse("refused: an assignment must come from the review page itself", status_code=403)
    return await assignments(request, refused_page)


def _document_refused(request: Request, key: str, error: str) -> Response:
    page: ReviewPage = request.app.state.page
    return TEMPLATES.TemplateResponse(
        request, "document.html", document_context(page, request, key, error=error), status_code=409
    )


async def document_extraction(request: Request) -> Response:
    if not _same_origin(request):
        return PlainTextResponse("refused: a completion must come from the review page itself", status_code=403)
    try:
        _key(request)
    except _NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    return await extraction_state(request, refused_page, _document_refused)


async def _imports_upload(request: Request) -> Response:
    if not _same_origin(request):
        return PlainTextResponse("refused: a workbook must come from the review page itself", status_code=403)
    return await upload_workbook(request, refused_page)


async def _next_document(request: Request) -> Response:
    return await run_in_threadpool(next_document, request)


async def analysis_view(request: Request) -> Response:
    return await run_in_threadpool(analysis, request, TEMPLATES)


async def studies_page(request: Request) -> Response:
    return await run_in_threadpool(study_list, request, TEMPLATES)


async def study_page(request: Request) -> Response:
    return await run_in_threadpool(study_detail, request, TEMPLATES)


def _not_adjudicator(request: Request, what: str) -> Response | None:
    """With logins, a study's choices and links are an adjudicator's: the refusal page for anyone else."""
    page: ReviewPage = request.app.state.page
    user = page.user(request)
    if user is None or user.may_settle():
        return None
    return refused_page(
        request,
        f"{user.name} is an {user.role}: {what} takes an adjudicator",
        "Note what you found on the document's page (a decision's note) and ask an adjudicator to settle the study.",
    )


async def study_choice(request: Request) -> Response:
    if not _same_origin(request):
        return PlainTextResponse("refused: a choice must come from the review page itself", status_code=403)
    return _not_adjudicator(request, "choosing which report's value a study takes") or await choose_value(
        request, TEMPLATES
    )


async def study_link(request: Request) -> Response:
    if not _same_origin(request):
        return PlainTextResponse("refused: a link must come from the review page itself", status_code=403)
    return _not_adjudicator(request, "linking reports into studies") or await link_report(request)


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
        if _same_origin(request):
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
    settings: AtlasSettings, instance: Callable[[], dg.DagsterInstance] | None = None, host: str = "127.0.0.1"
) -> Starlette:
    """The review page's ASGI app over one deployment (``instance``: how to reach the Dagster instance; default
    ``DagsterInstance.get()`` from DAGSTER_HOME, opened once; ``host``: the address it listens on — beyond this
    machine it answers only while people log in)."""
    cached: list[dg.DagsterInstance] = []

    def default_instance() -> dg.DagsterInstance:
        if not cached:
            cached.append(dg.DagsterInstance.get())
        return cached[0]

    hosts = trusted_hosts(settings.trusted_hosts)  # no DNS rebinding
    app = Starlette(
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts),
            Middleware(BaseHTTPMiddleware, dispatch=_who_is_there),
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
            Route(
                "/documents/{key}/groups/{group}/entries/{entry:int}/reject",
                _off_the_loop(reject_entry),
                methods=["POST"],
            ),
        ],
    )
    app.state.page = ReviewPage(settings, instance or default_instance)
    app.state.templates = TEMPLATES
    app.state.loopback = host in LOOPBACK_ADDRESSES
    return app
