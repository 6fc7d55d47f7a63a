"""The review page's studies: every study with its reports, a study's values side by side across its reports with
the conflicts to settle, and a person's links between reports (``knowledge.studies``)."""

from __future__ import annotations

from urllib.parse import quote as url_quote
from urllib.parse import urlencode

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.templating import Jinja2Templates

from atlas_pipeline.knowledge.partition_keys import is_safe_key
from atlas_pipeline.knowledge.studies import link, unlink
from atlas_pipeline.outputs.study_labels import study_labels
from atlas_pipeline.outputs.study_report import Study, studies
from atlas_pipeline.outputs.waiting_values import waiting_values
from atlas_pipeline.review.decisions import DecisionRefused
from atlas_pipeline.review.study_values import choose, load_choices
from atlas_pipeline.review_page.page_state import ReviewPage


def _all(page: ReviewPage, request: Request) -> list[Study]:
    """Every study, its values as the person may see them (an extractor's own where they extract blind)."""
    return studies(page.visible_states(request), page.template(), load_choices(page.store))


def study_list(request: Request, templates: Jinja2Templates) -> Response:
    page: ReviewPage = request.app.state.page
    found = _all(page, request)
    context = {
        "studies": found,
        "labels": study_labels(found),  # the names RevMan's files and the forest plots give them
        "reviewer": page.reviewer(request),
        "message": request.query_params.get("message", ""),
    }
    return templates.TemplateResponse(request, "studies.html", context)


def study_detail(request: Request, templates: Jinja2Templates, error: str = "", status: int = 200) -> Response:
    page: ReviewPage = request.app.state.page
    study_id = request.path_params["study"]
    found = _all(page, request)
    study = next((s for s in found if s.id == study_id), None)
    if study is None:
        return PlainTextResponse(f"no study {study_id!r}", status_code=404)
    user = page.user(request)
    template = page.template()
    identity = next((module.identity for module in template.groups if module.name == "outcomes"), [])
    waiting = [  # what the team's process has not made final: never offered to take, named with who can settle it
        item
        for report in study.reports
        for item in waiting_values(report.key, report.current_review, "outcomes", identity, {}, every=True)
    ]
    context = {
        "study": study,
        "waiting": waiting,
        "label": study_labels(found).get(study.id, study.id),
        "may_settle": user is None or user.may_settle(),
        "others": [s for s in found if s.id != study.id],
        "reviewer": page.reviewer(request),
        "message": request.query_params.get("message", ""),
        "error": error,
    }
    return templates.TemplateResponse(request, "study.html", context, status_code=status)


async def choose_value(request: Request, templates: Jinja2Templates) -> Response:
    """A person settles a conflict between reports: the study takes one report's value."""
    page: ReviewPage = request.app.state.page
    study_id = request.path_params["study"]
    form = await request.form()
    study = next((s for s in _all(page, request) if s.id == study_id), None)
    if study is None:
        return PlainTextResponse(f"no study {study_id!r}", status_code=404)
    field = str(form.get("field") or "")
    reviewer = page.reviewer(request, form)
    try:
        choose(
            page.store,
            study.id,
            field,
            str(form.get("from_report") or ""),
            study.values_by_report(page.template()),
            reviewer=reviewer,
            note=str(form.get("note") or ""),
        )
    except DecisionRefused as refused:
        return study_detail(request, templates, error=str(refused), status=409)
    message = f"{field} of {study.id} taken from {form.get('from_report')} by {reviewer}"
    return RedirectResponse(f"/studies/{url_quote(study.id)}?" + urlencode({"message": message}), status_code=303)


async def link_report(request: Request) -> Response:
    """A person's word on a report's study: join another report's study, set it apart, or take the link back."""
    page: ReviewPage = request.app.state.page
    form = await request.form()
    key, to, action = str(form.get("key") or ""), str(form.get("to") or ""), str(form.get("action") or "link")
    if not is_safe_key(key) or (to and not is_safe_key(to)):
        return PlainTextResponse("no such document", status_code=404)
    reviewer = page.reviewer(request, form) or "reviewer"
    try:
        if action == "unlink":
            taken = unlink(page.store, key)
            message = f"{key}: the person's link taken back" if taken else f"{key} had no link from a person"
        else:
            link(page.store, key, to if action == "link" else "", by=reviewer, note=str(form.get("note") or ""))
            message = f"{key} joined the study of {to}" if action == "link" else f"{key} set apart as its own study"
    except ValueError as refused:
        return RedirectResponse("/studies?" + urlencode({"message": str(refused)}), status_code=303)
    return RedirectResponse("/studies?" + urlencode({"message": message}), status_code=303)
