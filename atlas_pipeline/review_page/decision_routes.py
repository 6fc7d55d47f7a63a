"""The review page's decisions on a document: a field approved, corrected or rejected (with its quote and place),
a person's last decision on a field undone, and an extractor's extraction of the document completed or reopened —
each recorded in the decision log as the person's standing allows (``common.standing_for``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote as url_quote

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from atlas_pipeline.core.templates import entry_field_parts
from atlas_pipeline.extraction.kept_extraction import reviewed_extraction
from atlas_pipeline.review.decisions import (
    WHOLE_DOCUMENT,
    DecisionRefused,
    DecisionRequest,
    coerce_value,
    decide,
    withdraw,
)
from atlas_pipeline.review.derivations import DERIVED_TIER
from atlas_pipeline.review.entry_grid import entry_refusal
from atlas_pipeline.review.final_values import decisions_by_field, review_document
from atlas_pipeline.review_page.common import (
    BLINDNESS,
    NotFound,
    document_key,
    document_key_or_404,
    document_refused,
    quote_evidence,
    refused_page,
    standing_for,
)
from atlas_pipeline.review_page.page_state import REVIEWER_COOKIE, ReviewPage
from atlas_pipeline.review_page.team_pages import extraction_state
from atlas_pipeline.store.records import ExtractionRecord


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


async def _field_post(request: Request) -> _FieldPost | Response:
    """The post, or the refusal: about an unknown document (404)."""
    page: ReviewPage = request.app.state.page
    key = document_key_or_404(request)
    if isinstance(key, Response):
        return key
    form = await request.form()
    reviewer = page.reviewer(request, form)
    return _FieldPost(page, key, str(request.path_params["field"]), form, reviewer)


async def decision(request: Request) -> Response:
    post = await _field_post(request)
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
    try:
        assessment = template.rob2
        if assessment is not None and entry_field_parts(field)[0] == assessment.name and role != "adjudicator":
            raise DecisionRefused("RoB 2 is answered on the document's RoB 2 panel, a domain at a time")
        standing = standing_for(page, request, key, role, form)
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
            DecisionRequest(
                field,
                str(form.get("action") or ""),
                reviewer=reviewer,
                shown=(str(form.get("sha256") or ""), str(form.get("extraction_version") or "")),
                shown_value=str(form["model_value"]) if "model_value" in form else None,
                template_field=template.field_definition(field),
                identity=template.identity_for(field),
                value=form.get("value"),
                note=str(form.get("note") or ""),
                source="page",
                role=standing.role,
                blind_to=standing.blind_to,  # with logins, what the server hid from them; else what they chose
                reason=str(form.get("reason") or ""),
                proposed=_derived_proposal(page, record, field, standing.visible),
                **quote_evidence(page, key, form.get("quote"), form.get("quote_page"), form.get("quote_words")),
            ),
        )
    except DecisionRefused as refused:
        return document_refused(request, key, str(refused), field, form)
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
    post = await _field_post(request)
    if isinstance(post, Response):
        return post
    page, key, field, reviewer = post.page, post.key, post.field, post.reviewer
    try:
        record = reviewed_extraction(page.store, key)
        if record is None:
            raise DecisionRefused("this document has no extraction to review yet")
        if field == WHOLE_DOCUMENT:
            raise DecisionRefused("a completed extraction is reopened with its own button, not undone")
        standing = standing_for(page, request, key, "reviewer", post.form)
        aligned = decisions_by_field(record, standing.visible, page.deployment.derivations()).get(field, [])
        withdrawn = withdraw(page.store, record, field, reviewer=reviewer, among=aligned)
    except DecisionRefused as refused:
        return document_refused(request, key, str(refused), field, post.form)
    undone = withdrawn.note.removeprefix("undo of ")  # the decision taken back ("reject", "correct → 29")
    message = f"{withdrawn.reviewer}'s {undone} of {field} undone"
    return RedirectResponse(
        f"/documents/{url_quote(key)}?field={url_quote(field)}{post.blind}&message={url_quote(message)}",
        status_code=303,
    )


async def document_extraction(request: Request) -> Response:
    try:
        document_key(request)
    except NotFound as error:
        return PlainTextResponse(str(error), status_code=404)
    return await extraction_state(request, refused_page, document_refused)
